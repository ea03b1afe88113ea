// The MLX mxfp4 weight format (OCP microscaling FP4, MLX's `mode="mxfp4"`) as a type.
//
// Per group of 32 inputs one E8M0 scale, a uint8 exponent e standing for 2^(e - 127), and per weight a
// 4-bit E2M1 code: bit 3 the sign, bits 0..2 the magnitude index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}. No
// bias: w = E2M1(q) * 2^(e - 127). Codes are packed as MLX packs 4-bit codes, eight per uint32 word,
// the first in the lowest bits (the diagram in quantized_matrix.hpp), so a group is four words.
//
//   codes   uint32 [out, in / 8]
//   scales  uint8  [out, in / 32]   (E8M0 exponents)
//
// The quantize rule is MLX 0.32's CPU rule (docs/numerics.md N16): detail/mxfp4/quantize.hpp.
#pragma once

#include "../detail/config.hpp"

#include <cstdint>

#include "minifloats.hpp"

LOWBIT_BEGIN_NAMESPACE

/// The MLX mxfp4 format.
struct Mxfp4 {
    /// The format's name in MLX's config.json ("mode") and in lowbit's messages.
    static constexpr const char* mode = "mxfp4";
    static constexpr int group_size = 32;
    static constexpr int bits = 4;
    /// Per-group parameter: the E8M0 exponent byte.
    using scale_type = std::uint8_t;
    static constexpr bool has_biases = false;
    static constexpr int words_per_group = group_size * bits / 32;
    static constexpr std::uint32_t max_code = 15;
    static constexpr bool codes_in_whole_words = true;

    /// The element encoding of the codes.
    using element = E2m1;

    /// How a group dequantizes (the contract of MlxAffine::value): value(q) is twice the E2M1 value, an
    /// integer in {0, +-1, +-2, +-3, +-4, +-6, +-8, +-12} (code 8 is -0), and group_scale(e) is
    /// 2^(e - 128), so that value * group_scale is E2M1(q) * 2^(e - 127), the same real number and
    /// so the same float as MLX's lut[q] * 2^(e - 127). e = 255 (NaN in OCP MX, +Inf in MLX's
    /// dequantize) gives 2^127 here: the loaders refuse it.
    static constexpr float value(std::uint32_t code) noexcept { return E2m1::doubled_value(code); }
    /// False for byte 255, NaN in OCP MX: the MLX loader refuses such a scale, naming row and group.
    static constexpr bool is_valid_scale(scale_type exponent) noexcept { return exponent != 255; }
    static constexpr float group_scale(scale_type exponent) noexcept { return e8m0_value(exponent, -1); }
};

LOWBIT_END_NAMESPACE
