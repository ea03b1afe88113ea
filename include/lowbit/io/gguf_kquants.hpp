// ggml's k-quant types as GGUF stores them (q2_K, q3_K, q4_K, q5_K, q6_K), and their decoder to floats.
//
// A k-quant block is a super-block of 256 elements: sub-blocks of 16 or 32 elements, each with a small
// integer scale (and, for q2_K / q4_K / q5_K, a min) that multiplies the super-block's f16 d (and dmin).
// Byte layouts (offsets in bytes; all multi-byte fields little-endian):
//
//   q2_K (84):  | scales[16] @0 | qs[64] @16 | d f16 @80 | dmin f16 @82 |
//               sub-block s (16 elements): scale d * (scales[s] & 15), min dmin * (scales[s] >> 4)
//   q3_K (110): | hmask[32] @0 | qs[64] @32 | scales[12] @96 | d f16 @108 |
//               sub-block s (16 elements): scale d * (sc_s - 32), sc_s six bits: the low four in
//               scales[s] & 15 (s < 8) or scales[s - 8] >> 4, the high two in scales[8 + s % 4] >> (2 (s / 4))
//   q4_K (144): | d f16 @0 | dmin f16 @2 | scales[12] @4 | qs[128] @16 |
//   q5_K (176): | d f16 @0 | dmin f16 @2 | scales[12] @4 | qh[32] @16 | qs[128] @48 |
//               sub-block s (32 elements): scale d * sc_s, min dmin * m_s, six bits each from scales:
//               s < 4: sc = scales[s] & 63, m = scales[s + 4] & 63;
//               s >= 4: sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4,
//                       m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4
//   q6_K (210): | ql[128] @0 | qh[64] @128 | scales[16] int8 @192 | d f16 @208 |
//               sub-block s (16 elements): scale d * scales[s]
//
// Codes of element i (h = i / 128, k = i % 128 / 32, l = i % 32 in q2_K, q3_K and q6_K; in q4_K and
// q5_K c = i / 64, l = i % 32 and the nibble is the low one for i % 64 < 32, the high one above):
//   q2_K: q = qs[32h + l] >> 2k & 3                                            value = scale * q - min
//   q3_K: q = (qs[32h + l] >> 2k & 3) - 4 * (1 - (hmask[l] >> (4h + k) & 1))   value = scale * q
//   q4_K: q = nibble of qs[32c + l]                                            value = scale * q - min
//   q5_K: q = nibble of qs[32c + l] | (qh[l] >> (i / 32) & 1) << 4             value = scale * q - min
//   q6_K: q = (ql[64h + 32(k & 1) + l] >> 4(k >> 1) & 15 | (qh[32h + l] >> 2k & 3) << 4) - 32
//                                                                              value = scale * q
//
// Every value is computed as ggml's dequantize_row_* and the gguf package compute it: the scale
// fl(d * sc) and the min fl(dmin * m) are exact (an f16 of at most 11 significant bits times an integer of
// at most 7), and so is scale * q (at most 18 + 5 bits, q6_K's |q| <= 32), so each value is one rounding
// of the exact expression, whether or not the compiler fuses the multiply and the subtraction: bit for
// bit equal.
//
// As lowbit affine groups (to_quantized, docs/numerics.md N12.3): q4_K and q5_K sub-blocks are groups of
// 32 (q45k_group), q2_K, q3_K and q6_K sub-blocks groups of 16 (q2k_group, q3k_group, q6k_group) with
// unsigned codes u = q + o (o = 0, 4, 32) and bias -fl(dmin * m) or -o * scale. scale * u stays exact (at
// most 18 + 6 = 24 significant bits), so fl(fl(scale * u) + bias) is the same one rounding of scale * q:
// the same values, except that a zero is +0 where ggml's scale * q is -0 (a negative scale).
#pragma once

#include "../detail/config.hpp"
#include "detail/bytes.hpp"
#include "detail/float16.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

