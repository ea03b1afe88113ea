// The MLX mxfp8 weight format (OCP microscaling FP8, MLX's `mode="mxfp8"`) as a type.
//
// Per group of 32 inputs one E8M0 scale, a uint8 exponent e standing for 2^(e - 127), and per weight an
// 8-bit E4M3 code (formats/minifloats.hpp). No bias: w = E4M3(q) * 2^(e - 127). Codes are packed as
// MLX packs 8-bit codes, four per uint32 word, the first in the lowest byte, so a group is eight words.
//
//   codes   uint32 [out, in / 4]
//   scales  uint8  [out, in / 32]   (E8M0 exponents)
//
// The quantize rule is MLX 0.32's CPU rule (docs/numerics.md N18): detail/mxfp8/quantize.hpp.
#pragma once

#include "../detail/config.hpp"

#include <cstdint>

#include "minifloats.hpp"

LOWBIT_BEGIN_NAMESPACE

/// The MLX mxfp8 format.
struct Mxfp8 {
    /// The format's name in MLX's config.json ("mode") and in lowbit's messages.
    static constexpr const char* mode = "mxfp8";
    static constexpr int group_size = 32;
    static constexpr int bits = 8;
    /// Per-group parameter: the E8M0 exponent byte.
    using scale_type = std::uint8_t;
    static constexpr bool has_biases = false;
    static constexpr int words_per_group = group_size * bits / 32;
    static constexpr std::uint32_t max_code = 255;
    static constexpr bool codes_in_whole_words = true;
    /// The element encoding of the codes.
    using element = E4m3;

    /// How a group dequantizes (the contract of MlxAffine::value): value(q) is 2^9 times the E4M3 value
    /// of q, an integer of magnitude at most 448 * 2^9 (-0 for 0x80), and group_scale(e) is 2^(e - 136),
    /// so that value * group_scale is E4M3(q) * 2^(e - 127), the same real number and so the same float
    /// as MLX's from_fp8(q) * 2^(e - 127). The NaN patterns 0x7F and 0xFF, which MLX's quantize never
    /// writes and its dequantize reads as NaN, read here as +-480 * 2^9, the pattern's value by the
    /// E4M3 rule (so every kernel, the int8 one included, has one rule): the loaders refuse such codes
    /// (is_valid_code), so only a hand-built matrix holds them. e = 255 (NaN in OCP MX) gives 2^119:
    /// the loaders refuse it.
    static constexpr float value(std::uint32_t code) noexcept {
        const std::uint32_t exponent = (code >> 3) & 15u, mantissa = code & 7u;
        const auto magnitude = static_cast<float>(exponent == 0 ? mantissa : (8u + mantissa) << (exponent - 1u));
        return (code & 0x80u) != 0 ? -magnitude : magnitude;
    }
    /// False for the E4M3 NaN patterns 0x7F and 0xFF: the MLX loader refuses such a code, naming its
    /// row and column.
    static constexpr bool is_valid_code(std::uint32_t code) noexcept {
        return is_finite_e4m3(static_cast<std::uint8_t>(code));
    }
    /// False for byte 255, NaN in OCP MX: the MLX loader refuses such a scale, naming row and group.
    static constexpr bool is_valid_scale(scale_type exponent) noexcept { return exponent != 255; }
    static constexpr float group_scale(scale_type exponent) noexcept { return e8m0_value(exponent, -9); }
};

LOWBIT_END_NAMESPACE
