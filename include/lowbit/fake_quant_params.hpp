// The parameters of one element-wise fake-quant pass, as FakeQuantize::params() and mask() give them
// and every fake-quant kernel takes them: FakeQuantParams (forward) and GradientMaskParams
// (backward_clamped). Plain values; docs/numerics.md N5 and N6.2 give the rules they encode.
#pragma once

#include "detail/config.hpp"

#include <cmath>

#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE

/// One fake-quant pass, every value a float so kernels need no conversions:
///   v = x / s            (or x * fl(1/s) when multiply_by_reciprocal: PyTorch)
///   r = R(clamp(v, clamp_low, clamp_high))     clamp_low = floor(qmin) - z, clamp_high = ceil(qmax) - z
///   r = clamp(r, qmin, qmax)                   only when outer_clamp (non-integer STE bounds, z = 0)
///   y = (r + 0) * s
/// For integer qmin, qmax, z this is N5's y = (clamp(R(v) + z, qmin, qmax) - z) * s exactly: rounding is
/// monotone and fixes integers, so clamping to integer bounds commutes with it, and z is exact. Clamping
/// first saves the zero-point add and subtract. NaN stays NaN (the clamp lets it through); +-Inf
/// saturate to the range ends; the "+ 0" makes a zero result +0 (integer semantics, as PyTorch). The STE
/// functions are the same pass with z = 0 and [qmin, qmax] = [min_val, max_val].
struct FakeQuantParams {
    float scale = 1.0f;       ///< s, finite and > 0 (checked by the public entry points)
    float inv_scale = 1.0f;   ///< fl(1 / s); read only when multiply_by_reciprocal
    float zero_point = 0.0f;  ///< z, an integer inside [code_min, code_max]
    float code_min = -127.0f;
    float code_max = 127.0f;
    float clamp_low = -127.0f;  ///< floor(code_min) - z (set by finish())
    float clamp_high = 127.0f;  ///< ceil(code_max) - z
    bool outer_clamp = false;   ///< code_min or code_max is not an integer (STE bounds only; z = 0)
    bool multiply_by_reciprocal = false;
    Rounding rounding = Rounding::half_away_from_zero;  ///< kernels take the two deterministic rules

    /// Fills the derived fields from scale, code_min, code_max and zero_point.
    FakeQuantParams& finish() noexcept {
        inv_scale = 1.0f / scale;
        clamp_low = std::floor(code_min) - zero_point;
        clamp_high = std::ceil(code_max) - zero_point;
        outer_clamp = std::floor(code_min) != code_min || std::ceil(code_max) != code_max;
        return *this;
    }
};

/// Pass band of backward_clamped (N6.2): dx = g where the element passes, else +0.
///   raw band (default):  low <= x <= high, inclusive, NaN fails; low = (qmin - z) * s, high = (qmax - z) * s
///   rounded code (PyTorch): qmin <= R(v) + z <= qmax with v, R, z from `code`, evaluated as
///                           clamp_low <= R(v) <= clamp_high (the same for integer z); NaN fails
struct GradientMaskParams {
    bool on_rounded_code = false;
    float low = 0.0f;
    float high = 0.0f;
    FakeQuantParams code{};
};

LOWBIT_END_NAMESPACE
