// The error estimate clip search ranks its candidate ranges by: sum_i c_i (level(q_i) - v_i)^2 over one
// group of Count values coded with (scale, bias) by the reciprocal, q = RNE(clamp((v - b) * (1 / s),
// 0, max)) (c = weights when Weighted), vectorised with xsimd in the lanes of Arch. The reference is
// group_squared_error_fast<Bits, Count, Weighted, false> (group_fit.hpp: 8 float partial sums, the
// compiler's vectorization). Both compute the same terms (levels s * q + b by simd::fma here, which the
// compiler may or may not contract there); they differ in the order of the float sum (W lanes here,
// then simd::reduce_add) and, where the compiler does not contract, by one rounding of each level, so
// they agree to the rounding of a Count-term float sum (relative Count * FLT_EPSILON of sum_i |term_i|
// at worst) plus what a level off by FLT_EPSILON * (|s| * max + |b|) changes in c e^2. Only the ranking
// uses it: the error clip search reports and compares with RTN stays group_squared_error_fast's exact one.
#pragma once

#include "../config.hpp"

#include <array>

#include <xsimd/xsimd.hpp>

#include "../simd.hpp"
#include "../unroll.hpp"
#include "group_fit.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

/// The estimate for one group of Count finite values (weights c of Count values when Weighted).
template <class Arch, int Bits, int Count, bool Weighted>
LOWBIT_ALWAYS_INLINE inline float group_squared_error_estimate(const float* values, const float* weights, float scale,
                                                               float bias) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    static_assert(Count % (2 * W) == 0, "group_squared_error_estimate: Count must be a multiple of twice the lanes");
    const fbatch inverse_scale(1.0f / scale), scale_v(scale), bias_v(bias), zero(0.0f),
        top(static_cast<float>((1 << Bits) - 1));
    std::array<fbatch, 2> sums{fbatch(0.0f), fbatch(0.0f)};  // two chains, so the fmas overlap
    static_for<Count / W>([&](auto step) {
        constexpr int i = decltype(step)::value;
        const fbatch v = fbatch::load_unaligned(values + i * W);
        const fbatch q = simd::nearbyint(simd::min(top, simd::max(zero, (v - bias_v) * inverse_scale)));
        const fbatch error = simd::fma(scale_v, q, bias_v) - v;
        if constexpr (Weighted)
            sums[i % 2] = simd::fma(fbatch::load_unaligned(weights + i * W) * error, error, sums[i % 2]);
        else
            sums[i % 2] = simd::fma(error, error, sums[i % 2]);
    });
    return simd::reduce_add(sums[0] + sums[1]);
}

/// The estimate in the best instruction set of this translation unit (the reference where there is none).
template <int Bits, int Count, bool Weighted>
inline float group_squared_error_ranking(const float* values, const float* weights, float scale, float bias) noexcept {
    if constexpr (simd::enabled && Count % (2 * simd::width<float>) == 0)
        return group_squared_error_estimate<simd::arch, Bits, Count, Weighted>(values, weights, scale, bias);
    else
        return group_squared_error_fast<Bits, Count, Weighted, false>(values, weights, scale, bias);
}

}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
