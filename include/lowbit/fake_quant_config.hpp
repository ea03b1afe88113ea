// The configuration of lowbit's fake quantizers (FakeQuantize, PerChannelFakeQuantize): rounding, range,
// observer, quotient and gradient mask, with the PyTorch preset, and the gradients backward_lsq returns.
// Numerics: docs/numerics.md N1-N6.
#pragma once

#include "detail/config.hpp"

#include <cstdint>
#include <vector>

#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Where calibration statistics come from.
enum class Observer {
    min_max,         ///< running minimum and maximum over every batch observed
    moving_average,  ///< PyTorch's MovingAverageMinMaxObserver: first batch sets, then m += c (batch - m)
};

/// Which inputs backward_clamped lets the gradient through for.
enum class GradientMask {
    input_band,    ///< (qmin - z) s <= x <= (qmax - z) s on the raw input, inclusive (N6.2)
    rounded_code,  ///< qmin <= R(v) + z <= qmax on the rounded, unclamped code (PyTorch)
};

struct FakeQuantConfig {
    Rounding rounding = Rounding::half_away_from_zero;
    /// Symmetric quantizers only: [-(2^(b-1)-1), 2^(b-1)-1] when true, [-2^(b-1), 2^(b-1)-1] when false.
    bool narrow_range = true;
    Observer observer = Observer::min_max;
    float averaging_constant = 0.01f;  ///< Observer::moving_average's c, in (0, 1]
    std::uint64_t seed = 0;            ///< Rounding::stochastic: seed of the UniformStream forward(x) uses
    bool multiply_by_reciprocal = false;  ///< quotient x * fl(1/s) instead of x / s (N2)
    GradientMask gradient_mask = GradientMask::input_band;
    /// Calibrated scales are floored here before the zero point is computed (N4.4), so all-zero data gives
    /// a usable scale and outputs of exactly 0.
    float min_scale = 1e-10f;

    /// torch.fake_quantize_per_tensor_affine bit for bit (forward and gradient mask; docs/numerics.md N5, N6): RNE,
    /// x * fl(1/s), z added after rounding, full symmetric range, mask on the rounded code. Calibration
    /// follows PyTorch's observer where N4 allows: moving average (c = 0.01), scale floor 2^-23, zero
    /// point by RNE. (N4's symmetric scale max|x| / qmax is kept; PyTorch divides by (qmax - qmin) / 2.)
    static FakeQuantConfig pytorch() {
        FakeQuantConfig config;
        config.rounding = Rounding::half_to_even;
        config.narrow_range = false;
        config.observer = Observer::moving_average;
        config.averaging_constant = 0.01f;
        config.multiply_by_reciprocal = true;
        config.gradient_mask = GradientMask::rounded_code;
        config.min_scale = 0x1.0p-23f;
        return config;
    }
};

/// Input gradient and scale gradient of backward_lsq.
template <class Gradient>
struct LsqGradients {
    Gradient grad_input;
    float grad_scale = 0.0f;
};

/// Input gradient and one scale gradient per channel (PerChannelFakeQuantize::backward_lsq).
template <class Gradient>
struct PerChannelLsqGradients {
    Gradient grad_input;
    std::vector<float> grad_scales;
};

LOWBIT_END_NAMESPACE
