// The MLX nvfp4 weight format (NVIDIA's FP4, MLX's `mode="nvfp4"`) as a type.
//
// Per group of 16 inputs one E4M3 scale byte (formats/minifloats.hpp) and per weight a 4-bit E2M1
// code, as mxfp4's: bit 3 the sign, bits 0..2 the magnitude index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}. No
// bias: w = E2M1(q) * E4M3(s). Codes are packed as MLX packs 4-bit codes, eight per uint32 word, the
// first in the lowest bits (the diagram in quantized_matrix.hpp), so a group is two words.
//
//   codes   uint32 [out, in / 8]
//   scales  uint8  [out, in / 16]   (E4M3 bytes)
//
// MLX's optional per-tensor global scale (quantize(..., global_scale=)) is not part of this format:
// MLX's layers and checkpoints do not carry it. The quantize rule is MLX 0.32's CPU rule
// (docs/numerics.md N17): detail/nvfp4/quantize.hpp.
#pragma once

#include "../detail/config.hpp"

#include <array>
#include <cstdint>

#include "minifloats.hpp"

LOWBIT_BEGIN_NAMESPACE

/// The MLX nvfp4 format.
struct Nvfp4 {
    /// The format's name in MLX's config.json ("mode") and in lowbit's messages.
    static constexpr const char* mode = "nvfp4";
    static constexpr int group_size = 16;
    static constexpr int bits = 4;
    /// Per-group parameter: the E4M3 scale byte.
    using scale_type = std::uint8_t;
    static constexpr bool has_biases = false;
    static constexpr int words_per_group = group_size * bits / 32;
    static constexpr std::uint32_t max_code = 15;
    static constexpr bool codes_in_whole_words = true;
    /// The element encoding of the codes.
    using element = E2m1;

    /// How a group dequantizes (the contract of MlxAffine::value): value(q) is twice the E2M1 value
    /// (E2m1::doubled_value) and group_scale(s) half the E4M3 value of s, so that value * group_scale is
    /// E2M1(q) * E4M3(s), the same float as MLX's lut[q] * from_fp8(s) (both products are exact).
    static constexpr float value(std::uint32_t code) noexcept { return E2m1::doubled_value(code); }
    /// False for the E4M3 NaN patterns 0x7F and 0xFF (group_scale is NaN there, as MLX's dequantize):
    /// the MLX loader refuses such a scale, naming row and group. MLX's quantize never writes them.
    static constexpr bool is_valid_scale(scale_type scale) noexcept { return is_finite_e4m3(scale); }
    static constexpr float group_scale(scale_type scale) noexcept { return half_scales[scale]; }

private:
    /// group_scale of every byte, so that a kernel's per-group decode is one load.
    static constexpr std::array<float, 256> half_scales = [] {
        std::array<float, 256> table{};
        for (int byte = 0; byte < 256; ++byte) table[byte] = e4m3_value(static_cast<std::uint8_t>(byte), -1);
        return table;
    }();
};

LOWBIT_END_NAMESPACE
