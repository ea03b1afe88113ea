// The element-wise fake-quant passes as the public headers call them: thread splitting
// (detail::parallel_for) and the streaming-store decision; dispatch/fake_quant.hpp picks the kernel of each range.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <vector>

#include "../dispatch/fake_quant.hpp"
#include "../threading/parallel.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Smallest thread range of an element-wise pass, in floats (1 MiB read per input): below this,
/// starting a thread costs more than the work it takes over.
inline constexpr std::size_t elementwise_grain = std::size_t{1} << 18;

/// Outputs of at least this many floats (16 MiB, half the L3 of the machine class lowbit is tuned on:
/// benchmarks/README.md) are written with non-temporal stores: they cannot stay in cache anyway, and
/// streaming saves the read-for-ownership.
inline constexpr std::size_t streaming_min_count = std::size_t{1} << 22;

/// out = fake-quant(in) (fake_quant/params.hpp has the formula). Deterministic rounding here;
/// Rounding::stochastic goes through fake_quantize_forward_stochastic. in == out allowed.
inline void fake_quantize_forward(const FakeQuantParams& params, const float* in, float* out, std::size_t count) {
    const bool stream = count >= streaming_min_count;
    const kernels::Quotient quotient = fake_quant_quotient_for(params);
    parallel_for(count, elementwise_grain, [&](std::size_t begin, std::size_t end) {
        fake_quantize_forward_range(params, quotient, stream, in + begin, out + begin, end - begin);
    });
}

/// Stochastic rounding (scalar by design): element i draws stream.uniform(i); the stream then advances
/// by count, so the result does not depend on the thread count.
inline void fake_quantize_forward_stochastic(const FakeQuantParams& params, UniformStream& stream, const float* in,
                                             float* out, std::size_t count) {
    parallel_for(count, elementwise_grain, [&](std::size_t begin, std::size_t end) {
        reference::fake_quantize_forward_stochastic(params, stream, begin, in + begin, out + begin, end - begin);
    });
    stream.advance(count);
}

/// out = grad where the element passes the mask, else +0. grad, input and out have `count` floats.
inline void backward_clamped(const GradientMaskParams& mask, const float* grad, const float* input, float* out,
                             std::size_t count) {
    const bool stream = count >= streaming_min_count;
    const kernels::Quotient quotient = fake_quant_quotient_for(mask.code);
    parallel_for(count, elementwise_grain, [&](std::size_t begin, std::size_t end) {
        backward_clamped_range(mask, quotient, stream, grad + begin, input + begin, out + begin, end - begin);
    });
}

/// Smallest and largest finite value (docs/numerics.md N4.1: non-finite values are skipped).
inline FiniteRange finite_min_max(const float* in, std::size_t count) {
    return parallel_reduce(
        count, elementwise_grain, FiniteRange{},
        [&](std::size_t begin, std::size_t end) { return finite_min_max_range(in + begin, end - begin); },
        [](FiniteRange total, const FiniteRange& range) {
            if (!range.found) return total;
            if (!total.found) return range;
            total.min = range.min < total.min ? range.min : total.min;
            total.max = range.max > total.max ? range.max : total.max;
            return total;
        });
}

}  // namespace detail
LOWBIT_END_NAMESPACE
