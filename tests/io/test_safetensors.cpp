// SafetensorsFile and SafetensorsWriter: round trips through a real file, typed views, metadata, and
// every malformed-header fault named in issue 10 (each must throw, naming the file, tensor and fault).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/io.hpp>

#include "io/io_support.hpp"
#include "support/random.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::Dtype;
using lowbit::RowMatrixXf;
using lowbit::SafetensorsFile;
using lowbit::SafetensorsWriter;

/// A safetensors file from a header text and `data_size` data bytes (values i % 251).
std::vector<std::byte> raw_file(const std::string& header, std::size_t data_size) {
    lowbit::test::ByteWriter w;
    w.put<std::uint64_t>(header.size());
    for (const char c : header) w.bytes.push_back(static_cast<std::byte>(c));
    for (std::size_t i = 0; i < data_size; ++i) w.bytes.push_back(static_cast<std::byte>(i % 251));
    return w.bytes;
}

/// Checks that opening `bytes` (written to a file named bad.safetensors) throws std::invalid_argument whose
/// message contains the file name and every one of `parts`.
void check_rejected(const std::vector<std::byte>& bytes, const std::vector<std::string>& parts) {
    lowbit::test::TempDir dir;
    const auto path = dir / "bad.safetensors";
    lowbit::test::write_file(path, bytes);
    try {
        (void)SafetensorsFile::open(path);
        FAIL("no exception");
    } catch (const std::invalid_argument& e) {
        const std::string message = e.what();
        INFO(message);
        CHECK_THAT(message, ContainsSubstring("bad.safetensors"));
        for (const auto& part : parts) CHECK_THAT(message, ContainsSubstring(part));
    }
}

}  // namespace

TEST_CASE("SafetensorsWriter -> file -> SafetensorsFile keeps every tensor, dtype, shape and byte", "[io]") {
    auto rng = lowbit::test::make_rng(101);
    const auto values = lowbit::test::uniform_floats(rng, 6 * 10, -3.0f, 3.0f);
    const RowMatrixXf matrix = Eigen::Map<const RowMatrixXf>(values.data(), 6, 10);
    const std::vector<std::uint32_t> words{1u, 0xdeadbeefu, 7u};
    const std::vector<std::int8_t> int8s{-128, -1, 0, 1, 127};
    const std::vector<std::uint8_t> uint8s{0, 200, 255};
    const std::vector<std::int64_t> int64s{-5, std::numeric_limits<std::int64_t>::max()};
    const float scalar = 2.5f;

    SafetensorsWriter writer;
    writer.add("m.f32", matrix);
    writer.add("m.f16", matrix, Dtype::f16);
    writer.add("m.bf16", matrix, Dtype::bf16);
    writer.add("words", words, {3});
    writer.add("int8s", int8s, {5});
    writer.add("uint8s", uint8s, {1, 3});
    writer.add("int64s", int64s, {2});
    writer.add("scalar", std::span<const float>(&scalar, 1), {});
    writer.add("empty", std::vector<float>{}, {0, 4});
    writer.set_metadata("format", "mlx");
    writer.set_metadata("note", "lowbit test");

    lowbit::test::TempDir dir;
    const auto path = dir / "round.safetensors";
    writer.write(path);
    const auto file = SafetensorsFile::open(path);

    CHECK(file.names() == std::vector<std::string>{"empty", "int64s", "int8s", "m.bf16", "m.f16", "m.f32", "scalar",
                                                    "uint8s", "words"});
    CHECK(file.contains("words"));
    CHECK_FALSE(file.contains("word"));
    CHECK(file.metadata().at("format") == "mlx");
    CHECK(file.metadata().at("note") == "lowbit test");

    CHECK(file.to_matrix("m.f32") == matrix);
    const RowMatrixXf from_f16 = file.to_matrix("m.f16");
    const RowMatrixXf from_bf16 = file.to_matrix("m.bf16");
    for (Eigen::Index i = 0; i < matrix.size(); ++i) {
        CHECK(from_f16.data()[i] == lowbit::io_detail::f16_to_float(lowbit::io_detail::float_to_f16(matrix.data()[i])));
        CHECK(from_bf16.data()[i] == lowbit::io_detail::bf16_to_float(lowbit::io_detail::float_to_bf16(matrix.data()[i])));
    }
    const auto f16 = file.tensor("m.f16");
    CHECK(f16.dtype == Dtype::f16);
    CHECK(f16.shape == std::vector<std::uint64_t>{6, 10});
    CHECK(f16.bytes.size() == 120);
    CHECK(f16.span<std::uint16_t>().size() == 60);

    const auto w = file.tensor("words");
    CHECK(w.dtype == Dtype::u32);
    const auto w_span = w.span<std::uint32_t>();
    CHECK(std::vector<std::uint32_t>(w_span.begin(), w_span.end()) == words);
    CHECK(file.tensor("int8s").to_vector<std::int8_t>() == int8s);
    CHECK(file.tensor("uint8s").shape == std::vector<std::uint64_t>{1, 3});
    CHECK(file.tensor("int64s").to_vector<std::int64_t>() == int64s);
    CHECK(file.tensor("scalar").shape.empty());
    CHECK(file.to_vector("scalar") == std::vector<float>{2.5f});
    CHECK(file.tensor("empty").bytes.empty());
    CHECK(file.to_matrix("empty").rows() == 0);

    // Wrong-type access names the tensor and both types.
    CHECK_THROWS_WITH(file.tensor("words").span<float>(), ContainsSubstring("words") && ContainsSubstring("U32"));
    CHECK_THROWS_WITH(file.to_matrix("words"), ContainsSubstring("words") && ContainsSubstring("U32"));
    CHECK_THROWS_WITH(file.to_matrix("int64s"), ContainsSubstring("2-D"));
    CHECK_THROWS_WITH(file.tensor("nope"), ContainsSubstring("round.safetensors") && ContainsSubstring("nope"));

    // Same bytes from memory, and the in-memory writer output equals the file.
    const auto bytes = lowbit::test::read_file(path);
    CHECK(bytes == writer.to_bytes());
    const auto in_memory = SafetensorsFile::from_bytes(bytes);
    CHECK(in_memory.to_matrix("m.f32") == matrix);
}

