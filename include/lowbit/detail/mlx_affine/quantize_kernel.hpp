// quantize_row_f32: one row of groups quantized by the MLX affine rule (quantize.hpp), vectorised with
// xsimd, bit for bit equal to reference::quantize_group on every group.
//
// Extremes: lane-wise min / max over each group, then W groups' extremes in one vector each
// (simd::reduce_min_each / reduce_max_each). The values are finite, so the order and the sign of zero
// extremes cannot change s or b: s is max(|max - min| / n, 1e-7) up to sign and edge / q0 and RNE(+-0)
// agree. Scale, bias and 1 / s: group_scale_bias's operations on W groups at once (group_scale_bias_lanes).
//
// Codes. The quotient a / s (a = fl(w - b), as the reference) is first taken as y = fl(a * fl(1 / s)),
// without the vector division. With u = 2^-24 and 1 / s a normal float, |y - a / s| <= (2u + u^2) |a / s|
// and |fl(a / s) - a / s| <= u |a / s|, so |y - fl(a / s)| < 3.0001 u |y|. Unless y lies within that of
// a half-integer, y and the reference's fl(a / s) round to the same integer. A lane with |y| > 2^Bits
// has |fl(a / s)| > 2^Bits (1 - 3.0001u) > n + 1/2 too, so both clamp to the same code; only |y| <=
// 2^Bits matters, where that distance is below reciprocal_tie_margin * 2^Bits (8u 2^Bits, a constant).
// The group's largest |y - RNE(y)| (simd::round_residual, exact; simd::max_magnitude) is compared with
// it once per group. A group with any lane that near a half-integer is coded again by the true division
// (exact ties always are), as is every group whose reciprocal is not kept (below).
// Within a group y is monotone in w (a rounded difference and a rounded product are), so the quotients of
// the group's two extremes bound all of them. group_scale_bias_lanes keeps 1 / s only for groups whose
// two extreme quotients lie in [-1/2, 2^(Bits+1)] and whose 1 / s is a normal float: every y of such a
// group is finite and RNE(y) (simd::nearbyint_to_int) lies in [0, 2^(Bits+1)], so only the top is clamped.
//
// Stores: 4-bit codes two to a byte (simd::store_nibbles) and 8-bit codes one to a byte are the packed
// MLX words' bytes, written in place (quantize_row_packs); other widths one byte per code, packed after.
// Groups go in blocks of `quantize_block_groups`: first the extremes of the block's groups, then their
// scales, biases and reciprocals W groups per vector, then their codes.
// Non-finite values are detected in the first pass (x * 0 is NaN exactly for NaN and +-Inf) and the row
// is then left to the caller, which finds and reports the element; groups whose levels overflow are
// found from the scales and biases, W at a time (group_levels_finite_lanes).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../row_fault.hpp"
#include "../simd.hpp"
#include "../unroll.hpp"
#include "quantize.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// Groups per block of quantize_row_f32 (enough scalar chains in flight to hide their latency).
inline constexpr std::size_t quantize_block_groups = 16;
/// Floats per 64-byte cache line (the prefetch step).
inline constexpr std::size_t cache_line_floats = 16;
/// How many blocks ahead the coding pass prefetches its input (16 KiB for g64). 4 KiB ahead into L1 made
/// a 4096 x 4096 q4 row loop 1.59 times a plain read of the same matrix; 16 KiB into L2 1.44 (medians
/// of 8 alternating runs, 1 thread, 2026-12-01; benchmarks/README.md).
inline constexpr std::size_t quantize_prefetch_blocks = 4;
/// A reciprocal quotient y this close to a half-integer, relative to |y|, may round otherwise than the true
/// quotient (the bound above is 3.0001 * 2^-24); its group is coded by division. Applied as the absolute
/// margin for |y| = 2^Bits (above).
inline constexpr float reciprocal_tie_margin = 0x1p-21f;

/// Lane-wise min and max of Count values (Count a multiple of the float lanes) and their poison, the
/// lane-wise sum of value * 0: zero exactly when every value is finite (NaN and +-Inf give NaN).
template <class Arch>
struct LaneExtremes {
    xsimd::batch<float, Arch> low, high, poison;
};

template <class Arch, int Count>
LOWBIT_ALWAYS_INLINE inline LaneExtremes<Arch> lane_extremes(const float* values) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    static_assert(Count % W == 0, "lane_extremes: Count must be a multiple of the float lanes");
    const fbatch zero(0.0f);
    LaneExtremes<Arch> e{fbatch::load_unaligned(values), fbatch::load_unaligned(values), zero};
    e.poison = e.low * zero;
    static_for<Count / W - 1>([&](auto step) {
        const fbatch v = fbatch::load_unaligned(values + (decltype(step)::value + 1) * W);
        e.low = simd::min(v, e.low);
        e.high = simd::max(v, e.high);
        e.poison = simd::fma(v, zero, e.poison);
    });
    return e;
}

