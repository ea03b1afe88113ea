// Ternary x int8 raw sums with AVX2 (vpmaddubsw + vpmaddwd): the packed digits u in {0, 1, 2} are the
// unsigned operand, the activation codes the signed one (layouts in packing.hpp; the scalar reference
// is reference::row_dots). A 64-byte chunk is read as two 32-byte halves; one load of codes serves MR
// activation rows.
//   I2:  u of step s = (byte >> 2s) & 3.
//   TQ1: t_0 = q, t_{s+1} = 3 t_s (byte adds), u_s = [t_s >= 86] + [t_s >= 171] (unsigned compares
//        built from max and equality, each -1 or 0, negated).
// vpmaddubsw sums two products into int16: at most 2 * 2 * 127 = 508, and the 2 * S (<= 10) products
// sums of one chunk stay below 5080, so a chunk is summed in int16 and widened once (vpmaddwd by 1).
#pragma once

#include "../config.hpp"

#include <cstdint>

#include <Eigen/Core>

#include "../arch/x86_int8.hpp"
#include "../unroll.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ternary::kernels {

#if defined(LOWBIT_HAS_INT8_AVX2)

LOWBIT_ALWAYS_INLINE inline std::int32_t reduce_add_avx2(__m256i v) noexcept {
    __m128i four = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    four = _mm_add_epi32(four, _mm_shuffle_epi32(four, 0x4E));
    four = _mm_add_epi32(four, _mm_shuffle_epi32(four, 0xB1));
    return _mm_cvtsi128_si32(four);
}

/// As row_dots_avx512_vnni: per tensor sums[m * stride]; per group sums[m * stride + c * S + s].
template <TernaryFormat Format, bool PerGroup, int MR>
LOWBIT_ALWAYS_INLINE inline void row_dots_avx2(const std::uint8_t* row, Eigen::Index n_chunks,
                                               const std::int8_t* const* x, std::int32_t* sums, Eigen::Index stride) {
    constexpr int S = steps(Format);
    constexpr Eigen::Index CC = chunk_codes(Format);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i total[MR];
    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE { total[m] = _mm256_setzero_si256(); });
    for (Eigen::Index c = 0; c < n_chunks; ++c) {
        const __m256i bytes[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * chunk_bytes)),
                                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * chunk_bytes + 32))};
        __m256i t[2] = {bytes[0], bytes[1]};
        __m256i chunk_sum[MR];
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE { chunk_sum[m] = _mm256_setzero_si256(); });
        static_for<S>([&](auto s_constant) LOWBIT_ALWAYS_INLINE {
            constexpr int s = decltype(s_constant)::value;
            __m256i digits[2];
            static_for<2>([&](auto h) LOWBIT_ALWAYS_INLINE {
                if constexpr (Format == TernaryFormat::i2) {
                    digits[h] = _mm256_and_si256(_mm256_srli_epi16(bytes[h], 2 * s), _mm256_set1_epi8(3));
                } else {
                    if constexpr (s > 0) t[h] = _mm256_add_epi8(t[h], _mm256_add_epi8(t[h], t[h]));
                    const __m256i at_least_1 = _mm256_cmpeq_epi8(_mm256_max_epu8(t[h], _mm256_set1_epi8(86)), t[h]);
                    const __m256i at_least_2 =
                        _mm256_cmpeq_epi8(_mm256_max_epu8(t[h], _mm256_set1_epi8(static_cast<char>(171))), t[h]);
                    digits[h] = _mm256_abs_epi8(_mm256_add_epi8(at_least_1, at_least_2));
                }
            });
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                const std::int8_t* xp = x[m] + c * CC + s * chunk_bytes;
                const __m256i pairs = _mm256_add_epi16(
                    _mm256_maddubs_epi16(digits[0], _mm256_load_si256(reinterpret_cast<const __m256i*>(xp))),
                    _mm256_maddubs_epi16(digits[1], _mm256_load_si256(reinterpret_cast<const __m256i*>(xp + 32))));
                if constexpr (PerGroup)
                    sums[m * stride + c * S + s] = reduce_add_avx2(_mm256_madd_epi16(pairs, ones16));
                else
                    chunk_sum[m] = _mm256_add_epi16(chunk_sum[m], pairs);
            });
        });
        if constexpr (!PerGroup)
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                total[m] = _mm256_add_epi32(total[m], _mm256_madd_epi16(chunk_sum[m], ones16));
            });
    }
    if constexpr (!PerGroup)
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            sums[decltype(m)::value * stride] = reduce_add_avx2(total[m]);
        });
}

#endif

}  // namespace detail::ternary::kernels
LOWBIT_END_NAMESPACE
