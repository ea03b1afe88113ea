// Rounding: the one enum every fake-quant and STE path takes, and the scalar rounding contract.
#pragma once

#include <cmath>

namespace lowbit {

/// How a real-valued code v = x / scale becomes an integer code.
enum class Rounding {
    half_away_from_zero,  ///< std::round: 0.5 -> 1, -0.5 -> -1, 2.5 -> 3 (lowbit's default, the seeds')
    half_to_even,         ///< std::nearbyint in the default FP mode: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 (PyTorch, MLX CPU)
    stochastic,           ///< floor(v + u), u uniform in [0, 1) from a seeded generator: unbiased on average
};

namespace detail {

/// Round half away from zero (C round). NaN stays NaN, +-Inf stay +-Inf.
inline float round_half_away_from_zero(float value) noexcept { return std::round(value); }

/// Round half to even. Uses rint in the default rounding mode, which lowbit never changes.
inline float round_half_to_even(float value) noexcept { return std::nearbyint(value); }

}  // namespace detail
}  // namespace lowbit
