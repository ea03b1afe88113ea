// Scalar references of the element-wise fake-quant kernels: docs/numerics.md N2, N5, N6 and N7 in
// code. Plain loops, never optimized; detail/kernels/fake_quantize.hpp must equal them bit for bit
// (NaN lanes: any NaN).
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>

#include "../../rounding.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

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
    float scale = 1.0f;      ///< s, finite and > 0 (checked by the public entry points)
    float inv_scale = 1.0f;  ///< fl(1 / s); read only when multiply_by_reciprocal
    float zero_point = 0.0f; ///< z, an integer inside [code_min, code_max]
    float code_min = -127.0f;
    float code_max = 127.0f;
    float clamp_low = -127.0f;   ///< floor(code_min) - z (set by finish())
    float clamp_high = 127.0f;   ///< ceil(code_max) - z
    bool outer_clamp = false;    ///< code_min or code_max is not an integer (STE bounds only; z = 0)
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
struct MaskParams {
    bool on_rounded_code = false;
    float low = 0.0f;
    float high = 0.0f;
    FakeQuantParams code{};
};

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

namespace reference {

/// out[i] = fake-quant of in[i] under a deterministic rounding rule. in and out may alias exactly.
inline void fake_quantize_forward(const FakeQuantParams& params, const float* in, float* out, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        const float rounded = round_deterministic(params.rounding, fake_quant_clamped(params, in[i]));
        out[i] = fake_quant_dequantize(params, rounded);
    }
}

/// Stochastic rounding: element i uses u = stream.uniform(first_index + i) (scalar only, by design:
/// the cost is the hash, not the arithmetic). The caller advances the stream after the whole call.
inline void fake_quantize_forward_stochastic(const FakeQuantParams& params, const UniformStream& stream,
                                             std::size_t first_index, const float* in, float* out,
                                             std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        const float rounded = round_stochastic(fake_quant_clamped(params, in[i]), stream.uniform(first_index + i));
        out[i] = fake_quant_dequantize(params, rounded);
    }
}

inline bool passes_mask(const MaskParams& mask, float x) noexcept {
    if (!mask.on_rounded_code) return mask.low <= x && x <= mask.high;
    const float code = round_deterministic(mask.code.rounding, fake_quant_quotient(mask.code, x));
    return mask.code.clamp_low <= code && code <= mask.code.clamp_high;
}

/// out[i] = passes(input[i]) ? grad[i] : +0.
inline void backward_clamped(const MaskParams& mask, const float* grad, const float* input, float* out,
                             std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) out[i] = passes_mask(mask, input[i]) ? grad[i] : 0.0f;
}

inline FiniteRange finite_min_max(const float* in, std::size_t count) {
    FiniteRange range;
    for (std::size_t i = 0; i < count; ++i) {
        const float x = in[i];
        if (!std::isfinite(x)) continue;
        if (!range.found) {
            range.min = range.max = x;
            range.found = true;
        } else {
            range.min = x < range.min ? x : range.min;
            range.max = x > range.max ? x : range.max;
        }
    }
    range.min += 0.0f;  // -0 -> +0
    range.max += 0.0f;
    return range;
}

}  // namespace reference
}  // namespace detail
LOWBIT_END_NAMESPACE
