// The activations of the ternary matmul (docs/numerics.md N8, N14): per token (row) the int8 codes and
// scale of quantize_activations_int8, bit for bit, zero padded to the packed row length, with the sums
// of the codes (per row, and per group of 64 in the per-group mode) that turn the kernels' unsigned-digit
// sums into ternary ones. quantize_token_simd (xsimd) and its scalar reference quantize_token_reference.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>
#include <xsimd/xsimd.hpp>

#include "../checks.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ternary {

/// Per-token int8 activations, zero padded to the packed row length, with their code sums.
struct TernaryActivations {
    Eigen::Index rows = 0, padded = 0, groups = 0;  ///< groups: per-group sums per row (0 per tensor)
    std::vector<std::int8_t, xsimd::aligned_allocator<std::int8_t, 64>> codes;  ///< [rows, padded]
    std::vector<float> scales;                                                  ///< a[m]
    std::vector<std::int32_t> sums;                                             ///< sum of the row's codes
    std::vector<std::int32_t> group_sums;                                       ///< [rows, groups]
    const std::int8_t* row(Eigen::Index m) const { return codes.data() + m * padded; }
};

/// The scale of a row whose largest magnitude is `largest`: absmax_scale_of's rule (bitnet.hpp).
inline float token_scale(float largest) noexcept {
    float s = largest / 127.0f;
    if (!(s > 0.0f)) s = 1.0f;
    while (!std::isfinite(127.0f * s)) s = std::nextafter(s, 0.0f);
    return s;
}

/// One code: clamp(round half away from zero(x / s), -127, 127), as quantize_activations_int8.
inline std::int8_t token_code(float x, float s) noexcept {
    const float q = x / s;
    float r = std::trunc(q);
    const float fraction = q - r;  // exact
    r += fraction >= 0.5f ? 1.0f : (fraction <= -0.5f ? -1.0f : 0.0f);
    r = std::min(127.0f, std::max(-127.0f, r));
    return static_cast<std::int8_t>(static_cast<int>(r));
}

/// The codes of one row of K finite values and their scale, exactly as quantize_activations_int8 (A8:
/// s = absmax_scale_of, codes clamp(round half away from zero(x / s), -127, 127)); scalar reference of
/// quantize_token_simd. Returns the sum of the codes.
inline std::int32_t quantize_token_reference(const float* x, Eigen::Index K, std::int8_t* codes, float& scale) {
    float largest = 0.0f;
    for (Eigen::Index k = 0; k < K; ++k) largest = std::max(largest, std::fabs(x[k]));
    scale = token_scale(largest);
    std::int32_t sum = 0;
    for (Eigen::Index k = 0; k < K; ++k) {
        codes[k] = token_code(x[k], scale);
        sum += codes[k];
    }
    return sum;
}

/// quantize_token_reference with xsimd batches of Arch (the same true division and rounding).
template <class Arch>
std::int32_t quantize_token_simd(const float* x, Eigen::Index K, std::int8_t* codes, float& scale) {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr Eigen::Index W = static_cast<Eigen::Index>(fbatch::size);
    const Eigen::Index whole = K / W * W;
    fbatch largest_lanes(0.0f);
    for (Eigen::Index k = 0; k < whole; k += W)
        largest_lanes = xsimd::max(largest_lanes, xsimd::abs(fbatch::load_unaligned(x + k)));
    float largest = whole > 0 ? simd::reduce_max(largest_lanes) : 0.0f;
    for (Eigen::Index k = whole; k < K; ++k) largest = std::max(largest, std::fabs(x[k]));
    const float s = token_scale(largest);
    scale = s;
    const fbatch s_lanes(s), half(0.5f), one(1.0f), zero(0.0f), limit(127.0f);
    alignas(64) std::int32_t lanes[W];
    std::int32_t sum = 0;
    for (Eigen::Index k = 0; k < whole; k += W) {
        const fbatch q = simd::div(fbatch::load_unaligned(x + k), s_lanes);
        fbatch r = xsimd::trunc(q);
        const fbatch fraction = q - r;
        r = r + xsimd::select(fraction >= half, one, zero) - xsimd::select(fraction <= -half, one, zero);
        r = xsimd::min(limit, xsimd::max(-limit, r));
        xsimd::to_int(r).store_aligned(lanes);
        for (Eigen::Index j = 0; j < W; ++j) {
            codes[k + j] = static_cast<std::int8_t>(lanes[j]);
            sum += lanes[j];
        }
    }
    for (Eigen::Index k = whole; k < K; ++k) {
        codes[k] = token_code(x[k], s);
        sum += codes[k];
    }
    return sum;
}

