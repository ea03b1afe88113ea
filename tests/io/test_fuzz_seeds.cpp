// Seed corpus for the fuzzers fuzz/fuzz_safetensors.cpp and fuzz/fuzz_gguf.cpp: a few small valid files,
// checked to open on every run; when LOWBIT_FUZZ_CORPUS is set, also written into
// $LOWBIT_FUZZ_CORPUS/safetensors/ and .../gguf/. tools/run-fuzzers runs it first.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/io.hpp>

#include "io/io_support.hpp"

namespace {

using lowbit::test::ByteWriter;
using lowbit::test::GgufBuilder;

std::vector<std::vector<std::byte>> safetensors_seeds() {
    std::vector<std::vector<std::byte>> seeds;
    for (const auto dtype : {lowbit::Dtype::f32, lowbit::Dtype::f16, lowbit::Dtype::bf16}) {
        lowbit::SafetensorsWriter writer;
        const lowbit::Linear linear{lowbit::RowMatrixXf::Random(4, 64), Eigen::VectorXf::Random(4)};
        lowbit::save_mlx_linear(writer, "model.q_proj", lowbit::AnyQuantizedLinear::from_linear(linear, 32, 4), dtype);
        lowbit::save_mlx_linear(writer, "model.k_proj", lowbit::AnyQuantizedLinear::from_linear(linear, 32, 4, "mxfp4"),
                                dtype);
        lowbit::save_mlx_linear(writer, "model.v_proj", lowbit::AnyQuantizedLinear::from_linear(linear, 16, 4, "nvfp4"),
                                dtype);
        lowbit::save_mlx_linear(writer, "model.o_proj", lowbit::AnyQuantizedLinear::from_linear(linear, 32, 8, "mxfp8"),
                                dtype);
        lowbit::save_linear(writer, "lm_head", linear, dtype);
        writer.set_metadata("format", "mlx");
        seeds.push_back(writer.to_bytes());
    }
    lowbit::SafetensorsWriter all;
    all.add("u8", std::vector<std::uint8_t>{1, 2, 3}, {3});
    all.add("i8", std::vector<std::int8_t>{-1, 2}, {2, 1});
    all.add("i32", std::vector<std::int32_t>{-7}, {});
    all.add("i64", std::vector<std::int64_t>{1, 2}, {2});
    all.add("u32", std::vector<std::uint32_t>{}, {0, 3});
    all.add("f32", std::vector<float>{1.5f, -2.0f}, {1, 2});
    seeds.push_back(all.to_bytes());
    return seeds;
}

std::vector<std::vector<std::byte>> gguf_seeds() {
    std::vector<std::vector<std::byte>> seeds;
    ByteWriter strings;
    strings.put<std::uint32_t>(8).put<std::uint64_t>(2).put_string("<s>").put_string("hello");
    ByteWriter blocks_q4_0, blocks_q4_1, blocks_q8_0, f16;
    for (int b = 0; b < 2; ++b) {
        blocks_q4_0.put<std::uint16_t>(0x3800);
        blocks_q4_1.put<std::uint16_t>(0x2e66).put<std::uint16_t>(0xb800);
        blocks_q8_0.put<std::uint16_t>(0x2000);
        for (int j = 0; j < 16; ++j) {
            blocks_q4_0.put<std::uint8_t>(static_cast<std::uint8_t>(j * 17));
            blocks_q4_1.put<std::uint8_t>(static_cast<std::uint8_t>(255 - j * 16));
        }
        for (int j = 0; j < 32; ++j) blocks_q8_0.put<std::uint8_t>(static_cast<std::uint8_t>(j * 8 - 128));
    }
    for (int i = 0; i < 64; ++i) f16.put<std::uint16_t>(static_cast<std::uint16_t>(0x3c00 + i));
    seeds.push_back(GgufBuilder{}
                        .kv_string("general.architecture", "llama")
                        .kv_scalar<std::uint32_t>("llama.context_length", 4, 2048)
                        .kv_scalar<float>("llama.rope.freq_base", 6, 10000.0f)
                        .kv_scalar<std::uint8_t>("flag", 7, 1)
                        .kv("tokenizer.ggml.tokens", 9, strings.bytes)
                        .tensor("blk.0.q4_0", {32, 2}, 2, blocks_q4_0.bytes)
                        .tensor("blk.0.q4_1", {64}, 3, blocks_q4_1.bytes)
                        .tensor("blk.0.q8_0", {32, 1, 2}, 8, blocks_q8_0.bytes)
                        .tensor("norm.f16", {16, 4}, 1, f16.bytes)
                        .build());
    seeds.push_back(GgufBuilder{}
                        .kv_scalar<std::uint32_t>("general.alignment", 4, 16)
                        .kv_scalar<std::int64_t>("i64", 11, -3)
                        .kv_scalar<double>("f64", 12, 0.5)
                        .tensor("f32", {4}, 0, std::vector<std::byte>(16))
                        .tensor("bf16", {8}, 30, std::vector<std::byte>(16))
                        .alignment(16)
                        .build(2));
    // One super-block of each k-quant type (q2_K to q6_K), patterned bytes.
    GgufBuilder kquants;
    for (const auto& [type, size] : {std::pair{10u, 84}, {11u, 110}, {12u, 144}, {13u, 176}, {14u, 210}}) {
        ByteWriter block;
        for (int j = 0; j < size; ++j) block.put<std::uint8_t>(static_cast<std::uint8_t>(j * 37 + type));
        kquants.tensor("blk.0.k" + std::to_string(type), {256}, type, block.bytes);
    }
    seeds.push_back(kquants.build());
    // One block each of Q5_0 and Q5_1 (fifth bits in qh), patterned bytes.
    GgufBuilder q5;
    for (const auto& [type, size] : {std::pair{6u, 22}, {7u, 24}}) {
        ByteWriter block;
        block.put<std::uint16_t>(0x3c00);  // d = 1
        for (int j = 2; j < size; ++j) block.put<std::uint8_t>(static_cast<std::uint8_t>(j * 53 + type));
        q5.tensor("blk.0.q5_" + std::to_string(type - 6), {32}, type, block.bytes);
    }
    seeds.push_back(q5.build());
    return seeds;
}

}  // namespace

TEST_CASE("fuzz seeds: small valid safetensors and GGUF files", "[io][fuzz-seeds]") {
    // The seeds always parse; with LOWBIT_FUZZ_CORPUS set they are also written there for the fuzzers.
    const auto safetensors = safetensors_seeds();
    const auto gguf = gguf_seeds();
    for (const auto& seed : safetensors) CHECK_NOTHROW(lowbit::SafetensorsFile::from_bytes(seed));
    for (const auto& seed : gguf) CHECK_NOTHROW(lowbit::GgufFile::from_bytes(seed));
    const char* root = std::getenv("LOWBIT_FUZZ_CORPUS");
    if (root == nullptr || *root == '\0') return;
    const auto write_all = [&](const std::string& name, const std::vector<std::vector<std::byte>>& seeds) {
        const std::filesystem::path dir = std::filesystem::path(root) / name;
        std::filesystem::create_directories(dir);
        for (std::size_t i = 0; i < seeds.size(); ++i)
            lowbit::test::write_file(dir / ("seed-" + std::to_string(i)), seeds[i]);
    };
    write_all("safetensors", safetensors);
    write_all("gguf", gguf);
}
