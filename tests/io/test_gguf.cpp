// GgufFile: metadata of every value type, tensor infos, F32/F16/BF16, Q4_0/Q4_1/Q8_0 and k-quant conversion equal
// to ggml's dequantization bit for bit (the worked example N12.a and random blocks), the exact
// QuantizedMatrix mapping of N12.3, and every malformed-file fault of issue 10.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/io.hpp>

#include "io/io_support.hpp"
#include "support/float_bits.hpp"
#include "support/random.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::GgmlType;
using lowbit::GgufFile;
using lowbit::RowMatrixXf;
using lowbit::test::bits_of;
using lowbit::test::ByteWriter;
using lowbit::test::GgufBuilder;

constexpr std::uint32_t q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, iq4_nl = 20, q2_k = 10, q3_k = 11, q4_k = 12,
                        q5_k = 13, q6_k = 14;

/// A random finite f16 bit pattern of either sign, from subnormal to about 2^4.
std::uint16_t random_f16(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> exponent(0, 19), mantissa(0, 1023), sign(0, 1);
    return static_cast<std::uint16_t>((sign(rng) << 15) | (exponent(rng) << 10) | mantissa(rng));
}

/// `blocks` random blocks of a Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 type.
std::vector<std::byte> random_blocks(std::mt19937_64& rng, std::uint32_t type, std::size_t blocks) {
    std::uniform_int_distribution<int> byte(0, 255);
    ByteWriter w;
    for (std::size_t b = 0; b < blocks; ++b) {
        w.put<std::uint16_t>(random_f16(rng));
        if (type == q4_1 || type == q5_1) w.put<std::uint16_t>(random_f16(rng));
        const int count = type == q8_0 ? 32 : type == q5_0 || type == q5_1 ? 20 : 16;  // Q5: qh's 4 bytes, then qs
        for (int j = 0; j < count; ++j) w.put<std::uint8_t>(static_cast<std::uint8_t>(byte(rng)));
    }
    return w.bytes;
}

/// ggml's dequantize_row_q4_0 / q4_1 / q5_0 / q5_1 / q8_0, written out independently of lowbit's decoder.
std::vector<float> ggml_reference(std::uint32_t type, const std::vector<std::byte>& bytes) {
    std::vector<float> out;
    const std::size_t block_bytes = type == q4_0 ? 18 : type == q4_1 ? 20 : type == q5_0 ? 22 : type == q5_1 ? 24 : 34;
    for (std::size_t offset = 0; offset < bytes.size(); offset += block_bytes) {
        const std::byte* block = bytes.data() + offset;
        std::uint16_t d_bits = 0, m_bits = 0;
        std::memcpy(&d_bits, block, 2);
        const float d = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(d_bits));
        if (type == q8_0) {
            for (int j = 0; j < 32; ++j) out.push_back(static_cast<float>(static_cast<std::int8_t>(block[2 + j])) * d);
            continue;
        }
        const bool has_min = type == q4_1 || type == q5_1, five = type == q5_0 || type == q5_1;
        std::memcpy(&m_bits, block + 2, 2);
        const float m = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(m_bits));
        std::uint32_t qh = 0;
        if (five) std::memcpy(&qh, block + (has_min ? 4 : 2), 4);
        const std::byte* qs = block + (has_min ? 4 : 2) + (five ? 4 : 0);
        const int offset_code = type == q4_0 ? 8 : type == q5_0 ? 16 : 0;
        std::vector<float> values(32);
        for (int j = 0; j < 16; ++j) {  // ggml: xh_0 = ((qh >> j) << 4) & 0x10, xh_1 = (qh >> (j + 12)) & 0x10
            const int lo = (static_cast<int>(qs[j]) & 0x0f) | static_cast<int>(((qh >> j) << 4) & 0x10);
            const int hi = (static_cast<int>(qs[j]) >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
            values[j] = has_min ? static_cast<float>(lo) * d + m : static_cast<float>(lo - offset_code) * d;
            values[j + 16] = has_min ? static_cast<float>(hi) * d + m : static_cast<float>(hi - offset_code) * d;
        }
        out.insert(out.end(), values.begin(), values.end());
    }
    return out;
}

/// Bytes per 256-element super-block of a k-quant type.
std::size_t kquant_bytes(std::uint32_t type) {
    return type == q2_k ? 84 : type == q3_k ? 110 : type == q4_k ? 144 : type == q5_k ? 176 : 210;
}

