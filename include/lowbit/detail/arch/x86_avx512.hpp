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

#include <array>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "../unroll.hpp"
#include "x86_sse2.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

/// The 256-bit halves (masked extracts: xsimd 13's reductions and _mm512_castps512_ps256 trip the warning
/// above), then the 128-bit ones, then the four lanes, folded with `combine`.
template <class Arch, class Combine256, class Combine128>
inline float fold_sixteen(const xsimd::batch<float, Arch>& values, Combine256 combine256, Combine128 combine128) noexcept {
    const __m512d all = _mm512_castps_pd(values);
    const __m256d zero = _mm256_setzero_pd();
    const __m256 low = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(zero, static_cast<__mmask8>(0xF), all, 0));
    const __m256 high = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(zero, static_cast<__mmask8>(0xF), all, 1));
    const __m256 eight = combine256(low, high);
    return fold_four(combine128(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1)), combine128);
}

template <class Arch>
inline float reduce_add(const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    return fold_sixteen(values, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); },
                        [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
}

template <class Arch>
inline float reduce_max(const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    return fold_sixteen(values, [](__m256 a, __m256 b) { return _mm256_max_ps(a, b); },
                        [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

template <class Arch>
inline float reduce_min(const xsimd::batch<float, Arch>& values, const xsimd::avx512f&) noexcept {
    return fold_sixteen(values, [](__m256 a, __m256 b) { return _mm256_min_ps(a, b); },
                        [](__m128 a, __m128 b) { return _mm_min_ps(a, b); });
}

template <int Bits, class Arch>
inline xsimd::batch<std::uint32_t, Arch> shift_right(const xsimd::batch<std::uint32_t, Arch>& values,
                                                     const xsimd::avx512f&) noexcept {
    return _mm512_maskz_srli_epi32(static_cast<__mmask16>(0xFFFF), values, static_cast<unsigned>(Bits));
}

template <int Bits, class Arch>
inline xsimd::batch<std::int32_t, Arch> shift_right(const xsimd::batch<std::int32_t, Arch>& values,
                                                    const xsimd::avx512f&) noexcept {
    return _mm512_maskz_srai_epi32(static_cast<__mmask16>(0xFFFF), values, static_cast<unsigned>(Bits));
}

template <int Bits, class Arch>
inline xsimd::batch<std::uint32_t, Arch> shift_left(const xsimd::batch<std::uint32_t, Arch>& values,
                                                    const xsimd::avx512f&) noexcept {
    return _mm512_maskz_slli_epi32(static_cast<__mmask16>(0xFFFF), values, static_cast<unsigned>(Bits));
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

/// One load of the Groups floats (a 64-bit broadcast for two, which a compiler keeps in registers when
/// the pair was just computed; masked for more: only those are read) and one lane permute (masked, for
/// the warning above).
template <int Groups, class Arch>
inline xsimd::batch<float, Arch> spread_groups(const float* values, const xsimd::avx512f&) noexcept {
    if constexpr (Groups == 1) {
        return _mm512_set1_ps(values[0]);
    } else {
        __m512 loaded;
        if constexpr (Groups == 2) {
            double both;
            std::memcpy(&both, values, sizeof both);
            loaded = _mm512_castpd_ps(_mm512_set1_pd(both));
        } else {
            loaded = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << Groups) - 1u), values);
        }
        constexpr int per = 16 / Groups;
        const __m512i index =
            _mm512_setr_epi32(0, 1 / per, 2 / per, 3 / per, 4 / per, 5 / per, 6 / per, 7 / per, 8 / per, 9 / per,
                              10 / per, 11 / per, 12 / per, 13 / per, 14 / per, 15 / per);
        return _mm512_mask_permutexvar_ps(loaded, static_cast<__mmask16>(0xFFFF), index, loaded);
    }
}

/// The masked form (GCC bug 105593, above).
template <class Arch>
inline xsimd::batch<float, Arch> permute_lanes(const xsimd::batch<float, Arch>& values,
                                               const xsimd::batch<std::uint32_t, Arch>& index,
                                               const xsimd::avx512f&) noexcept {
    const __m512 data = values;
    return _mm512_mask_permutexvar_ps(data, static_cast<__mmask16>(0xFFFF), index, data);
}

/// One load of the Groups bytes, one byte shuffle and one zero extension.
template <int Groups, class Arch>
inline xsimd::batch<std::uint32_t, Arch> spread_byte_groups(const std::uint8_t* bytes, const xsimd::avx512f&) noexcept {
    return _mm512_cvtepu8_epi32(_mm_shuffle_epi8(load_low_bytes<Groups>(bytes), spread_byte_index<Groups, 16>()));
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

/// vcvtps2dq with the rounding in the instruction (round to nearest even, no exceptions), not MXCSR's.
template <class Arch>
inline xsimd::batch<std::int32_t, Arch> nearbyint_to_int(const xsimd::batch<float, Arch>& values,
                                                         const xsimd::avx512f&) noexcept {
    return _mm512_mask_cvt_roundps_epi32(_mm512_castps_si512(values), static_cast<__mmask16>(0xFFFF), values,
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/// vpmovdb straight to memory (the masked store form, for the warning above); lanes in [0, 255].
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes,
                        const xsimd::avx512f&) noexcept {
    _mm512_mask_cvtepi32_storeu_epi8(bytes, static_cast<__mmask16>(0xFFFF), values);
}

/// The same truncating vpmovdb: two's complement keeps lanes in [-128, 127] exact.
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::int8_t* bytes,
                        const xsimd::avx512f&) noexcept {
    _mm512_mask_cvtepi32_storeu_epi8(bytes, static_cast<__mmask16>(0xFFFF), values);
}

/// The lane indices of one level of the 16 x 16 square operations below, for rows a and b (b's lanes are
/// 16 + c in vpermt2d / vpermt2ps). Lanes c with (c & Size) == 0 take a[c] in `upper` and a[c + Size] in
/// `lower`; the others take b[c - Size] in `upper` and b[c] in `lower`.
template <int Size>
struct BlockSwapLanes {
    alignas(64) std::int32_t upper[16], lower[16];
};

template <int Size>
inline constexpr BlockSwapLanes<Size> block_swap_lanes = [] {
    BlockSwapLanes<Size> made{};
    for (int c = 0; c < 16; ++c) {
        made.upper[c] = (c & Size) ? 16 + c - Size : c;
        made.lower[c] = (c & Size) ? 16 + c : c + Size;
    }
    return made;
}();

/// One level of the 16 x 16 transpose: rows r and r + Size (r & Size == 0) swap their off-diagonal
/// blocks of Size words. Row r keeps its lanes c with (c & Size) == 0 and takes lane c - Size of row
/// r + Size in the others (block_swap_lanes' upper); row r + Size takes lane c + Size of row r in the
/// first and keeps its own in the others (lower). The rows stay in registers (unrolled).
template <int Size>
LOWBIT_ALWAYS_INLINE inline void swap_word_blocks(__m512i (&rows)[16]) noexcept {
    const __m512i upper = _mm512_load_si512(block_swap_lanes<Size>.upper);
    const __m512i lower = _mm512_load_si512(block_swap_lanes<Size>.lower);
    static_for<8>([&](auto pair) {
        constexpr int i = decltype(pair)::value / Size * 2 * Size + decltype(pair)::value % Size;
        const __m512i a = rows[i], b = rows[i + Size];
        rows[i] = _mm512_permutex2var_epi32(a, upper, b);
        rows[i + Size] = _mm512_permutex2var_epi32(a, lower, b);
    });
}

/// 16 x 16 words in four levels (swap_word_blocks of size 8, 4, 2, then 1): 64 vpermt2d.
template <class Arch>
inline void transpose_words(std::array<xsimd::batch<std::uint32_t, Arch>, 16>& rows, const xsimd::avx512f&) noexcept {
    __m512i r[16];
    static_for<16>([&](auto i) { r[decltype(i)::value] = rows[decltype(i)::value]; });
    swap_word_blocks<8>(r);
    swap_word_blocks<4>(r);
    swap_word_blocks<2>(r);
    swap_word_blocks<1>(r);
    static_for<16>([&](auto i) { rows[decltype(i)::value] = r[decltype(i)::value]; });
}

/// One level of the 16-row fold: rows i and i + Size (i < Size) become row i, whose lanes c with
/// (c & Size) == 0 hold combine(a[c], a[c + Size]) and the others combine(b[c - Size], b[c]).
template <int Size, class Combine>
LOWBIT_ALWAYS_INLINE inline void fold_row_pairs(__m512 (&rows)[16], Combine combine) noexcept {
    const __m512i upper = _mm512_load_si512(block_swap_lanes<Size>.upper);
    const __m512i lower = _mm512_load_si512(block_swap_lanes<Size>.lower);
    static_for<Size>([&](auto pair) {
        constexpr int i = decltype(pair)::value;
        rows[i] = combine(_mm512_permutex2var_ps(rows[i], upper, rows[i + Size]),
                          _mm512_permutex2var_ps(rows[i], lower, rows[i + Size]));
    });
}

/// Lane r: rows[r] folded over its 16 lanes, in four levels of fold_row_pairs (Size 8, 4, 2, 1; after
/// them lane c holds row c): 30 vpermt2ps and 15 combines for the 16 rows.
template <class Arch, class Combine>
LOWBIT_ALWAYS_INLINE inline xsimd::batch<float, Arch> fold_each_row(const xsimd::batch<float, Arch>* rows,
                                                                    Combine combine) noexcept {
    __m512 r[16];
    static_for<16>([&](auto i) { r[decltype(i)::value] = rows[decltype(i)::value]; });
    fold_row_pairs<8>(r, combine);
    fold_row_pairs<4>(r, combine);
    fold_row_pairs<2>(r, combine);
    fold_row_pairs<1>(r, combine);
    return r[0];
}

/// The sums fold lanes c and c + 8, then c + 4, c + 2, c + 1, as reduce_add (fold_sixteen) does: the same bits.
template <class Arch>
inline xsimd::batch<float, Arch> reduce_add_each(const xsimd::batch<float, Arch>* rows,
                                                 const xsimd::avx512f&) noexcept {
    return fold_each_row(
        rows, [](__m512 a, __m512 b) { return _mm512_mask_add_ps(a, static_cast<__mmask16>(0xFFFF), a, b); });
}

template <class Arch>
inline xsimd::batch<float, Arch> reduce_min_each(const xsimd::batch<float, Arch>* rows,
                                                 const xsimd::avx512f&) noexcept {
    return fold_each_row(
        rows, [](__m512 a, __m512 b) { return _mm512_mask_min_ps(a, static_cast<__mmask16>(0xFFFF), a, b); });
}

template <class Arch>
inline xsimd::batch<float, Arch> reduce_max_each(const xsimd::batch<float, Arch>* rows,
                                                 const xsimd::avx512f&) noexcept {
    return fold_each_row(
        rows, [](__m512 a, __m512 b) { return _mm512_mask_max_ps(a, static_cast<__mmask16>(0xFFFF), a, b); });
}

/// Each qword's two lanes merged into its low byte (c0 | c1 << 4: a 28-bit shift brings c1 from bit 32
/// to bit 4), then vpmovqb straight to memory (masked form, for the warning above).
template <class Arch>
inline void store_nibbles(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes,
                          const xsimd::avx512f&) noexcept {
    const __m512i pairs = _mm512_or_si512(values, _mm512_maskz_srli_epi64(static_cast<__mmask8>(0xFF), values, 28));
    _mm512_mask_cvtepi64_storeu_epi8(bytes, static_cast<__mmask8>(0xFF), pairs);
}

#if defined(__AVX512DQ__)
/// vreduceps with zero fraction bits and round-to-nearest-even: y - RNE(y) in one instruction.
template <class Arch>
inline xsimd::batch<float, Arch> round_residual(const xsimd::batch<float, Arch>& values,
                                                const xsimd::avx512dq&) noexcept {
    return _mm512_mask_reduce_ps(values, static_cast<__mmask16>(0xFFFF), values,
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/// vrangeps selecting the larger magnitude (imm bits 1:0 = 11) with the sign cleared (bits 3:2 = 10).
template <class Arch>
inline xsimd::batch<float, Arch> max_magnitude(const xsimd::batch<float, Arch>& first,
                                               const xsimd::batch<float, Arch>& second,
                                               const xsimd::avx512dq&) noexcept {
    return _mm512_mask_range_ps(first, static_cast<__mmask16>(0xFFFF), first, second, 0x0B);
}
#endif

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
