// simd:: operations specific to AVX2 (and FMA3 on AVX2): the two-group scale broadcast.
#pragma once

#include "../config.hpp"

#include <cstring>

#include <xsimd/xsimd.hpp>

#if defined(__AVX2__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

/// One 64-bit broadcast and one lane permute.
template <class Arch>
inline xsimd::batch<float, Arch> broadcast_halves(const float* pair, const xsimd::avx2&) noexcept {
    double both;
    std::memcpy(&both, pair, sizeof both);
    const __m256i halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    return _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_set1_pd(both)), halves);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