/// `blocks` random super-blocks of a k-quant type: random bytes, with random finite f16 in d (and dmin).
std::vector<std::byte> random_kquant_blocks(std::mt19937_64& rng, std::uint32_t type, std::size_t blocks) {
    std::uniform_int_distribution<int> byte(0, 255);
    const std::size_t size = kquant_bytes(type);
    std::vector<std::byte> out(blocks * size);
    for (auto& b : out) b = static_cast<std::byte>(byte(rng));
    for (std::size_t b = 0; b < blocks; ++b) {
        std::byte* block = out.data() + b * size;
        const auto put_f16 = [&](std::size_t offset) {
            const std::uint16_t bits = random_f16(rng);
            std::memcpy(block + offset, &bits, 2);
        };
        if (type == q2_k) put_f16(80), put_f16(82);
        if (type == q3_k) put_f16(108);
        if (type == q4_k || type == q5_k) put_f16(0), put_f16(2);
        if (type == q6_k) put_f16(208);
    }
    return out;
}

float f16_at(const std::byte* p) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, p, 2);
    return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

/// ggml's dequantize_row_q2_K .. q6_K, in ggml's own loop order (sub-block pairs, shifting masks),
/// written independently of lowbit's per-element decoder.
std::vector<float> ggml_kquant_reference(std::uint32_t type, const std::vector<std::byte>& bytes) {
    std::vector<float> out;
    const auto u8 = [](const std::byte* p, int j) { return static_cast<int>(static_cast<std::uint8_t>(p[j])); };
    const auto scale_min_k4 = [&](int j, const std::byte* q, int& d, int& m) {
        if (j < 4) {
            d = u8(q, j) & 63;
            m = u8(q, j + 4) & 63;
        } else {
            d = (u8(q, j + 4) & 0xF) | ((u8(q, j - 4) >> 6) << 4);
            m = (u8(q, j + 4) >> 4) | ((u8(q, j) >> 6) << 4);
        }
    };
    for (std::size_t offset = 0; offset < bytes.size(); offset += kquant_bytes(type)) {
        const std::byte* block = bytes.data() + offset;
        std::vector<float> y(256);
        float* yp = y.data();
        if (type == q2_k) {
            const float d = f16_at(block + 80), dmin = f16_at(block + 82);
            const std::byte* q = block + 16;
            int is = 0;
            for (int n = 0; n < 256; n += 128, q += 32)
                for (int shift = 0; shift < 8; shift += 2)
                    for (int half = 0; half < 2; ++half) {
                        const int sc = u8(block, is++);
                        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
                        for (int l = 0; l < 16; ++l)
                            *yp++ = dl * static_cast<float>((u8(q, l + 16 * half) >> shift) & 3) - ml;
                    }
        } else if (type == q3_k) {
            const float d = f16_at(block + 108);
            std::uint32_t aux[4];
            std::memcpy(aux, block + 96, 12);
            const std::uint32_t kmask1 = 0x03030303u, kmask2 = 0x0f0f0f0fu, tmp = aux[2];
            aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
            aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
            aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
            aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
            std::int8_t scales[16];
            std::memcpy(scales, aux, 16);
            const std::byte* q = block + 32;
            const std::byte* hm = block;
            int is = 0, m = 1;
            for (int n = 0; n < 256; n += 128, q += 32)
                for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                    for (int half = 0; half < 2; ++half) {
                        const float dl = d * static_cast<float>(scales[is++] - 32);
                        for (int l = 16 * half; l < 16 * half + 16; ++l)
                            *yp++ = dl * static_cast<float>(((u8(q, l) >> shift) & 3) - ((u8(hm, l) & m) ? 0 : 4));
                    }
        } else if (type == q4_k || type == q5_k) {
            const float d = f16_at(block), dmin = f16_at(block + 2);
            const std::byte* scales = block + 4;
            const std::byte* ql = block + (type == q5_k ? 48 : 16);
            const std::byte* qh = block + 16;
            int u1 = 1, u2 = 2;
            for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
                int sc = 0, m = 0;
                scale_min_k4(is, scales, sc, m);
                const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
                scale_min_k4(is + 1, scales, sc, m);
                const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
                const bool five = type == q5_k;
                for (int l = 0; l < 32; ++l)
                    *yp++ = d1 * static_cast<float>((u8(ql, l) & 0xF) + (five && (u8(qh, l) & u1) ? 16 : 0)) - m1;
                for (int l = 0; l < 32; ++l)
                    *yp++ = d2 * static_cast<float>((u8(ql, l) >> 4) + (five && (u8(qh, l) & u2) ? 16 : 0)) - m2;
            }
        } else {
            const float d = f16_at(block + 208);
            const std::byte* ql = block;
            const std::byte* qh = block + 128;
            const std::byte* sc = block + 192;
            for (int n = 0; n < 256; n += 128, yp += 128, ql += 64, qh += 32, sc += 8)
                for (int l = 0; l < 32; ++l) {
                    const int is = l / 16;
                    const auto s = [&](int k) { return static_cast<float>(static_cast<std::int8_t>(sc[is + k])); };
                    const int q1 = ((u8(ql, l) & 0xF) | (((u8(qh, l) >> 0) & 3) << 4)) - 32;
                    const int q2 = ((u8(ql, l + 32) & 0xF) | (((u8(qh, l) >> 2) & 3) << 4)) - 32;
                    const int q3 = ((u8(ql, l) >> 4) | (((u8(qh, l) >> 4) & 3) << 4)) - 32;
                    const int q4 = ((u8(ql, l + 32) >> 4) | (((u8(qh, l) >> 6) & 3) << 4)) - 32;
                    yp[l] = d * s(0) * static_cast<float>(q1);
                    yp[l + 32] = d * s(2) * static_cast<float>(q2);
                    yp[l + 64] = d * s(4) * static_cast<float>(q3);
                    yp[l + 96] = d * s(6) * static_cast<float>(q4);
                }
        }
        out.insert(out.end(), y.begin(), y.end());
    }
    return out;
}

