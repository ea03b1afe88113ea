// quantize_group_f32: one group of GroupSize floats quantized by the MLX affine rule (quantize.hpp),
// vectorised with xsimd, bit for bit equal to reference::quantize_group: the extremes by lane-wise
// min / max (the values are finite, so the order and the sign of zero extremes cannot change s or b:
// s is max(|max - min| / n, 1e-7) up to sign and edge / q0 and RNE(+-0) agree), the quotient by a true
// division (as the reference), RNE by simd::nearbyint, the clamp by simd::max / min.
// Non-finite values are detected in the same pass (x * 0 is NaN exactly for NaN and +-Inf) and the
// group is then left to the caller (false returned), which reports the element.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../simd.hpp"
#include "../unroll.hpp"
#include "quantize.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// codes[i] (int32) for the GroupSize values of one group; scale and bias set. Returns false, with
/// codes, scale and bias unspecified, when a value is NaN or infinite.
template <class Arch, int GroupSize, int Bits>
bool quantize_group_f32(const float* values, std::int32_t* codes, float& scale, float& bias) {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    static_assert(GroupSize % W == 0, "quantize_group_f32: GroupSize must be a multiple of the float lanes");
    constexpr int steps = GroupSize / W;
    std::array<fbatch, steps> v;
    static_for<steps>([&](auto i) { v[i] = fbatch::load_unaligned(values + i * W); });
    fbatch low = v[0], high = v[0], poison = v[0] * fbatch(0.0f);
    static_for<steps - 1>([&](auto step) {
        constexpr int i = decltype(step)::value + 1;
        low = simd::min(v[i], low);
        high = simd::max(v[i], high);
        poison = simd::fma(v[i], fbatch(0.0f), poison);
    });
    if (!(simd::reduce_add(poison) == 0.0f)) return false;
    const float w_min = simd::reduce_min(low), w_max = simd::reduce_max(high);
    const auto [s, b] = group_scale_bias<Bits>(w_min, w_max);
    scale = s;
    bias = b;
    const fbatch scale_v(s), bias_v(b), zero(0.0f), top(static_cast<float>((1 << Bits) - 1));
    static_for<steps>([&](auto i) {
        const fbatch code = simd::min(top, simd::max(zero, simd::nearbyint((v[i] - bias_v) / scale_v)));
        xsimd::batch_cast<std::int32_t>(code).store_unaligned(codes + i * W);
    });
    return true;
}

/// Packs `count` int32 codes (a multiple of W * 32 / Bits... any multiple of 32) into MLX words, for Bits
/// dividing 32: each code is shifted to its place in its word by a lane-wise shift, then the 32 / Bits
/// shifted codes of a word are OR-ed (their bits are disjoint). Equals pack_codes (packing.hpp).
template <class Arch, int Bits>
void pack_whole_word_codes(const std::int32_t* codes, std::size_t count, std::uint32_t* words) {
    static_assert(32 % Bits == 0, "pack_whole_word_codes: codes must not straddle words");
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr std::size_t W = ubatch::size;
    constexpr std::size_t codes_per_word = 32 / Bits;
    alignas(64) std::array<std::uint32_t, W> shift_amounts{};
    for (std::size_t i = 0; i < W; ++i) shift_amounts[i] = static_cast<std::uint32_t>((i % codes_per_word) * Bits);
    const ubatch shifts = ubatch::load_aligned(shift_amounts.data());
    alignas(64) std::array<std::uint32_t, W> shifted{};
    std::size_t i = 0;
    if constexpr (W % codes_per_word == 0) {
        for (; i + W <= count; i += W) {
            (ubatch::load_unaligned(reinterpret_cast<const std::uint32_t*>(codes + i)) << shifts)
                .store_aligned(shifted.data());
            for (std::size_t w = 0; w < W / codes_per_word; ++w) {
                std::uint32_t word = 0;
                for (std::size_t t = 0; t < codes_per_word; ++t) word |= shifted[w * codes_per_word + t];
                words[(i / codes_per_word) + w] = word;
            }
        }
    }
    for (; i < count; i += codes_per_word) {
        std::uint32_t word = 0;
        for (std::size_t t = 0; t < codes_per_word; ++t)
            word |= static_cast<std::uint32_t>(codes[i + t]) << (t * Bits);
        words[i / codes_per_word] = word;
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
