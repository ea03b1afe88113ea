// simd:: operations specific to AVX (and AVX2 / FMA3 built on it): the streaming store.
#pragma once

#include "../config.hpp"

#include <xsimd/xsimd.hpp>

#if defined(__AVX__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::avx&) noexcept {
    _mm256_stream_ps(aligned_address, values);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