void check_rejected(const std::vector<std::byte>& bytes, const std::vector<std::string>& parts) {
    lowbit::test::TempDir dir;
    lowbit::test::write_file(dir / "bad.gguf", bytes);
    try {
        (void)GgufFile::open(dir / "bad.gguf");
        FAIL("no exception");
    } catch (const std::invalid_argument& e) {
        const std::string message = e.what();
        INFO(message);
        CHECK_THAT(message, ContainsSubstring("bad.gguf"));
        for (const auto& part : parts) CHECK_THAT(message, ContainsSubstring(part));
    }
}

std::vector<std::byte> f32_bytes(const std::vector<float>& values) {
    std::vector<std::byte> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
}

}  // namespace

TEST_CASE("GGUF metadata of every value type, arrays included", "[io]") {
    ByteWriter strings;
    strings.put<std::uint32_t>(8).put<std::uint64_t>(3).put_string("a").put_string("").put_string("ccc");
    ByteWriter nested;  // [[1, 2], [3]] of uint16
    nested.put<std::uint32_t>(9).put<std::uint64_t>(2);
    nested.put<std::uint32_t>(2).put<std::uint64_t>(2).put<std::uint16_t>(1).put<std::uint16_t>(2);
    nested.put<std::uint32_t>(2).put<std::uint64_t>(1).put<std::uint16_t>(3);
    const auto bytes = GgufBuilder{}
                           .kv_scalar<std::uint8_t>("u8", 0, 200)
                           .kv_scalar<std::int8_t>("i8", 1, -100)
                           .kv_scalar<std::uint16_t>("u16", 2, 60000)
                           .kv_scalar<std::int16_t>("i16", 3, -30000)
                           .kv_scalar<std::uint32_t>("u32", 4, 4000000000u)
                           .kv_scalar<std::int32_t>("i32", 5, -2000000000)
                           .kv_scalar<float>("f32", 6, 0.25f)
                           .kv_scalar<std::uint8_t>("bool", 7, 1)
                           .kv_string("general.name", "SmolTest")
                           .kv("strings", 9, strings.bytes)
                           .kv("nested", 9, nested.bytes)
                           .kv_scalar<std::uint64_t>("u64", 10, 1ull << 63)
                           .kv_scalar<std::int64_t>("i64", 11, -(1ll << 62))
                           .kv_scalar<double>("f64", 12, -1.5)
                           .build();
    const auto file = GgufFile::from_bytes(bytes);
    const auto& m = file.metadata();
    CHECK(file.version() == 3);
    CHECK(file.alignment() == 32);
    CHECK(m.size() == 14);
    CHECK(m.at("u8").as_uint() == 200);
    CHECK(m.at("i8").as_int() == -100);
    CHECK(m.at("u16").as_uint() == 60000);
    CHECK(m.at("i16").as_int() == -30000);
    CHECK(m.at("u32").as_uint() == 4000000000u);
    CHECK(m.at("u32").type() == lowbit::GgufType::uint32);
    CHECK(m.at("i32").as_int() == -2000000000);
    CHECK(m.at("f32").as_double() == 0.25);
    CHECK(m.at("bool").as_bool());
    CHECK(m.at("general.name").as_string() == "SmolTest");
    const auto& list = m.at("strings").as_array();
    REQUIRE(list.size() == 3);
    CHECK(m.at("strings").element_type() == lowbit::GgufType::string);
    CHECK(list[2].as_string() == "ccc");
    CHECK(m.at("nested").as_array()[0].as_array()[1].as_uint() == 2);
    CHECK(m.at("nested").as_array()[1].as_array()[0].as_uint() == 3);
    CHECK(m.at("u64").as_uint() == (1ull << 63));
    CHECK(m.at("i64").as_int() == -(1ll << 62));
    CHECK(m.at("f64").as_double() == -1.5);
    CHECK(m.at("strings").to_string() == "['a', '', 'ccc']");
    CHECK_THROWS_AS(m.at("i8").as_uint(), std::invalid_argument);
    CHECK_THROWS_AS(m.at("u64").as_int(), std::invalid_argument);
    CHECK_THROWS_AS(m.at("general.name").as_double(), std::invalid_argument);
    CHECK(file.tensor_names().empty());
}

