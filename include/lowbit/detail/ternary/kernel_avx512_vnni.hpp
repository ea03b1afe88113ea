// Ternary x int8 raw sums with AVX-512 VNNI (vpdpbusd): the packed digits u in {0, 1, 2} are the
// unsigned operand, the activation codes the signed one (layouts in packing.hpp; the scalar reference
// is reference::row_dots). One 64-byte load of codes serves MR activation rows.
//   I2:  step s is the byte masked to bits 2s..2s+1, i.e. 4^s * u (at most 128: the products stay
//        exact), so no shift is needed; accumulator s is shifted right by 2s (exactly: every term is a
//        multiple of 4^s) before the accumulators are added.
//   TQ1: t_0 = q, t_{s+1} = 3 t_s (byte adds), u_s = [t_s >= 86] + [t_s >= 171] (two mask compares).
// Per tensor the S accumulators of a row run over the whole row; per group each step of each chunk is
// one group of 64: the four first groups of a chunk are reduced together (merge, as the int8 MLX
// kernels), a fifth (TQ1) on its own.
#pragma once

#include "../config.hpp"

#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "../arch/x86_int8.hpp"
#include "../unroll.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ternary::kernels {

#if defined(LOWBIT_HAS_INT8_AVX512_VNNI)

/// Sum of the 16 int32 lanes.
LOWBIT_ALWAYS_INLINE inline std::int32_t reduce_add_avx512(__m512i v) noexcept {
    const __m256i none = _mm256_setzero_si256();
    const __m256i eight = _mm256_add_epi32(_mm512_mask_extracti64x4_epi64(none, static_cast<__mmask8>(0xF), v, 0),
                                           _mm512_mask_extracti64x4_epi64(none, static_cast<__mmask8>(0xF), v, 1));
    __m128i four = _mm_add_epi32(_mm256_castsi256_si128(eight), _mm256_extracti128_si256(eight, 1));
    four = _mm_add_epi32(four, _mm_shuffle_epi32(four, 0x4E));
    four = _mm_add_epi32(four, _mm_shuffle_epi32(four, 0xB1));
    return _mm_cvtsi128_si32(four);
}

/// Raw sums sum_k u[k] x_m[k] of one packed row (n_chunks chunks) against the MR activation rows x[m]
/// (padded to n_chunks chunks): per tensor sums[m * stride]; per group sums[m * stride + c * S + s].
template <TernaryFormat Format, bool PerGroup, int MR>
LOWBIT_ALWAYS_INLINE inline void row_dots_avx512_vnni(const std::uint8_t* row, Eigen::Index n_chunks,
                                                      const std::int8_t* const* x, std::int32_t* sums,
                                                      Eigen::Index stride) {
    constexpr int S = steps(Format);
    constexpr Eigen::Index CC = chunk_codes(Format);
    __m512i acc[MR][S];
    auto clear = [&] {
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            static_for<S>([&](auto s) LOWBIT_ALWAYS_INLINE { acc[m][s] = _mm512_setzero_si512(); });
        });
    };
    // Accumulator s of row m, scaled back to plain sums of u * x. (Masked forms throughout: GCC 12's
    // unmasked ones start from an undefined register that -Wmaybe-uninitialized reports, bug 105593.)
    auto unscaled = [&]<int s>(int m, std::integral_constant<int, s>) LOWBIT_ALWAYS_INLINE -> __m512i {
        if constexpr (Format == TernaryFormat::i2 && s > 0)
            return _mm512_maskz_srai_epi32(static_cast<__mmask16>(0xFFFF), acc[m][s], 2 * s);
        else
            return acc[m][s];
    };
    clear();
    const __m512i one = _mm512_set1_epi8(1);
    for (Eigen::Index c = 0; c < n_chunks; ++c) {
        const __m512i bytes = _mm512_loadu_si512(row + c * chunk_bytes);
        __m512i t = bytes;
        static_for<S>([&](auto s_constant) LOWBIT_ALWAYS_INLINE {
            constexpr int s = decltype(s_constant)::value;
            __m512i digits;
            if constexpr (Format == TernaryFormat::i2) {
                digits = _mm512_and_si512(bytes, _mm512_set1_epi8(static_cast<char>(3 << (2 * s))));
            } else {
                if constexpr (s > 0) t = _mm512_add_epi8(t, _mm512_add_epi8(t, t));
                const __mmask64 at_least_1 = _mm512_cmpge_epu8_mask(t, _mm512_set1_epi8(86));
                const __mmask64 at_least_2 = _mm512_cmpge_epu8_mask(t, _mm512_set1_epi8(static_cast<char>(171)));
                digits = _mm512_maskz_mov_epi8(at_least_1, one);
                digits = _mm512_mask_add_epi8(digits, at_least_2, digits, one);
            }
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                const __m512i xv = _mm512_load_si512(x[m] + c * CC + s * chunk_bytes);
                acc[m][s] = _mm512_dpbusd_epi32(acc[m][s], digits, xv);
            });
        });
        if constexpr (PerGroup) {
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                // Groups 0..3 of the chunk at once: two levels of merge leave 4 partial sums per group
                // in lanes 4g..4g+3; two in-lane shuffles total them, one compress gathers lanes 0, 4, 8, 12.
                using ops = simd::int8::avx512_vnni;
                const __m512i quads = ops::merge(ops::merge(unscaled(m, std::integral_constant<int, 0>{}),
                                                            unscaled(m, std::integral_constant<int, 1>{})),
                                                 ops::merge(unscaled(m, std::integral_constant<int, 2>{}),
                                                            unscaled(m, std::integral_constant<int, 3>{})));
                __m512i totals = _mm512_add_epi32(
                    quads, _mm512_maskz_shuffle_epi32(static_cast<__mmask16>(0xFFFF), quads, _MM_PERM_BADC));
                totals = _mm512_add_epi32(
                    totals, _mm512_maskz_shuffle_epi32(static_cast<__mmask16>(0xFFFF), totals, _MM_PERM_CDAB));
                const __m512i gathered = _mm512_maskz_compress_epi32(static_cast<__mmask16>(0x1111), totals);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + m * stride + c * S),
                                 _mm512_castsi512_si128(gathered));
                if constexpr (S == 5)
                    sums[m * stride + c * S + 4] = reduce_add_avx512(unscaled(m, std::integral_constant<int, 4>{}));
            });
            clear();
        }
    }
    if constexpr (!PerGroup) {
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            __m512i total = _mm512_setzero_si512();
            static_for<S>([&](auto s) LOWBIT_ALWAYS_INLINE { total = _mm512_add_epi32(total, unscaled(m, s)); });
            sums[decltype(m)::value * stride] = reduce_add_avx512(total);
        });
    }
}

#endif

}  // namespace detail::ternary::kernels
LOWBIT_END_NAMESPACE