TEST_CASE("SafetensorsWriter lays out tensors aligned, header padded to 8 bytes", "[io]") {
    SafetensorsWriter writer;
    writer.add("a", std::vector<std::uint8_t>{1, 2, 3}, {3});
    writer.add("b", std::vector<std::uint16_t>{4}, {1});
    writer.add("c", std::vector<std::uint64_t>{5}, {1});
    const auto bytes = writer.to_bytes();
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, bytes.data(), 8);
    CHECK(header_size % 8 == 0);
    const auto file = SafetensorsFile::from_bytes(bytes);
    // Largest element size first: c (8), b (2), a (1).
    CHECK(file.tensor("c").bytes.data() == bytes.data() + 8 + header_size);
    CHECK(file.tensor("b").bytes.data() == bytes.data() + 8 + header_size + 8);
    CHECK(file.tensor("c").span<std::uint64_t>()[0] == 5);
}

TEST_CASE("a file from another writer with unaligned tensors: copies work, spans refuse", "[io]") {
    const std::string header =
        R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U32","shape":[2],"data_offsets":[1,9]}})";
    auto bytes = raw_file(header + std::string((8 - header.size() % 8) % 8, ' '), 9);
    const std::uint32_t words[2] = {0x01020304u, 0xa0b0c0d0u};
    const std::size_t data = bytes.size() - 9;
    std::memcpy(bytes.data() + data + 1, words, 8);
    const auto file = SafetensorsFile::from_bytes(bytes, "unaligned");
    CHECK(file.tensor("w").to_vector<std::uint32_t>() == std::vector<std::uint32_t>{0x01020304u, 0xa0b0c0d0u});
    if (reinterpret_cast<std::uintptr_t>(file.tensor("w").bytes.data()) % 4 != 0)
        CHECK_THROWS_WITH(file.tensor("w").span<std::uint32_t>(), ContainsSubstring("aligned"));
}