TEST_CASE("GGUF float tensors: dims innermost first, rows = ne[1] * ne[2]", "[io]") {
    std::vector<float> values(4 * 3 * 2);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 7.5f;
    ByteWriter f16, bf16;
    for (const float v : values) {
        f16.put<std::uint16_t>(lowbit::io_detail::float_to_f16(v));
        bf16.put<std::uint16_t>(lowbit::io_detail::float_to_bf16(v));
    }
    const auto bytes = GgufBuilder{}
                           .kv_scalar<std::uint32_t>("general.alignment", 4, 64)
                           .tensor("t.f32", {4, 3, 2}, 0, f32_bytes(values))
                           .tensor("t.f16", {4, 6}, 1, f16.bytes)
                           .tensor("t.bf16", {24}, 30, bf16.bytes)
                           .alignment(64)
                           .build();
    const auto file = GgufFile::from_bytes(bytes);
    CHECK(file.alignment() == 64);
    CHECK(file.tensor_names() == std::vector<std::string>{"t.f32", "t.f16", "t.bf16"});
    CHECK(file.tensor_type("t.f16") == GgmlType::f16);
    CHECK(file.tensor_info("t.f32").dims == std::vector<std::uint64_t>{4, 3, 2});
    CHECK(file.tensor_info("t.f16").offset % 64 == 0);
    const RowMatrixXf f32 = file.to_matrix("t.f32");
    REQUIRE(f32.rows() == 6);
    REQUIRE(f32.cols() == 4);
    CHECK(f32(1, 2) == values[1 * 4 + 2]);
    CHECK(file.to_matrix("t.f16") == f32);
    const RowMatrixXf b = file.to_matrix("t.bf16");
    CHECK(b.rows() == 1);
    CHECK(Eigen::Map<const RowMatrixXf>(b.data(), 6, 4) == f32);
    CHECK_THROWS_WITH((file.to_quantized<32, 4>("t.f32")), ContainsSubstring("'t.f32'") && ContainsSubstring("f32"));
}

TEST_CASE("GGUF Q4_0 block of N12.a dequantizes to ggml's values and maps exactly onto N9", "[io]") {
    ByteWriter block;
    block.put<std::uint16_t>(0x3800);  // d = 0.5
    for (const int b : {0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8})
        block.put<std::uint8_t>(static_cast<std::uint8_t>(b));
    const auto bytes = GgufBuilder{}.tensor("w", {32}, q4_0, block.bytes).build();
    const auto file = GgufFile::from_bytes(bytes);
    const RowMatrixXf w = file.to_matrix("w");
    const std::vector<int> codes{0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8,
                                 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 15};
    for (int j = 0; j < 32; ++j) CHECK(w(0, j) == static_cast<float>(codes[static_cast<std::size_t>(j)] - 8) * 0.5f);
    CHECK(w(0, 0) == -4.0f);
    CHECK(w(0, 31) == 3.5f);
    const auto q = file.to_quantized<32, 4>("w");
    CHECK(q.scales(0, 0) == 0.5f);
    CHECK(q.biases(0, 0) == -4.0f);
    CHECK(lowbit::dequantize(q) == w);
}

TEST_CASE("GGUF Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0: to_matrix equals ggml bit for bit, to_quantized dequantizes to it",
          "[io]") {
    auto rng = lowbit::test::make_rng(606);
    for (const std::uint32_t type : {q4_0, q4_1, q5_0, q5_1, q8_0}) {
        INFO("ggml type " << type);
        constexpr std::size_t rows = 7, cols = 96;
        const auto data = random_blocks(rng, type, rows * cols / 32);
        const auto bytes = GgufBuilder{}.tensor("blk.0.w", {cols, rows}, type, data).build();
        const auto file = GgufFile::from_bytes(bytes);
        const RowMatrixXf w = file.to_matrix("blk.0.w");
        const auto expected = ggml_reference(type, data);
        REQUIRE(static_cast<std::size_t>(w.size()) == expected.size());
        for (std::size_t i = 0; i < expected.size(); ++i) {
            INFO("element " << i);
            REQUIRE(bits_of(w.data()[i]) == bits_of(expected[i]));
        }
        const RowMatrixXf from_quantized = type == q8_0 ? lowbit::dequantize(file.to_quantized<32, 8>("blk.0.w"))
                                           : type == q5_0 || type == q5_1
                                               ? lowbit::dequantize(file.to_quantized<32, 5>("blk.0.w"))
                                               : lowbit::dequantize(file.to_quantized<32, 4>("blk.0.w"));
        const RowMatrixXf widened = lowbit::dequantize(file.to_quantized<32, 8>("blk.0.w"));
        for (Eigen::Index i = 0; i < w.size(); ++i) {
            INFO("element " << i);
            REQUIRE(from_quantized.data()[i] == w.data()[i]);
            REQUIRE(widened.data()[i] == w.data()[i]);
            // Bit for bit, except a Q4_0 / Q5_0 / Q8_0 zero whose sign ggml makes negative (gguf_blocks.hpp).
            if (type == q4_1 || type == q5_1 || w.data()[i] != 0.0f)
                REQUIRE(bits_of(from_quantized.data()[i]) == bits_of(w.data()[i]));
        }
        // A threaded-size matrix goes the same way (the conversion splits rows across threads).
        const auto big_data = random_blocks(rng, type, 512 * 256 / 32);
        const auto big = GgufBuilder{}.tensor("big", {256, 512}, type, big_data).build();
        const auto big_file = GgufFile::from_bytes(big);
        const auto big_expected = ggml_reference(type, big_data);
        const RowMatrixXf big_w = big_file.to_matrix("big");
        CHECK(std::memcmp(big_w.data(), big_expected.data(), big_expected.size() * 4) == 0);
    }
}

