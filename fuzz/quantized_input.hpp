// The byte format fuzz_quantized.cpp decodes, shared with the [fuzz-seeds] test that writes its seed
// corpus (tests/unit/test_fuzz_seeds.cpp), so the two cannot drift.
//
// Input: a thread-count byte (1 + b % 3 threads), an operation byte (Op, modulo op_count), a variant byte
// (the QuantizedMatrix format index, or which FakeQuantize instantiation), then that operation's fields in the order
// fuzz_quantized.cpp reads them, each little-endian; floats are raw IEEE-754 bit patterns (so NaN,
// Inf, denormals and FLT_MAX all occur). A Reader past the end reads zeros, so every input decodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace lowbit_fuzz {

enum class Op : std::uint8_t {
    quantize = 0,          ///< quantize / dequantize / GroupFakeQuantize / quantized_matmul on float weights
    quantized_matrix = 1,  ///< hand-built QuantizedMatrix: dequantize, quantized_matmul, QuantizedLinear
    ternary_weights = 2,   ///< hand-built TernaryWeights::dequantize
    int8_activations = 3,  ///< hand-built Int8Activations::dequantize
    bitnet_sizes = 4,      ///< quantize_ternary / _per_tensor / quantize_activations_int8 with hostile sizes
    fake_quantize = 5,     ///< FakeQuantize set_qparams / calibrate / observe, forward, backward
    per_channel = 6,       ///< PerChannelFakeQuantize, calibrated or not
};
inline constexpr std::uint8_t op_count = 7;

/// The QuantizedMatrix<GroupSize, Bits> formats the fuzzer instantiates, by index (byte modulo 6).
inline constexpr int format_group_size[] = {32, 64, 64, 128, 32, 64};
inline constexpr int format_bits[] = {2, 3, 4, 8, 5, 6};
inline constexpr std::uint8_t format_count = 6;

class Reader {
public:
    Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    template <class T>
    T read() {
        unsigned char bytes[sizeof(T)] = {};
        for (std::size_t i = 0; i < sizeof(T) && offset_ < size_; ++i) bytes[i] = data_[offset_++];
        T value;
        std::memcpy(&value, bytes, sizeof(T));
        return value;
    }
    std::uint8_t u8() { return read<std::uint8_t>(); }
    std::uint16_t u16() { return read<std::uint16_t>(); }
    std::uint32_t u32() { return read<std::uint32_t>(); }
    std::int32_t i32() { return read<std::int32_t>(); }
    std::int64_t i64() { return read<std::int64_t>(); }
    float f32() { return read<float>(); }
    bool flag() { return (u8() & 1u) != 0; }
    bool exhausted() const { return offset_ >= size_; }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t offset_ = 0;
};

class Writer {
public:
    template <class T>
    Writer& write(T value) {
        const std::size_t at = bytes_.size();
        bytes_.resize(at + sizeof(T));
        std::memcpy(bytes_.data() + at, &value, sizeof(T));
        return *this;
    }
    Writer& u8(std::uint8_t v) { return write(v); }
    Writer& u16(std::uint16_t v) { return write(v); }
    Writer& u32(std::uint32_t v) { return write(v); }
    Writer& i32(std::int32_t v) { return write(v); }
    Writer& i64(std::int64_t v) { return write(v); }
    Writer& f32(float v) { return write(v); }
    Writer& flag(bool v) { return write(static_cast<std::uint8_t>(v ? 1 : 0)); }
    const std::vector<std::uint8_t>& bytes() const { return bytes_; }

private:
    std::vector<std::uint8_t> bytes_;
};

}  // namespace lowbit_fuzz
