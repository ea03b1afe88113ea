// simd:: operations specific to AVX2 (and FMA3 on AVX2): the group scale spreads and the 8 x 8 word
// transpose.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "x86_sse2.hpp"

#if defined(__AVX2__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

/// One load of the Groups floats (a 64-bit broadcast for two, which a compiler keeps in registers when
/// the pair was just computed) and one lane permute.
template <int Groups, class Arch>
inline xsimd::batch<float, Arch> spread_groups(const float* values, const xsimd::avx2&) noexcept {
    __m256 loaded;
    if constexpr (Groups == 1) {
        return _mm256_set1_ps(values[0]);
    } else if constexpr (Groups == 2) {
        double both;
        std::memcpy(&both, values, sizeof both);
        loaded = _mm256_castpd_ps(_mm256_set1_pd(both));
    } else if constexpr (Groups == 4) {
        loaded = _mm256_zextps128_ps256(_mm_loadu_ps(values));
    } else {
        loaded = _mm256_loadu_ps(values);
    }
    constexpr int per = 8 / Groups;
    const __m256i index = _mm256_setr_epi32(0, 1 / per, 2 / per, 3 / per, 4 / per, 5 / per, 6 / per, 7 / per);
    return _mm256_permutevar8x32_ps(loaded, index);
}

template <class Arch>
inline xsimd::batch<float, Arch> permute_lanes(const xsimd::batch<float, Arch>& values,
                                               const xsimd::batch<std::uint32_t, Arch>& index,
                                               const xsimd::avx2&) noexcept {
    return _mm256_permutevar8x32_ps(values, index);
}

/// One load of the Groups bytes, one byte shuffle and one zero extension.
template <int Groups, class Arch>
inline xsimd::batch<std::uint32_t, Arch> spread_byte_groups(const std::uint8_t* bytes, const xsimd::avx2&) noexcept {
    return _mm256_cvtepu8_epi32(_mm_shuffle_epi8(load_low_bytes<Groups>(bytes), spread_byte_index<Groups, 8>()));
}

/// 8 x 8 words in three levels, each swapping the off-diagonal blocks of size 4, 2, then 1 between rows
/// r and r + size: 128-bit lane permutes, 64-bit unpacks, then 32-bit shifts and blends (24 instructions).
template <class Arch>
inline void transpose_words(std::array<xsimd::batch<std::uint32_t, Arch>, 8>& rows, const xsimd::avx2&) noexcept {
    __m256i r[8];
    for (std::size_t i = 0; i < 8; ++i) r[i] = rows[i];
    for (std::size_t i = 0; i < 4; ++i) {
        const __m256i a = r[i], b = r[i + 4];
        r[i] = _mm256_permute2x128_si256(a, b, 0x20);
        r[i + 4] = _mm256_permute2x128_si256(a, b, 0x31);
    }
    for (std::size_t i : {0u, 1u, 4u, 5u}) {
        const __m256i a = r[i], b = r[i + 2];
        r[i] = _mm256_unpacklo_epi64(a, b);
        r[i + 2] = _mm256_unpackhi_epi64(a, b);
    }
    for (std::size_t i : {0u, 2u, 4u, 6u}) {
        const __m256i a = r[i], b = r[i + 1];
        r[i] = _mm256_blend_epi32(a, _mm256_slli_epi64(b, 32), 0xAA);
        r[i + 1] = _mm256_blend_epi32(_mm256_srli_epi64(a, 32), b, 0xAA);
    }
    for (std::size_t i = 0; i < 8; ++i) rows[i] = r[i];
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