TEST_CASE(
    "GGUF k-quants (q2_K to q6_K): to_matrix equals ggml's dequantization bit for bit, and so does to_quantized's "
    "dequantize (zero signs aside in q3_K and q6_K)",
    "[io]") {
    auto rng = lowbit::test::make_rng(607);
    for (const std::uint32_t type : {q2_k, q3_k, q4_k, q5_k, q6_k}) {
        INFO("ggml type " << type);
        for (const std::size_t rows : {std::size_t{3}, std::size_t{300}}) {  // 300 x 512: split across threads
            INFO("rows " << rows);
            constexpr std::size_t cols = 512;
            const auto data = random_kquant_blocks(rng, type, rows * cols / 256);
            const auto bytes = GgufBuilder{}.tensor("blk.0.w", {cols, rows}, type, data).build();
            const RowMatrixXf w = GgufFile::from_bytes(bytes).to_matrix("blk.0.w");
            const auto expected = ggml_kquant_reference(type, data);
            REQUIRE(static_cast<std::size_t>(w.size()) == expected.size());
            for (std::size_t i = 0; i < expected.size(); ++i) {
                INFO("element " << i);
                REQUIRE(bits_of(w.data()[i]) == bits_of(expected[i]));
            }
            const auto file = GgufFile::from_bytes(bytes);
            if (type != q4_k && type != q5_k) {
                // q2_K, q3_K and q6_K as affine groups of 16 (the sub-blocks), at every width that holds the
                // codes: the same bits (q2_K's -0 included: scale * q - min and scale * q + (-min) agree), but
                // for a zero where q3_K's or q6_K's product scale * q is -0: the affine sum gives +0 there.
                std::vector<RowMatrixXf> forms;
                if (type == q2_k) forms.push_back(lowbit::dequantize(file.to_quantized<16, 2>("blk.0.w")));
                if (type != q6_k) forms.push_back(lowbit::dequantize(file.to_quantized<16, 4>("blk.0.w")));
                forms.push_back(lowbit::dequantize(file.to_quantized<16, 6>("blk.0.w")));
                for (Eigen::Index i = 0; i < w.size(); ++i) {
                    INFO("element " << i);
                    const bool negative_zero = w.data()[i] == 0.0f && std::signbit(w.data()[i]);
                    for (const auto& form : forms) {
                        if (negative_zero && type != q2_k)
                            REQUIRE(bits_of(form.data()[i]) == bits_of(0.0f));
                        else
                            REQUIRE(bits_of(form.data()[i]) == bits_of(w.data()[i]));
                    }
                }
                continue;
            }
            // q4_K and q5_K as MLX affine groups of 32 (the sub-blocks): the same values, bit for bit, at
            // the narrowest width that holds the codes and at 8 bits.
            const RowMatrixXf narrow = type == q4_k ? lowbit::dequantize(file.to_quantized<32, 4>("blk.0.w"))
                                                    : lowbit::dequantize(file.to_quantized<32, 5>("blk.0.w"));
            const RowMatrixXf wide = lowbit::dequantize(file.to_quantized<32, 8>("blk.0.w"));
            for (Eigen::Index i = 0; i < w.size(); ++i) {
                INFO("element " << i);
                REQUIRE(bits_of(narrow.data()[i]) == bits_of(w.data()[i]));
                REQUIRE(bits_of(wide.data()[i]) == bits_of(w.data()[i]));
            }
        }
    }
}

