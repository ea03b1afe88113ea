// simd:: operations specific to SSE2 (and the SSE family built on it): the streaming store.
#pragma once

#include "../config.hpp"

#include <xsimd/xsimd.hpp>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::sse2&) noexcept {
    _mm_stream_ps(aligned_address, values);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
