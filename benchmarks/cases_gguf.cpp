// Checkpoint import: a GGUF Q4_1 matrix (as llama.cpp stores most weights of a Q4_1 model) converted to
// lowbit's QuantizedMatrix<32, 4> (N12.3's exact mapping, nibbles re-packed into MLX's stream) and, for
// comparison, dequantized to floats. The file is built in memory once per case (random blocks), so the
// figure is the conversion alone, not the disk. GB/s counts bytes read plus bytes written.
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <lowbit/io/gguf.hpp>

#include "harness.hpp"

namespace lowbit::bench {
namespace {

/// A GGUF v3 file holding one Q4_1 tensor "w" of rows x cols (random blocks, finite f16 scales).
std::vector<std::byte> q4_1_file(std::uint64_t rows, std::uint64_t cols) {
    std::vector<std::byte> bytes;
    const auto put = [&](const auto value) {
        const auto old = bytes.size();
        bytes.resize(old + sizeof(value));
        std::memcpy(bytes.data() + old, &value, sizeof(value));
    };
    for (const char c : std::string("GGUF")) bytes.push_back(static_cast<std::byte>(c));
    put(std::uint32_t{3});
    put(std::uint64_t{1});  // one tensor
    put(std::uint64_t{0});  // no metadata
    put(std::uint64_t{1});
    bytes.push_back(static_cast<std::byte>('w'));
    put(std::uint32_t{2});
    put(cols);
    put(rows);
    put(std::uint32_t{3});  // q4_1
    put(std::uint64_t{0});  // offset
    bytes.resize((bytes.size() + 31) / 32 * 32);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> byte(0, 255), mantissa(0, 1023);
    for (std::uint64_t block = 0; block < rows * cols / 32; ++block) {
        put(static_cast<std::uint16_t>(0x2000 | mantissa(rng)));           // d in [2^-7, 2^-6)
        put(static_cast<std::uint16_t>(0xa000 | mantissa(rng)));           // m in (-2^-6, -2^-7]
        for (int j = 0; j < 16; ++j) bytes.push_back(static_cast<std::byte>(byte(rng)));
    }
    return bytes;
}

void add_conversion(Registry& registry, bool quantized, int threads) {
    constexpr std::uint64_t rows = 4096, cols = 4096;
    const double read = static_cast<double>(rows * cols / 32 * 20);
    const double written = quantized ? static_cast<double>(rows * cols / 2 + rows * cols / 32 * 8)
                                     : static_cast<double>(rows * cols * 4);
    Case c;
    c.name = quantized ? "gguf q4_1 import (to_quantized)" : "gguf q4_1 dequant (to_matrix)";
    c.shape = "4096 x 4096";
    c.threads = threads;
    c.bytes = read + written;
    c.bandwidth_of = "bandwidth copy dram";
    c.prepare = [quantized]() -> Runner {
        auto bytes = std::make_shared<std::vector<std::byte>>(q4_1_file(rows, cols));
        auto file = std::make_shared<GgufFile>(GgufFile::from_bytes(*bytes));
        if (quantized)
            return [bytes, file] { keep(file->to_quantized<32, 4>("w").scales.data()); };
        return [bytes, file] { keep(file->to_matrix("w").data()); };
    };
    registry.add(std::move(c));
}

}  // namespace

void add_gguf_cases(Registry& registry) {
    for (int threads : registry.options().thread_counts()) {
        add_conversion(registry, true, threads);
        add_conversion(registry, false, threads);
    }
}

}  // namespace lowbit::bench