TEST_CASE("GgufFile::to_matrix_rows: the rows asked for, in their order, as to_matrix has them", "[io]") {
    auto rng = lowbit::test::make_rng(608);
    for (const std::uint32_t type : {q4_1, q8_0, q4_k}) {
        INFO("ggml type " << type);
        constexpr std::size_t rows = 9, cols = 256;
        const auto data =
            type == q4_k ? random_kquant_blocks(rng, type, rows) : random_blocks(rng, type, rows * cols / 32);
        const auto bytes = GgufBuilder{}.tensor("emb", {cols, rows}, type, data).build();
        const auto file = GgufFile::from_bytes(bytes);
        const RowMatrixXf all = file.to_matrix("emb");
        const std::vector<std::int32_t> ids{8, 0, 3, 3};
        const RowMatrixXf picked = file.to_matrix_rows("emb", ids);
        REQUIRE(picked.rows() == 4);
        for (Eigen::Index i = 0; i < picked.rows(); ++i) {
            INFO("row " << i);
            CHECK(std::memcmp(picked.row(i).data(), all.row(ids[static_cast<std::size_t>(i)]).data(), cols * 4) == 0);
        }
        CHECK(file.to_matrix_rows("emb", std::vector<std::int32_t>{}).rows() == 0);
        CHECK_THROWS_WITH(file.to_matrix_rows("emb", std::vector<std::int32_t>{2, 9}),
                          ContainsSubstring("'emb'") && ContainsSubstring("row 9 outside [0, 9)"));
        CHECK_THROWS_AS(file.to_matrix_rows("emb", std::vector<std::int32_t>{-1}), std::out_of_range);
    }
    const auto iq4 = GgufBuilder{}.tensor("iq4", {32}, iq4_nl, std::vector<std::byte>(18)).build();
    CHECK_THROWS_WITH(GgufFile::from_bytes(iq4).to_matrix_rows("iq4", std::vector<int>{0}),
                      ContainsSubstring("iq4_nl"));
}

TEST_CASE("GGUF q4_K block worked by hand", "[io]") {
    // d = 0.5, dmin = 0.25; sub-block 0: scale 3, min 2; sub-block 4: scale 1 | 2 << 4 = 33 (low bits in
    // byte 8, high bits in byte 0's top two), min 5. Element 0 has code 7: 0.5 * 3 * 7 - 0.25 * 2 = 10;
    // element 32 (the high nibble of qs[0]) has code 9: 0.5 * 3 * 9 - 0.5 = 13 (sub-block 1 reads
    // scale byte 1 = 3 and min byte 5 = 2 too); element 128 is sub-block 4, code 7: 16.5 * 7 - 1.25.
    std::vector<std::byte> block(144, std::byte{0});
    const auto put = [&](std::size_t i, int v) { block[i] = static_cast<std::byte>(v); };
    put(0, 0x00), put(1, 0x38);  // d = 0.5 (f16 0x3800)
    put(2, 0x00), put(3, 0x34);  // dmin = 0.25 (f16 0x3400)
    put(4, 3 | 2 << 6), put(5, 3), put(8, 2), put(9, 2), put(12, 1 | 5 << 4);
    put(16, 7 | 9 << 4);  // qs[0]: element 0 (low nibble) and element 32 (high nibble)
    put(16 + 64, 7);      // qs[64]: element 128
    const auto bytes = GgufBuilder{}.tensor("k", {256}, q4_k, block).build();
    const RowMatrixXf w = GgufFile::from_bytes(bytes).to_matrix("k");
    CHECK(w(0, 0) == 10.0f);
    CHECK(w(0, 32) == 13.0f);
    CHECK(w(0, 128) == 0.5f * 33.0f * 7.0f - 0.25f * 5.0f);
    CHECK(w(0, 1) == -0.5f);  // code 0: the min alone
}