/// group_scale_bias (quantize.hpp) on W groups at once, operation for operation (IEEE division, RNE,
/// the same selections), so every lane has the scalar rule's bits; also 1 / scale where the reciprocal
/// quotient may code the group (above), else 0.
template <class Arch, int Bits>
LOWBIT_ALWAYS_INLINE inline void group_scale_bias_lanes(const xsimd::batch<float, Arch>& low,
                                                        const xsimd::batch<float, Arch>& high, float* scales,
                                                        float* biases, float* inverses) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    const fbatch zero(0.0f), one(1.0f);
    const auto min_is_edge = xsimd::abs(low) > xsimd::abs(high);
    const fbatch range_scale = simd::max(simd::div(high - low, fbatch(static_cast<float>((1 << Bits) - 1))), fbatch(1e-7f));
    const fbatch scale = xsimd::select(min_is_edge, range_scale, -range_scale);
    const fbatch edge = xsimd::select(min_is_edge, low, high);
    const fbatch q0 = simd::nearbyint(simd::div(edge, scale));
    const auto q0_nonzero = q0 != zero;
    fbatch final_scale = xsimd::select(q0_nonzero, simd::div(edge, xsimd::select(q0_nonzero, q0, one)), scale);
    fbatch bias = xsimd::select(q0_nonzero, edge, zero);
    if constexpr (Bits == 1) {  // the plain range (group_scale_bias)
        final_scale = range_scale;
        bias = low;
    }
    const fbatch inverse = simd::div(one, final_scale);
    // The coding pass's quotients at the group's extremes, by its operations (they bound the others).
    const fbatch low_quotient = (low - bias) * inverse, high_quotient = (high - bias) * inverse;
    const fbatch floor(-0.5f), ceiling(static_cast<float>(2 << Bits));
    const auto quotients_in_range = (low_quotient >= floor) & (high_quotient >= floor) & (low_quotient <= ceiling) &
                                    (high_quotient <= ceiling);  // false for NaN
    final_scale.store_unaligned(scales);
    bias.store_unaligned(biases);
    xsimd::select(quotients_in_range, inverse, zero).store_unaligned(inverses);
}

/// group_levels_finite (quantize.hpp) of W groups at once, by the same operations.
template <class Arch, int Bits>
LOWBIT_ALWAYS_INLINE inline xsimd::batch_bool<float, Arch> group_levels_finite_lanes(
    const xsimd::batch<float, Arch>& scale, const xsimd::batch<float, Arch>& bias) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    const fbatch largest(std::numeric_limits<float>::max());
    const fbatch top = scale * fbatch(static_cast<float>((1 << Bits) - 1));
    return (xsimd::abs(scale) <= largest) & (xsimd::abs(top) <= largest) & (xsimd::abs(top + bias) <= largest);
}

/// Whether quantize_row_f32 writes the row's packed MLX words itself (codes = the words' bytes): 4-bit
/// codes two to a byte (simd::store_nibbles), 8-bit codes one byte each, on a little-endian host. Other
/// widths are written one byte per code, for pack_code_bytes.
template <int Bits>
inline constexpr bool quantize_row_packs = std::endian::native == std::endian::little && (Bits == 4 || Bits == 8);

