// The MLX affine quantization rule for one group (scalar: it is the reference and the only
// implementation; quantize in quantized_matrix.hpp runs it per group and packs the codes).
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

/// MLX CPU affine quantization of one group (docs/numerics.md N9.2), all in f32 with RNE:
/// s = max((max - min) / n_bins, 1e-7), negated unless |min| > |max|; edge = the larger-magnitude
/// extreme (max on ties); q0 = RNE(edge / s); if q0 != 0 then s = edge / q0 and bias = edge, else
/// bias = 0; q = clamp(RNE((w - bias) / s), 0, n_bins). Returns {scale, bias}.
template <int Bits>
inline std::pair<float, float> quantize_group(const float* values, std::size_t count, std::uint8_t* codes) {
    constexpr float n_bins = static_cast<float>((1 << Bits) - 1);
    constexpr float eps = 1e-7f;
    float w_min = std::numeric_limits<float>::infinity();
    float w_max = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < count; ++i) {
        w_min = std::min(w_min, values[i]);
        w_max = std::max(w_max, values[i]);
    }
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
    for (std::size_t i = 0; i < count; ++i) {
        const float code = std::clamp(round_half_to_even((values[i] - bias) / scale), 0.0f, n_bins);
        codes[i] = static_cast<std::uint8_t>(code);
    }
    return {scale, bias};
}

}  // namespace detail
LOWBIT_END_NAMESPACE