TEST_CASE("GGUF conversions refuse what has no exact form, naming the tensor and type", "[io]") {
    ByteWriter inf_block;
    inf_block.put<std::uint16_t>(0x7c00);  // d = +Inf
    for (int j = 0; j < 16; ++j) inf_block.put<std::uint8_t>(0x88);
    std::vector<std::byte> k6_inf_block(2 * 210);  // the second super-block's d = +Inf
    k6_inf_block[210 + 208] = std::byte{0x00}, k6_inf_block[210 + 209] = std::byte{0x7c};
    const auto bytes = GgufBuilder{}
                           .tensor("inf", {32}, q4_0, inf_block.bytes)
                           .tensor("k", {256}, q4_k, std::vector<std::byte>(144))
                           .tensor("k5", {256}, q5_k, std::vector<std::byte>(176))
                           .tensor("k6", {256}, q6_k, std::vector<std::byte>(210))
                           .tensor("k6inf", {512}, q6_k, k6_inf_block)
                           .tensor("iq4", {32}, iq4_nl, std::vector<std::byte>(18))
                           .tensor("q8", {32}, q8_0, std::vector<std::byte>(34))
                           .build();
    const auto file = GgufFile::from_bytes(bytes);
    CHECK(std::isnan(file.to_matrix("inf")(0, 0)));  // ggml: 0 * Inf
    CHECK_THROWS_WITH((file.to_quantized<32, 4>("inf")), ContainsSubstring("'inf'") && ContainsSubstring("block 0"));
    CHECK(file.tensor_type("k") == GgmlType::q4_k);
    CHECK(lowbit::ggml_type_name(file.tensor_type("k")) == "q4_K");
    CHECK(file.to_matrix("k").isZero());
    CHECK_THROWS_WITH(file.to_matrix("iq4"), ContainsSubstring("'iq4'") && ContainsSubstring("iq4_nl"));
    CHECK_THROWS_WITH((file.to_quantized<32, 4>("iq4")), ContainsSubstring("'iq4'") && ContainsSubstring("iq4_nl"));
    CHECK((lowbit::dequantize(file.to_quantized<32, 4>("k")).isZero()));
    CHECK_THROWS_WITH((file.to_quantized<32, 8>("k6")),
                      ContainsSubstring("'k6'") && ContainsSubstring("q6_K needs GroupSize = 16"));
    CHECK_THROWS_WITH((file.to_quantized<16, 4>("k6")), ContainsSubstring("'k6'") && ContainsSubstring("Bits >= 6"));
    CHECK((lowbit::dequantize(file.to_quantized<16, 6>("k6")).isZero()));
    CHECK_THROWS_WITH((file.to_quantized<16, 6>("k6inf")),
                      ContainsSubstring("'k6inf'") && ContainsSubstring("block 1 (row 0) has scale d = inf"));
    CHECK_THROWS_WITH((file.to_quantized<16, 4>("k")), ContainsSubstring("q4_K needs GroupSize = 32"));
    CHECK_THROWS_WITH((file.to_quantized<32, 4>("k5")), ContainsSubstring("Bits >= 5"));
    CHECK_THROWS_WITH((file.to_quantized<32, 4>("q8")), ContainsSubstring("Bits = 8"));
    CHECK_THROWS_WITH((file.to_quantized<32, 2>("inf")), ContainsSubstring("Bits >= 4"));
    CHECK_THROWS_WITH(file.to_matrix("none"), ContainsSubstring("'none'"));
}

