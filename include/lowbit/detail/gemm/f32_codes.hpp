// How the f32-activation kernels (the GEMV, batch GEMV and panel GEMM of mlx_affine/) read a format's
// packed code words as floats: F32Codes<Format>, specialized by each format in its own folder
// (mlx_affine/f32_codes.hpp, e2m1/f32_codes.hpp). A specialization has
//   x_lanes_scale(t)       the factor the GEMV's permuted x carries at code step t of a word: step<t>
//                          may return the code's value times 1 / x_lanes_scale(t) when that saves work
//                          (affine's codes masked in place); 1 otherwise;
//   step<Arch, t>(words)   code t of each lane's 32-bit word (bits t*Bits ..) as its value, times
//                          1 / x_lanes_scale(t);
//   value<Arch>(codes)     the value of each lane's code (codes < 2^Bits);
// and, for byte scales, optionally
//   group_scales<Arch>(b)  Format::group_scale of the byte in each lane (the rest of the lane zero).
// The value is Format::value (the group scale and bias are applied by the kernels), exactly.
// decode_row_scales (below) decodes a row's scale bytes through group_scales, W at a time.
#pragma once

#include "../config.hpp"

#include <bit>
#include <cstdint>

#include <Eigen/Core>

#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

template <class Format>
struct F32Codes;

/// Whether the format's F32Codes decodes a vector of scale bytes (group_scales).
template <class Format, class Arch>
concept DecodesScaleVectors = requires(xsimd::batch<std::uint32_t, Arch> bytes) {
    F32Codes<Format>::template group_scales<Arch>(bytes);
};

/// e8m0_value(e, Shift) of the byte e in each lane (the rest of the lane zero), exactly, for
/// Shift in [-22, 0]: the float whose exponent field is e + Shift where that is at least 1, else the
/// subnormal with the single bit 22 + e + Shift (the shift count masked to the subnormal bytes' range,
/// so that it stays below 32 in every lane). Selected as floats: xsimd 8.1's select on 32-bit integer
/// batches does not compile for AVX-512BW.
template <int Shift, class Arch>
LOWBIT_ALWAYS_INLINE inline xsimd::batch<float, Arch> e8m0_values(const xsimd::batch<std::uint32_t, Arch>& bytes) {
    static_assert(Shift >= -22 && Shift <= 0, "e8m0_values: Shift in [-22, 0]");
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    // The bytes with a subnormal value are e < 1 - Shift; the mask keeps their counts and bounds the rest.
    constexpr std::uint32_t subnormal_mask = (1u << std::bit_width(static_cast<unsigned>(-Shift))) - 1u;
    static_assert(subnormal_mask + 22 + Shift < 32, "e8m0_values: shift counts below 32");
    const fbatch normal = simd::bit_cast<float>((bytes + ubatch(static_cast<std::uint32_t>(Shift))) << 23);
    const fbatch subnormal = simd::bit_cast<float>(
        ubatch(1u) << ((bytes & ubatch(subnormal_mask)) + ubatch(static_cast<std::uint32_t>(22 + Shift))));
    return xsimd::select(xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(bytes)) >= fbatch(1.0f - Shift), normal,
                         subnormal);
}

/// out[g] = Format::group_scale(scales[g]) for g < groups, W groups at a time through
/// F32Codes::group_scales, exactly.
template <class Arch, class Format>
requires DecodesScaleVectors<Format, Arch>
void decode_row_scales(const std::uint8_t* scales, Eigen::Index groups, float* out) {
    constexpr Eigen::Index W = static_cast<Eigen::Index>(xsimd::batch<float, Arch>::size);
    Eigen::Index g = 0;
    for (; g + W <= groups; g += W)
        F32Codes<Format>::template group_scales<Arch>(simd::spread_byte_groups<W, Arch>(scales + g))
            .store_unaligned(out + g);
    for (; g < groups; ++g) out[g] = Format::group_scale(scales[g]);
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