/// True when every x[k] is finite: x * 0 is NaN exactly for NaN and +-Inf, and NaN survives the sum.
template <class Arch = std::conditional_t<simd::enabled, simd::arch, void>>
bool all_finite(const float* x, Eigen::Index K) {
    float poison = 0.0f;
    Eigen::Index whole = 0;
    if constexpr (!std::is_same_v<Arch, void>) {
        using fbatch = xsimd::batch<float, Arch>;
        constexpr Eigen::Index W = static_cast<Eigen::Index>(fbatch::size);
        whole = K / W * W;
        fbatch lanes(0.0f);
        const fbatch zero(0.0f);
        for (Eigen::Index k = 0; k < whole; k += W) lanes = lanes + fbatch::load_unaligned(x + k) * zero;
        alignas(64) float values[W];
        lanes.store_aligned(values);
        for (const float value : values) poison += value;
    }
    for (Eigen::Index k = whole; k < K; ++k) poison += x[k] * 0.0f;
    return poison == 0.0f;
}

/// quantize_token_simd of this build's architecture, or the reference when SIMD is off.
template <class Arch = std::conditional_t<simd::enabled, simd::arch, void>>
std::int32_t quantize_token(const float* x, Eigen::Index K, std::int8_t* codes, float& scale) {
    if constexpr (std::is_same_v<Arch, void>)
        return quantize_token_reference(x, K, codes, scale);
    else
        return quantize_token_simd<Arch>(x, K, codes, scale);
}

/// Rows of K values per thread range of prepare_activations: about 64K values, so that a batch as small
/// as 32 x 4096 is shared between two threads.
constexpr std::size_t activation_rows_per_range(Eigen::Index K) noexcept {
    return static_cast<std::size_t>(std::max<Eigen::Index>(1, (Eigen::Index{1} << 16) / std::max<Eigen::Index>(K, 1)));
}

/// Quantizes x (row-major [M, K], row stride x_stride) per token exactly as quantize_activations_int8
/// (N8), threaded over rows. Throws std::invalid_argument naming `function` and the value for a NaN or
/// infinite element (the first in row order, whatever the thread count).
inline TernaryActivations prepare_activations(const float* x, Eigen::Index x_stride, Eigen::Index M, Eigen::Index K,
                                              TernaryFormat format, bool per_group, const char* function) {
    TernaryActivations act;
    act.rows = M;
    act.padded = padded_cols(format, K);
    act.groups = per_group ? K / group_codes : 0;
    act.codes.resize(static_cast<std::size_t>(M * act.padded));
    act.scales.resize(static_cast<std::size_t>(M));
    act.sums.assign(static_cast<std::size_t>(M), 0);
    act.group_sums.assign(static_cast<std::size_t>(M * act.groups), 0);
    // Rows holding a NaN or an infinity are marked, not quantized; the first of them in row order is
    // reported after the threads, so the message does not depend on the thread count.
    std::vector<char> not_finite(static_cast<std::size_t>(M), 0);
    parallel_for(static_cast<std::size_t>(M), activation_rows_per_range(K), [&](std::size_t begin, std::size_t end) {
        for (auto m = static_cast<Eigen::Index>(begin); m < static_cast<Eigen::Index>(end); ++m) {
            const float* row = x + m * x_stride;
            if (!all_finite(row, K)) {
                not_finite[static_cast<std::size_t>(m)] = 1;
                continue;
            }
            std::int8_t* codes = act.codes.data() + m * act.padded;
            float& scale = act.scales[static_cast<std::size_t>(m)];
            act.sums[static_cast<std::size_t>(m)] = quantize_token(row, K, codes, scale);
            std::fill(codes + K, codes + act.padded, std::int8_t{0});
            for (Eigen::Index g = 0; g < act.groups; ++g) {
                std::int32_t sum = 0;
                for (Eigen::Index k = g * group_codes; k < (g + 1) * group_codes; ++k) sum += codes[k];
                act.group_sums[static_cast<std::size_t>(m * act.groups + g)] = sum;
            }
        }
    });
    for (Eigen::Index m = 0; m < M; ++m) {
        if (!not_finite[static_cast<std::size_t>(m)]) continue;
        const float* row = x + m * x_stride;
        for (Eigen::Index k = 0; k < K; ++k)
            if (!std::isfinite(row[k]))
                throw std::invalid_argument(std::string(function) + ": x(" + std::to_string(m) + ", " +
                                            std::to_string(k) + ") = " + float_text(row[k]) + " is not finite");
    }
    return act;
}

}  // namespace detail::ternary
LOWBIT_END_NAMESPACE
