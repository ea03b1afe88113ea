// The MLX affine quantization rule (docs/numerics.md N9.2), scalar: the group's scale and bias from its
// extremes, the code of one value, and the reference quantizer of a whole group that the vector kernel
// (quantize_kernel.hpp) must equal bit for bit.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "../../rounding.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// MLX CPU affine scale and bias of a group with extremes w_min <= w_max, all in f32 with RNE:
/// s = max((max - min) / n_bins, 1e-7), negated unless |min| > |max|; edge = the larger-magnitude
/// extreme (max on ties); q0 = RNE(edge / s); if q0 != 0 then s = edge / q0 and bias = edge, else
/// bias = 0. 1-bit codes (MLX 0.32) take the plain range instead: s = max(max - min, 1e-7), bias = min.
/// Returns {scale, bias}.
template <int Bits>
inline std::pair<float, float> group_scale_bias(float w_min, float w_max) noexcept {
    constexpr float n_bins = static_cast<float>((1 << Bits) - 1);
    constexpr float eps = 1e-7f;
    if constexpr (Bits == 1) return {std::max(w_max - w_min, eps), w_min};
    const bool min_is_edge = std::abs(w_min) > std::abs(w_max);
    float scale = std::max((w_max - w_min) / n_bins, eps);
    scale = min_is_edge ? scale : -scale;
    const float edge = min_is_edge ? w_min : w_max;
    const float q0 = round_half_to_even(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
        scale = edge / q0;
        bias = edge;
    }
    return {scale, bias};
}

/// True when every level fl(fl(s * q) + b), q in [0, 2^Bits - 1], of a group is finite. The levels are
/// monotone in q, so the two ends decide.
template <int Bits>
inline bool group_levels_finite(float scale, float bias) noexcept {
    constexpr float n_bins = static_cast<float>((1 << Bits) - 1);
    const float top = scale * n_bins;
    return std::isfinite(scale) && std::isfinite(top) && std::isfinite(top + bias);
}

namespace reference {

/// Quantizes `count` finite values as one group: codes[i] = clamp(RNE((w - bias) / s), 0, n_bins).
/// Returns {scale, bias}.
template <int Bits, class Code>
inline std::pair<float, float> quantize_group(const float* values, std::size_t count, Code* codes) {
    constexpr float n_bins = static_cast<float>((1 << Bits) - 1);
    float w_min = std::numeric_limits<float>::infinity();
    float w_max = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < count; ++i) {
        w_min = std::min(w_min, values[i]);
        w_max = std::max(w_max, values[i]);
    }
    const auto [scale, bias] = group_scale_bias<Bits>(w_min, w_max);
    for (std::size_t i = 0; i < count; ++i) {
        const float code = std::clamp(round_half_to_even((values[i] - bias) / scale), 0.0f, n_bins);
        codes[i] = static_cast<Code>(code);
    }
    return {scale, bias};
}

}  // namespace reference
}  // namespace detail
LOWBIT_END_NAMESPACE