TEST_CASE("SafetensorsFile rejects each malformed header, naming file, tensor and fault", "[io]") {
    const std::string good = R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
    SECTION("the header is fine") { CHECK_NOTHROW(SafetensorsFile::from_bytes(raw_file(good, 16))); }
    SECTION("null metadata, as mlx.core.save_safetensors writes without metadata, is none") {
        const auto bytes = raw_file(R"({"__metadata__":null,)" + good.substr(1), 16);
        CHECK(SafetensorsFile::from_bytes(bytes).metadata().empty());
    }
    SECTION("shorter than the length field") { check_rejected({std::byte{1}, std::byte{0}}, {"truncated"}); }
    SECTION("header length beyond the file") {
        auto bytes = raw_file(good, 16);
        const std::uint64_t huge = 1ull << 40;
        std::memcpy(bytes.data(), &huge, 8);
        check_rejected(bytes, {"header length", "beyond the file"});
    }
    SECTION("JSON that does not parse") { check_rejected(raw_file(R"({"t": {"dtype": )", 0), {"does not parse"}); }
    SECTION("JSON that is not an object") { check_rejected(raw_file("[1, 2]", 0), {"not an object"}); }
    SECTION("unknown dtype") {
        check_rejected(raw_file(R"({"t":{"dtype":"F12","shape":[2],"data_offsets":[0,4]}})", 4),
                       {"'t'", "unknown dtype", "F12"});
    }
    SECTION("shape whose byte size overflows") {
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
                       {"'t'", "overflows"});
    }
    SECTION("shape that disagrees with the offsets") {
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", 16),
                       {"'t'", "needs 24 bytes", "hold 16"});
    }
    SECTION("offsets outside the data section") {
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})", 16),
                       {"'t'", "outside the data section"});
    }
    SECTION("offsets that run backwards") {
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 16), {"'t'", "backwards"});
    }
    SECTION("overlapping tensors") {
        check_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                12),
                       {"'b'", "overlap", "'a'"});
    }
    SECTION("a truncated file") {
        SafetensorsWriter writer;
        writer.add("weights", RowMatrixXf::Ones(8, 8));
        auto bytes = writer.to_bytes();
        bytes.resize(bytes.size() - 10);
        check_rejected(bytes, {"'weights'", "outside the data section"});
    }
    SECTION("a negative or fractional shape entry, offsets that are not two numbers") {
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), {"'t'", "shape"});
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), {"'t'", "shape"});
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), {"'t'", "data_offsets"});
        check_rejected(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", 8), {"'t'", "data_offsets"});
        check_rejected(raw_file(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8), {"'t'", "dtype"});
        check_rejected(raw_file(R"({"t":[1]})", 8), {"'t'", "not an object"});
    }
    SECTION("metadata that is not string to string") {
        check_rejected(raw_file(R"({"__metadata__":{"n":1}})", 0), {"__metadata__", "'n'"});
        check_rejected(raw_file(R"({"__metadata__":[]})", 0), {"__metadata__"});
    }
}

TEST_CASE("SafetensorsFile::open of a missing file is a runtime_error naming it", "[io]") {
    lowbit::test::TempDir dir;
    CHECK_THROWS_AS(SafetensorsFile::open(dir / "missing.safetensors"), std::runtime_error);
    CHECK_THROWS_WITH(SafetensorsFile::open(dir / "missing.safetensors"), ContainsSubstring("missing.safetensors"));
    CHECK_THROWS_AS(SafetensorsFile::open(dir.path()), std::runtime_error);  // a directory
    lowbit::test::write_file(dir / "empty.safetensors", {});
    CHECK_THROWS_AS(SafetensorsFile::open(dir / "empty.safetensors"), std::invalid_argument);
}

TEST_CASE("SafetensorsWriter refuses bad tensors and reports write failures", "[io]") {
    SafetensorsWriter writer;
    writer.add("a", std::vector<float>{1, 2}, {2});
    CHECK_THROWS_WITH(writer.add("a", std::vector<float>{1}, {1}), ContainsSubstring("'a'") && ContainsSubstring("already"));
    CHECK_THROWS_WITH(writer.add("b", std::vector<float>{1, 2}, {3}), ContainsSubstring("'b'") && ContainsSubstring("needs 12"));
    CHECK_THROWS_WITH(writer.add("c", std::vector<float>{1}, {1}, Dtype::u32), ContainsSubstring("F32, F16 or BF16"));
    CHECK_THROWS_WITH(writer.add("d", std::vector<std::uint32_t>{1}, {1}, Dtype::i32), ContainsSubstring("U32"));
    CHECK_THROWS_AS(writer.add("__metadata__", std::vector<float>{1}, {1}), std::invalid_argument);
    CHECK_THROWS_AS(writer.add("", std::vector<float>{1}, {1}), std::invalid_argument);
    lowbit::test::TempDir dir;
    CHECK_THROWS_AS(writer.write(dir / "no-such-dir" / "x.safetensors"), std::runtime_error);
    SafetensorsWriter not_utf8;
    not_utf8.add("bad\xff", std::vector<float>{1}, {1});
    CHECK_THROWS_WITH(not_utf8.to_bytes(), ContainsSubstring("UTF-8") || ContainsSubstring("utf-8"));
}
