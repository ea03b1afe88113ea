// simd:: operations specific to AArch64's Advanced SIMD (xsimd's neon64): the float division.
//
// xsimd (8.1 to 13) divides float batches on NEON by a reciprocal estimate refined with two
// Newton-Raphson steps, which is not IEEE division: it is off by an ulp on ordinary quotients
// (0.15f / 0.3f gives 0.49999997, not 0.5) and gives inf * 0 = NaN for a subnormal divisor. lowbit's
// rules are stated as correctly rounded quotients (docs/numerics.md N2, N9), and AArch64 has the
// instruction (fdiv), so the division here is vdivq_f32.
#pragma once

#include "../config.hpp"

#include <xsimd/xsimd.hpp>

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

template <class Arch>
inline xsimd::batch<float, Arch> div(const xsimd::batch<float, Arch>& numerator,
                                     const xsimd::batch<float, Arch>& denominator, const xsimd::neon64&) noexcept {
    return vdivq_f32(numerator, denominator);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE

#endif
