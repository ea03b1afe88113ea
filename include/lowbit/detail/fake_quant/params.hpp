// The scalar steps every fake-quant kernel and reference shares, on the parameters of one pass
// (FakeQuantParams, GradientMaskParams: <lowbit/fake_quant_params.hpp>), and FiniteRange (calibration).
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>

#include "../../fake_quant_params.hpp"
#include "../../rounding.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Smallest and largest finite value; `found` false when there is none (empty, or all NaN/Inf).
/// Zeros come back as +0 (the sign of a zero extreme depends on visiting order, so it is dropped).
struct FiniteRange {
    float min = 0.0f;
    float max = 0.0f;
    bool found = false;
};

inline float fake_quant_quotient(const FakeQuantParams& params, float x) noexcept {
    return params.multiply_by_reciprocal ? x * params.inv_scale : x / params.scale;
}

/// v clamped to the code range (before rounding).
inline float fake_quant_clamped(const FakeQuantParams& params, float x) noexcept {
    return clamp_code(fake_quant_quotient(params, x), params.clamp_low, params.clamp_high);
}

/// y from the rounded clamped code (the shared tail of every rounding rule).
inline float fake_quant_dequantize(const FakeQuantParams& params, float rounded) noexcept {
    if (params.outer_clamp) rounded = clamp_code(rounded, params.code_min, params.code_max);
    return (rounded + 0.0f) * params.scale;
}

}  // namespace detail
LOWBIT_END_NAMESPACE