LOWBIT_BEGIN_NAMESPACE
namespace io_detail {

/// A group of Size GGUF elements in MLX's affine sense: value j = scale * codes[j] + bias, codes unsigned.
template <std::size_t Size>
struct AffineGroupOf {
    std::array<std::uint8_t, Size> codes;
    float scale;
    float bias;
};
using MlxBlock = AffineGroupOf<32>;
using AffineGroup16 = AffineGroupOf<16>;

/// Elements of a k-quant super-block.
inline constexpr std::size_t kquant_block = 256;

/// Byte j of p as an unsigned value.
inline int kquant_byte(const std::byte* p, std::size_t j) noexcept {
    return static_cast<int>(static_cast<std::uint8_t>(p[j]));
}

/// The six-bit scale and min of sub-block s < 8 of a q4_K / q5_K block's 12 scale bytes.
inline void kquant_scale_min(const std::byte* scales, std::size_t s, int& scale, int& min) noexcept {
    if (s < 4) {
        scale = kquant_byte(scales, s) & 63;
        min = kquant_byte(scales, s + 4) & 63;
    } else {
        scale = (kquant_byte(scales, s + 4) & 15) | (kquant_byte(scales, s - 4) >> 6) << 4;
        min = (kquant_byte(scales, s + 4) >> 4) | (kquant_byte(scales, s) >> 6) << 4;
    }
}

/// The signed scale (-32 .. 31) of sub-block s < 16 of a q3_K block's 12 scale bytes.
inline int q3k_scale(const std::byte* scales, std::size_t s) noexcept {
    const int low = s < 8 ? kquant_byte(scales, s) & 15 : kquant_byte(scales, s - 8) >> 4;
    const int high = kquant_byte(scales, 8 + s % 4) >> (2 * (s / 4)) & 3;
    return (low | high << 4) - 32;
}

/// The signed code of element i < 256 of a q2_K (0 .. 3), q3_K (-4 .. 3) or q6_K (-32 .. 31) block.
inline int q2k_code(const std::byte* block, std::size_t i) noexcept {
    return kquant_byte(block + 16, 32 * (i / 128) + i % 32) >> (2 * (i % 128 / 32)) & 3;
}
inline int q3k_code(const std::byte* block, std::size_t i) noexcept {
    const std::size_t h = i / 128, k = i % 128 / 32, l = i % 32;
    const int low = kquant_byte(block + 32, 32 * h + l) >> (2 * k) & 3;
    const int high = kquant_byte(block, l) >> (4 * h + k) & 1;
    return low - 4 * (1 - high);
}
inline int q6k_code(const std::byte* block, std::size_t i) noexcept {
    const std::size_t h = i / 128, k = i % 128 / 32, l = i % 32;
    const int low = kquant_byte(block, 64 * h + 32 * (k & 1) + l) >> (4 * (k >> 1)) & 15;
    const int high = kquant_byte(block + 128, 32 * h + l) >> (2 * k) & 3;
    return (low | high << 4) - 32;
}

/// The scale fl(d * sc) and min fl(dmin * m) of sub-block s < 16 of a q2_K block (exact).
inline void q2k_group_scale_min(const std::byte* block, std::size_t s, float& scale, float& min) noexcept {
    const int packed = kquant_byte(block, s);
    scale = f16_to_float(load_le<std::uint16_t>(block + 80)) * static_cast<float>(packed & 15);
    min = f16_to_float(load_le<std::uint16_t>(block + 82)) * static_cast<float>(packed >> 4);
}
/// The super-block scale d of a q3_K or q6_K block.
inline float q3k_d(const std::byte* block) noexcept {
    return f16_to_float(load_le<std::uint16_t>(block + 108));
}
inline float q6k_d(const std::byte* block) noexcept {
    return f16_to_float(load_le<std::uint16_t>(block + 208));
}
/// The scale fl(d * sc) of sub-block s < 16 of a q3_K or q6_K block (exact).
inline float q3k_group_scale(const std::byte* block, std::size_t s) noexcept {
    return q3k_d(block) * static_cast<float>(q3k_scale(block + 96, s));
}
inline float q6k_group_scale(const std::byte* block, std::size_t s) noexcept {
    return q6k_d(block) * static_cast<float>(load_le<std::int8_t>(block + 192 + s));
}

/// Sub-block s < 16 (elements 16 s to 16 s + 15) of a q2_K, q3_K or q6_K block as an affine group of 16
/// (the mapping at the top of this file): codes q (< 4), q + 4 (< 8) or q + 32 (< 64).
inline AffineGroup16 q2k_group(const std::byte* block, std::size_t s) noexcept {
    AffineGroup16 group{};
    float min = 0.0f;
    q2k_group_scale_min(block, s, group.scale, min);
    group.bias = -min;
    for (std::size_t l = 0; l < 16; ++l) group.codes[l] = static_cast<std::uint8_t>(q2k_code(block, 16 * s + l));
    return group;
}
/// Sub-block s of a signed k-quant block (q3_K: Offset 4, q6_K: Offset 32) with this scale, whose codes
/// `code(block, i)` are the signed q: codes q + Offset, bias -Offset * scale.
template <int Offset, class Code>
AffineGroup16 offset_group(const std::byte* block, std::size_t s, float scale, Code code) noexcept {
    AffineGroup16 group{};
    group.scale = scale;
    group.bias = -static_cast<float>(Offset) * scale;
    for (std::size_t l = 0; l < 16; ++l) group.codes[l] = static_cast<std::uint8_t>(code(block, 16 * s + l) + Offset);
    return group;
}
inline AffineGroup16 q3k_group(const std::byte* block, std::size_t s) noexcept {
    return offset_group<4>(block, s, q3k_group_scale(block, s), q3k_code);
}
inline AffineGroup16 q6k_group(const std::byte* block, std::size_t s) noexcept {
    return offset_group<32>(block, s, q6k_group_scale(block, s), q6k_code);
}

// Each dequantize_*_blocks(bytes, blocks, out) writes the 256 values of each of `blocks` consecutive
// super-blocks at bytes into out, as the layout at the top of this file, sub-block by sub-block (the
// scale and min once per sub-block).

inline void dequantize_q2k_blocks(const std::byte* bytes, std::size_t blocks, float* out) noexcept {
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::byte* block = bytes + 84 * b;
        for (std::size_t s = 0; s < 16; ++s) {
            float scale = 0.0f, min = 0.0f;
            q2k_group_scale_min(block, s, scale, min);
            for (std::size_t i = 16 * s; i < 16 * s + 16; ++i, ++out)
                *out = scale * static_cast<float>(q2k_code(block, i)) - min;
        }
    }
}