/// The codes of the groups * GroupSize values of a row, as quantize_row_packs says (packed words' bytes,
/// or one byte per code, < 2^Bits); scales[g] and biases[g] for each group; and what it found (RowFault:
/// with a NaN or infinite value the outputs are unspecified).
template <class Arch, int GroupSize, int Bits>
RowFault quantize_row_f32(const float* values, std::size_t groups, std::uint8_t* codes, float* scales,
                          float* biases) {
    using fbatch = xsimd::batch<float, Arch>;
    using ibatch = xsimd::batch<std::int32_t, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    static_assert(GroupSize % W == 0, "quantize_row_f32: GroupSize must be a multiple of the float lanes");
    static_assert(fbatch::size == ibatch::size, "quantize_row_f32: int32 and float lanes must pair up");
    constexpr int steps = GroupSize / W;
    const fbatch zero(0.0f), top(static_cast<float>((1 << Bits) - 1));
    const ibatch top_code((1 << Bits) - 1);
    // |y - RNE(y)| below this is far enough from a half-integer for every |y| <= 2^Bits (exact in float).
    const fbatch safe_distance(0.5f - reciprocal_tie_margin * static_cast<float>(1 << Bits));
    static_assert(quantize_block_groups % W == 0, "quantize_row_f32: a block must be whole vectors of groups");
    // Lane-wise extremes of each group of a block; a tail block repeats its first group's (unused).
    std::array<fbatch, quantize_block_groups> group_lows, group_highs;
    std::array<float, quantize_block_groups> block_scales{}, block_biases{}, inverses{};
    xsimd::batch_bool<float, Arch> levels_finite(true);  // of every group so far (a tail block's copies too)
    for (std::size_t first = 0; first < groups; first += quantize_block_groups) {
        const std::size_t count = std::min(quantize_block_groups, groups - first);
        fbatch poison = zero;
        for (std::size_t g = 0; g < count; ++g) {
            const LaneExtremes<Arch> group = lane_extremes<Arch, GroupSize>(values + (first + g) * GroupSize);
            poison = poison + group.poison;
            group_lows[g] = group.low;
            group_highs[g] = group.high;
        }
        if (!(simd::reduce_add(poison) == 0.0f)) return RowFault::non_finite_value;
        for (std::size_t g = count; g < quantize_block_groups; ++g) {
            group_lows[g] = group_lows[0];
            group_highs[g] = group_highs[0];
        }
        for (std::size_t g = 0; g < quantize_block_groups; g += W) {
            group_scale_bias_lanes<Arch, Bits>(simd::reduce_min_each(&group_lows[g]),
                                               simd::reduce_max_each(&group_highs[g]), &block_scales[g],
                                               &block_biases[g], &inverses[g]);
            levels_finite = levels_finite & group_levels_finite_lanes<Arch, Bits>(
                                                fbatch::load_unaligned(&block_scales[g]),
                                                fbatch::load_unaligned(&block_biases[g]));
        }
        std::copy_n(block_scales.begin(), count, scales + first);
        std::copy_n(block_biases.begin(), count, biases + first);
        if constexpr (Bits == 1) {
            // A 1-bit group's bias is its minimum. When that is zero, its sign is the first zero's in the
            // group, as the reference's (and MLX's) sequential std::min keeps it; the lane-wise minimum
            // may hold the other zero.
            for (std::size_t g = 0; g < count; ++g)
                if (biases[first + g] == 0.0f)
                    biases[first + g] =
                        *std::find(values + (first + g) * GroupSize, values + (first + g + 1) * GroupSize, 0.0f);
        }
        for (std::size_t g = 0; g < count; ++g) {
            const std::size_t offset = (first + g) * GroupSize;
            // The same group quantize_prefetch_blocks blocks on, into L2 while this one is coded: the
            // extremes pass then finds it there instead of waiting on DRAM. A hint only: past the row's
            // end it may touch the next row or nothing (a prefetch never faults).
            for (std::size_t line = 0; line < GroupSize; line += cache_line_floats)
                __builtin_prefetch(values + offset + quantize_prefetch_blocks * quantize_block_groups * GroupSize + line,
                                   0, 2);
            // Stores the codes (each in [0, 2^Bits - 1]) of step i of the group.
            const auto store_codes = [&](int i, const ibatch& code) LOWBIT_ALWAYS_INLINE {
                if constexpr (quantize_row_packs<Bits> && Bits == 4)
                    simd::store_nibbles(code, codes + (offset + i * W) / 2);
                else
                    simd::store_bytes(code, codes + offset + i * W);
            };
            const float inverse = inverses[g];
            const fbatch bias(biases[first + g]);
            bool coded = false;  // by the reciprocal, to the codes the division gives
            if (std::isnormal(inverse)) {
                const fbatch reciprocal(inverse);
                fbatch farthest = zero;  // the largest |y - RNE(y)| of the group
                static_for<steps>([&](auto step) {
                    constexpr int i = decltype(step)::value;
                    const fbatch quotient = (fbatch::load_unaligned(values + offset + i * W) - bias) * reciprocal;
                    farthest = simd::max_magnitude(farthest, simd::round_residual(quotient));
                    // RNE(y) is in [0, 2^(Bits+1)] (above): only the top is clamped.
                    store_codes(i, xsimd::min(top_code, simd::nearbyint_to_int(quotient)));
                });
                coded = xsimd::all(farthest < safe_distance);
            }
            if (coded) continue;
            const fbatch scale(scales[first + g]);
            static_for<steps>([&](auto step) {
                constexpr int i = decltype(step)::value;
                const fbatch rounded =
                    simd::nearbyint(simd::div(fbatch::load_unaligned(values + offset + i * W) - bias, scale));
                store_codes(i, xsimd::batch_cast<std::int32_t>(simd::min(top, simd::max(zero, rounded))));
            });
        }
    }
    return xsimd::all(levels_finite) ? RowFault::none : RowFault::group_out_of_range;
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