TEST_CASE("GgufFile rejects each malformed file, naming file, tensor or key and the fault", "[io]") {
    const auto one_tensor = [](std::vector<std::uint64_t> dims, std::uint32_t type, std::size_t size,
                               std::int64_t offset = -1) {
        return GgufBuilder{}.tensor("w", std::move(dims), type, std::vector<std::byte>(size), offset).build();
    };
    SECTION("a good file opens") { CHECK_NOTHROW(GgufFile::from_bytes(one_tensor({32, 2}, q4_0, 36))); }
    SECTION("bad magic") {
        auto bytes = one_tensor({32}, q4_0, 18);
        bytes[0] = std::byte{'X'};
        check_rejected(bytes, {"magic"});
    }
    SECTION("bad version") {
        check_rejected(GgufBuilder{}.build(1), {"version 1"});
        check_rejected(GgufBuilder{}.build(4), {"version 4"});
    }
    SECTION("counts that cannot fit") {
        auto bytes = one_tensor({32}, q4_0, 18);
        const std::uint64_t huge = 1ull << 60;
        auto kv = bytes;
        std::memcpy(kv.data() + 16, &huge, 8);
        check_rejected(kv, {"metadata count"});
        auto tensors = bytes;
        std::memcpy(tensors.data() + 8, &huge, 8);
        check_rejected(tensors, {"tensor count"});
    }
    SECTION("a string length beyond the file") {
        ByteWriter w;
        w.put<std::uint64_t>(1000).put<std::uint8_t>('x');
        check_rejected(GgufBuilder{}.kv("name", 8, w.bytes).build(), {"'name'", "length 1000"});
        auto bytes = GgufBuilder{}.kv_string("k", "v").build();
        const std::uint64_t huge = ~0ull;
        std::memcpy(bytes.data() + 24, &huge, 8);  // the key's own length
        check_rejected(bytes, {"metadata key 0", "length"});
    }
    SECTION("bad values") {
        check_rejected(GgufBuilder{}.kv("t", 13, {}).build(), {"'t'", "value type 13"});
        check_rejected(GgufBuilder{}.kv_scalar<std::uint8_t>("flag", 7, 2).build(), {"'flag'", "bool"});
        ByteWriter array;
        array.put<std::uint32_t>(4).put<std::uint64_t>(1ull << 40);
        check_rejected(GgufBuilder{}.kv("arr", 9, array.bytes).build(), {"'arr'", "array count"});
        ByteWriter bad_element;
        bad_element.put<std::uint32_t>(99).put<std::uint64_t>(1);
        check_rejected(GgufBuilder{}.kv("arr", 9, bad_element.bytes).build(), {"'arr'", "element type 99"});
        ByteWriter deep;
        for (int i = 0; i < 12; ++i) deep.put<std::uint32_t>(9).put<std::uint64_t>(1);
        deep.put<std::uint32_t>(0).put<std::uint64_t>(0);
        check_rejected(GgufBuilder{}.kv("deep", 9, deep.bytes).build(), {"'deep'", "nested"});
        check_rejected(GgufBuilder{}.kv_scalar<std::uint8_t>("a", 0, 1).kv_scalar<std::uint8_t>("a", 0, 2).build(),
                       {"'a'", "twice"});
        check_rejected(GgufBuilder{}.kv_scalar<std::uint64_t>("general.alignment", 10, 32).build(), {"alignment"});
        check_rejected(GgufBuilder{}.kv_scalar<std::uint32_t>("general.alignment", 4, 48).build(), {"48"});
    }
    SECTION("truncated inside the header") {
        auto bytes = GgufBuilder{}.kv_scalar<std::uint64_t>("n", 10, 5).build();
        bytes.resize(24 + 8 + 1 + 4 + 5);  // 3 bytes of the value missing
        check_rejected(bytes, {"truncated"});
    }
    SECTION("bad tensor infos") {
        check_rejected(one_tensor({32, 1, 1, 1, 1}, q4_0, 18), {"'w'", "n_dims = 5"});
        check_rejected(one_tensor({32}, 4, 18), {"'w'", "unknown ggml type id 4"});
        check_rejected(one_tensor({32}, 77, 18), {"'w'", "77"});
        check_rejected(one_tensor({48, 2}, q4_0, 36), {"'w'", "ne[0] = 48", "block size 32"});
        check_rejected(one_tensor({1ull << 32, 1ull << 32}, 0, 0), {"'w'", "overflows"});
        check_rejected(one_tensor({1ull << 63}, 0, 0), {"'w'", "overflows"});
        check_rejected(one_tensor({32}, q4_0, 18, 16), {"'w'", "offset 16", "alignment"});
        auto beyond = one_tensor({32}, q4_0, 18, 64);
        beyond.resize(beyond.size() - 40);
        check_rejected(beyond, {"'w'", "outside the data section"});
        check_rejected(GgufBuilder{}
                           .tensor("w", {8}, 0, std::vector<std::byte>(32))
                           .tensor("w", {8}, 0, std::vector<std::byte>(32))
                           .build(),
                       {"'w'", "twice"});
    }
    SECTION("a truncated data section") {
        auto bytes = one_tensor({64, 4}, q8_0, 8 * 34);  // 272 bytes of data, padded to 288
        bytes.resize(bytes.size() - 17);
        check_rejected(bytes, {"'w'", "outside the data section"});
    }
    SECTION("overlapping tensors") {
        const auto bytes = GgufBuilder{}
                               .tensor("a", {32, 4}, q4_0, std::vector<std::byte>(72))
                               .tensor("b", {32}, q4_0, std::vector<std::byte>(18), 64)
                               .build();
        check_rejected(bytes, {"'b'", "overlap", "'a'"});
    }
}

TEST_CASE("GGUF with the data section past the end: zero-byte tensors still view bytes of the file", "[io]") {
    const auto bytes = GgufBuilder{}
                           .kv_scalar<std::uint32_t>("general.alignment", 4, 1u << 28)
                           .tensor("empty", {0}, 0, {})
                           .build();
    const auto file = GgufFile::from_bytes(bytes);
    CHECK(file.tensor_bytes("empty").data() == bytes.data() + bytes.size());
    CHECK(file.to_matrix("empty").size() == 0);
    CHECK_THROWS_WITH((file.to_quantized<32, 4>("empty")), ContainsSubstring("f32"));
    const auto with_data = GgufBuilder{}
                               .kv_scalar<std::uint32_t>("general.alignment", 4, 1u << 28)
                               .tensor("w", {8}, 0, std::vector<std::byte>(32))
                               .build();
    CHECK_THROWS_WITH(GgufFile::from_bytes(with_data), ContainsSubstring("'w'") && ContainsSubstring("outside"));
}

TEST_CASE("GgufFile::open of a missing file is a runtime_error naming it", "[io]") {
    lowbit::test::TempDir dir;
    CHECK_THROWS_AS(GgufFile::open(dir / "missing.gguf"), std::runtime_error);
    CHECK_THROWS_WITH(GgufFile::open(dir / "missing.gguf"), ContainsSubstring("missing.gguf"));
    lowbit::test::write_file(dir / "empty.gguf", {});
    CHECK_THROWS_WITH(GgufFile::open(dir / "empty.gguf"), ContainsSubstring("truncated"));
}