inline void dequantize_q3k_blocks(const std::byte* bytes, std::size_t blocks, float* out) noexcept {
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::byte* block = bytes + 110 * b;
        for (std::size_t s = 0; s < 16; ++s) {
            const float scale = q3k_group_scale(block, s);
            for (std::size_t i = 16 * s; i < 16 * s + 16; ++i, ++out)
                *out = scale * static_cast<float>(q3k_code(block, i));
        }
    }
}

/// Sub-block s < 8 (elements 32 s to 32 s + 31) of a q4_K (FiveBits false) or q5_K block as an MLX
/// affine group: its codes (< 16 or < 32), scale fl(d * sc) and bias -fl(dmin * m), both exact, so
/// scale * code + bias is ggml's value with the same one rounding.
template <bool FiveBits>
MlxBlock q45k_group(const std::byte* block, std::size_t s) noexcept {
    const std::byte* qs = block + (FiveBits ? 48 : 16);
    int sc = 0, m = 0;
    kquant_scale_min(block + 4, s, sc, m);
    MlxBlock group{};
    group.scale = f16_to_float(load_le<std::uint16_t>(block)) * static_cast<float>(sc);
    group.bias = -(f16_to_float(load_le<std::uint16_t>(block + 2)) * static_cast<float>(m));
    for (std::size_t l = 0; l < 32; ++l) {
        const int byte = kquant_byte(qs, 32 * (s / 2) + l);
        int q = s % 2 == 0 ? byte & 15 : byte >> 4;
        if constexpr (FiveBits) q |= (kquant_byte(block + 16, l) >> s & 1) << 4;
        group.codes[l] = static_cast<std::uint8_t>(q);
    }
    return group;
}

/// q4_K (FiveBits false) and q5_K (FiveBits true).
template <bool FiveBits>
void dequantize_q45k_blocks(const std::byte* bytes, std::size_t blocks, float* out) noexcept {
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::byte* block = bytes + (FiveBits ? 176 : 144) * b;
        for (std::size_t s = 0; s < 8; ++s) {
            const MlxBlock group = q45k_group<FiveBits>(block, s);
            for (std::size_t l = 0; l < 32; ++l, ++out)
                *out = group.scale * static_cast<float>(group.codes[l]) + group.bias;
        }
    }
}

inline void dequantize_q6k_blocks(const std::byte* bytes, std::size_t blocks, float* out) noexcept {
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::byte* block = bytes + 210 * b;
        for (std::size_t s = 0; s < 16; ++s) {
            const float scale = q6k_group_scale(block, s);
            for (std::size_t i = 16 * s; i < 16 * s + 16; ++i, ++out)
                *out = scale * static_cast<float>(q6k_code(block, i));
        }
    }
}

}  // namespace io_detail
LOWBIT_END_NAMESPACE
