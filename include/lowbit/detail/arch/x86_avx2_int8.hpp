// The int8 operations of the int8-activation GEMM on AVX2 (with FMA): simd::int8::avx2, the contract in
// int8.hpp. vpmaddubsw multiplies unsigned code bytes by signed activation bytes and adds pairs into a
// saturating int16 (exact for codes below 2^6; 8-bit codes are split into nibbles), vpmaddwd widens.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "x86_sse2.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::int8 {

#define LOWBIT_HAS_INT8_AVX2 1
/// 256-bit vectors, vpmaddubsw + vpmaddwd. vpmaddubsw adds two u8*s8 products into a saturating
/// int16: exact for codes below 2^6 (63 * 127 * 2 < 32767); 8-bit codes are split into nibbles.
struct avx2 {
    using vec = __m256i;
    using fvec = __m256;
    using code_byte = std::uint8_t;       ///< dot's first operand: unsigned bytes (the weight codes)
    using activation_byte = std::int8_t;  ///< dot's second operand: signed bytes (the activations)
    static constexpr int lanes = 8;
    static constexpr int bytes = 32;
    /// The GEMM microkernel's tile (gemm/int8_ukernel.hpp): 4 rows x 1 vector, for 16 registers.
    static constexpr int tile_rows = 4, tile_vectors = 1, one_block_rows = 4;
    static vec zero() noexcept { return _mm256_setzero_si256(); }
    static vec load(const void* p) noexcept { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
    static vec byte_mask(vec v, std::uint8_t mask) noexcept {
        return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(mask)));
    }
    template <int Shift>
    static vec shift_right(vec v) noexcept {
        return _mm256_srli_epi16(v, Shift);
    }
    /// The 16 bytes at p in each 128-bit half (lookup16's table).
    static vec table16(const std::uint8_t* p) noexcept {
        return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    /// Per byte of v (each < 16): that entry of the table (vpshufb).
    static vec lookup16(vec table, vec v) noexcept { return _mm256_shuffle_epi8(table, v); }
    template <int CodeBits>
    static vec dot(vec acc, vec codes, vec x) noexcept {
        const __m256i ones = _mm256_set1_epi16(1);
        if constexpr (CodeBits <= 6) {
            return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(codes, x), ones));
        } else {
            // u = 16 * high + low, both nibbles: two exact maddubs, then 16 * high_sum + low_sum in int32.
            const __m256i nibble = _mm256_set1_epi8(0x0F);
            const __m256i low = _mm256_and_si256(codes, nibble);
            const __m256i high = _mm256_and_si256(_mm256_srli_epi16(codes, 4), nibble);
            const __m256i low_sum = _mm256_madd_epi16(_mm256_maddubs_epi16(low, x), ones);
            const __m256i high_sum = _mm256_madd_epi16(_mm256_maddubs_epi16(high, x), ones);
            return _mm256_add_epi32(acc, _mm256_add_epi32(low_sum, _mm256_slli_epi32(high_sum, 4)));
        }
    }
    static vec add(vec a, vec b) noexcept { return _mm256_add_epi32(a, b); }
    /// Each int32 lane shifted left by Shift bits.
    template <int Shift>
    static vec shift_left(vec v) noexcept {
        return _mm256_slli_epi32(v, Shift);
    }
    static vec sub(vec a, vec b) noexcept { return _mm256_sub_epi32(a, b); }
    static vec set1(std::int32_t v) noexcept { return _mm256_set1_epi32(v); }
    static vec broadcast32(const void* p) noexcept {
        std::int32_t quad;
        std::memcpy(&quad, p, sizeof quad);
        return _mm256_set1_epi32(quad);
    }
    static void transpose_words(const std::uint8_t* const* rows, std::uint32_t* const* out) noexcept {
        __m256i r[8], t[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i]));
        for (int i = 0; i < 4; ++i) {  // per 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3]
            t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 2; ++i) {  // r[4i + j], 128-bit lane L: rows 4i..4i+3 of word 4L + j
            r[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
            r[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
            r[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
            r[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
        }
        for (int j = 0; j < 4; ++j) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[j]), _mm256_permute2x128_si256(r[j], r[4 + j], 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[4 + j]),
                                _mm256_permute2x128_si256(r[j], r[4 + j], 0x31));
        }
    }
    static vec merge(vec a, vec b) noexcept {
        const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
        // Per 128-bit half: [a0 a2 b0 b2] and [a1 a3 b1 b3]; the sum's 64-bit quarters are then put in
        // the order a(low half), a(high half), b(low), b(high).
        const __m256i even = _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, 0x88));
        const __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, 0xDD));
        return _mm256_permute4x64_epi64(_mm256_add_epi32(even, odd), 0xD8);
    }
    static fvec fzero() noexcept { return _mm256_setzero_ps(); }
    static fvec fload_partial(const float* p, int count) noexcept {
        if (count >= 8) return _mm256_loadu_ps(p);
        const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), index));
    }
    static fvec fload(const float* p) noexcept { return _mm256_loadu_ps(p); }
    static void fstore(float* p, fvec v) noexcept { _mm256_storeu_ps(p, v); }
    static fvec fbroadcast(float f) noexcept { return _mm256_set1_ps(f); }
    static fvec fmul(fvec a, fvec b) noexcept { return _mm256_mul_ps(a, b); }
    static fvec fadd(fvec a, fvec b) noexcept { return _mm256_add_ps(a, b); }
    static fvec fmadd(fvec a, fvec b, fvec c) noexcept { return _mm256_fmadd_ps(a, b, c); }
    static fvec to_float(vec v) noexcept { return _mm256_cvtepi32_ps(v); }
    /// The two 128-bit halves added, then arch_ops::fold_four (x86_sse2.hpp), as every AVX float sum.
    static float freduce(fvec v) noexcept {
        return arch_ops::fold_four(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)),
                                   [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
    }
};

}  // namespace detail::simd::int8
LOWBIT_END_NAMESPACE

#endif
