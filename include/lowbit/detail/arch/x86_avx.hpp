// simd:: operations specific to AVX (and AVX2 / FMA3 built on it): the streaming store, the float
// min / max reductions and the int32-to-byte narrowing store.
#pragma once

#include "../config.hpp"

#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "x86_sse2.hpp"

#if defined(__AVX__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::avx&) noexcept {
    _mm256_stream_ps(aligned_address, values);
}

template <class Arch>
inline float reduce_max(const xsimd::batch<float, Arch>& values, const xsimd::avx&) noexcept {
    const __m256 all = values;
    return fold_four(_mm_max_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1)),
                     [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

template <class Arch>
inline float reduce_min(const xsimd::batch<float, Arch>& values, const xsimd::avx&) noexcept {
    const __m256 all = values;
    return fold_four(_mm_min_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1)),
                     [](__m128 a, __m128 b) { return _mm_min_ps(a, b); });
}

/// The two 128-bit halves through two saturating packs (int32 -> int16 -> uint8); exact for lanes in
/// [0, 255].
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes, const xsimd::avx&) noexcept {
    const __m256i all = values;
    const __m128i halves = _mm_packs_epi32(_mm256_castsi256_si128(all), _mm256_extractf128_si256(all, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(bytes), _mm_packus_epi16(halves, halves));
}

/// The same with signed saturation (int32 -> int16 -> int8); exact for lanes in [-128, 127].
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::int8_t* bytes, const xsimd::avx&) noexcept {
    const __m256i all = values;
    const __m128i halves = _mm_packs_epi32(_mm256_castsi256_si128(all), _mm256_extractf128_si256(all, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(bytes), _mm_packs_epi16(halves, halves));
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
