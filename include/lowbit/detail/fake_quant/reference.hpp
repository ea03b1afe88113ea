// Scalar references of the element-wise fake-quant kernels: docs/numerics.md N2, N5, N6 and N7 in
// code. Plain loops, never optimized; fake_quant/kernels.hpp must equal them bit for bit
// (NaN lanes: any NaN).
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>

#include "../../rounding.hpp"
#include "params.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {
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

inline bool passes_mask(const GradientMaskParams& mask, float x) noexcept {
    if (!mask.on_rounded_code) return mask.low <= x && x <= mask.high;
    const float code = round_deterministic(mask.code.rounding, fake_quant_quotient(mask.code, x));
    return mask.code.clamp_low <= code && code <= mask.code.clamp_high;
}

/// out[i] = passes(input[i]) ? grad[i] : +0.
inline void backward_clamped(const GradientMaskParams& mask, const float* grad, const float* input, float* out,
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
