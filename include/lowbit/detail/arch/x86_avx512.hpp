// simd:: operations specific to AVX-512 (avx512f and every AVX-512 architecture derived from it).
//
// Several exist only to work around GCC 12: its own intrinsics headers build some results from
// `_mm512_undefined_ps()`, which -Wuninitialized reports once xsimd's call is inlined into a kernel
// (GCC bug 105593, fixed in GCC 13). The masked forms below, with an explicit source, are the same
// instructions without the warning. fma is here because xsimd 8.1 has no AVX-512 fma and falls back to
// a multiply and an add (which Clang does not fuse: much slower, see benchmarks/README.md, and rounded
// twice).
#pragma once

#include "../config.hpp"

#include <cstring>

#include <xsimd/xsimd.hpp>

#if defined(__AVX512F__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

/// Sums the halves with masked extracts (xsimd 13's reduce_add and _mm512_castps512_ps256 trip the
/// warning above).
template <class Arch>
inline float reduce_add(const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    const __m512d all = _mm512_castps_pd(values);
    const __m256d zero = _mm256_setzero_pd();
    const __m256 low = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(zero, static_cast<__mmask8>(0xF), all, 0));
    const __m256 high = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(zero, static_cast<__mmask8>(0xF), all, 1));
    const __m256 eight = _mm256_add_ps(low, high);
    __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    four = _mm_add_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
}

template <class Arch>
inline xsimd::batch<float, Arch> trunc(const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    return _mm512_mask_roundscale_ps(values, static_cast<__mmask16>(0xFFFF), values,
                                     _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

template <class Arch>
inline xsimd::batch<float, Arch> nearbyint(const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    return _mm512_mask_roundscale_ps(values, static_cast<__mmask16>(0xFFFF), values,
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

template <class Arch>
inline xsimd::batch<float, Arch> fma(const xsimd::batch<float, Arch>& a, const xsimd::batch<float, Arch>& b,
                                     const xsimd::batch<float, Arch>& c, const xsimd::avx512f&) noexcept {
    return _mm512_fmadd_ps(a, b, c);
}

/// One 64-bit broadcast and one lane permute (masked, for the warning above).
template <class Arch>
inline xsimd::batch<float, Arch> broadcast_halves(const float* pair, const xsimd::avx512f&) noexcept {
    double both;
    std::memcpy(&both, pair, sizeof both);
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512 pairs = _mm512_castpd_ps(_mm512_set1_pd(both));
    return _mm512_mask_permutexvar_ps(pairs, static_cast<__mmask16>(0xFFFF), halves, pairs);
}

template <class Arch>
inline xsimd::batch<float, Arch> max(const xsimd::batch<float, Arch>& first, const xsimd::batch<float, Arch>& second,
                                     const xsimd::avx512f&) noexcept {
    return _mm512_mask_max_ps(first, static_cast<__mmask16>(0xFFFF), first, second);
}

template <class Arch>
inline xsimd::batch<float, Arch> min(const xsimd::batch<float, Arch>& first, const xsimd::batch<float, Arch>& second,
                                     const xsimd::avx512f&) noexcept {
    return _mm512_mask_min_ps(first, static_cast<__mmask16>(0xFFFF), first, second);
}

template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    _mm512_stream_ps(aligned_address, values);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
