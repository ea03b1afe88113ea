// Integer dot-product building blocks of the int8-activation matmul (docs/numerics.md N11), one
// struct per instruction set: AVX-512 VNNI (with BW) and AVX2 (with FMA). xsimd has no int8 dot
// product, so these are raw intrinsics, compiled only for the targets that have them.
//
// Each struct Ops has: `vec` (int32 lanes), `lanes`, `bytes` (code bytes per vector);
//   zero(), load(p) (unaligned), byte_mask(v, m) (v & m per byte), shift_right(v, s) (16-bit shift),
//   dot(acc, u8, i8)  : acc[i] += sum_{j<4} u8[4i+j] * i8[4i+j], exact for u8 codes < 2^CodeBits
//                       (the template parameter says how wide the codes can be);
//   merge(a, b)       : [a0+a1, a2+a3, ..., b0+b1, b2+b3, ...] (adjacent lanes summed, a's first);
//   broadcast32(p)   : the 4 bytes at p in every int32 lane (the GEMM's activation quad);
//   transpose_words(rows, out): out[i][r] = 32-bit word i of rows[r], r, i < lanes (the GEMM's weight
//                       panel, whose rows of words need not be evenly spaced);
//   and the float epilogue: fvec, fzero, fload_partial(p, count), fload(p), fstore(p, v), fbroadcast(f),
//   fmul, fadd, fmadd(a, b, c) = a * b + c (one rounding), to_float, freduce.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::int8 {

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define LOWBIT_HAS_INT8_AVX512_VNNI 1
/// 512-bit vectors, vpdpbusd (unsigned code bytes times signed activation bytes into int32).
struct avx512_vnni {
    using vec = __m512i;
    using fvec = __m512;
    static constexpr int lanes = 16;
    static constexpr int bytes = 64;
    static vec zero() noexcept { return _mm512_setzero_si512(); }
    static vec load(const void* p) noexcept { return _mm512_loadu_si512(p); }
    static vec byte_mask(vec v, std::uint8_t mask) noexcept {
        return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(mask)));
    }
    template <int Shift>
    static vec shift_right(vec v) noexcept { return _mm512_srli_epi16(v, Shift); }
    template <int CodeBits>
    static vec dot(vec acc, vec codes, vec x) noexcept { return _mm512_dpbusd_epi32(acc, codes, x); }
    static vec add(vec a, vec b) noexcept { return _mm512_add_epi32(a, b); }
    static vec broadcast32(const void* p) noexcept {
        std::int32_t quad;
        std::memcpy(&quad, p, sizeof quad);
        return _mm512_set1_epi32(quad);
    }
    static void transpose_words(const std::uint8_t* const* rows, std::uint32_t* const* out) noexcept {
        // Masked forms with all lanes on: GCC 12's plain unpack/shuffle intrinsics start from an undefined
        // register that -Wuninitialized reports (GCC bug 105593, as in freduce below).
        constexpr __mmask16 all32 = 0xFFFF;
        constexpr __mmask8 all64 = 0xFF;
        __m512i r[16], t[16];
        for (int i = 0; i < 16; ++i) {
            r[i] = _mm512_loadu_si512(rows[i]);
            _mm_prefetch(reinterpret_cast<const char*>(rows[i]) + 512, _MM_HINT_T0);  // 16 streams; a hint only
        }
        for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3]
            t[2 * i] = _mm512_maskz_unpacklo_epi32(all32, r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_maskz_unpackhi_epi32(all32, r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 4; ++i) {  // r[4i + j], 128-bit lane L: rows 4i..4i+3 of word 4L + j
            r[4 * i] = _mm512_maskz_unpacklo_epi64(all64, t[4 * i], t[4 * i + 2]);
            r[4 * i + 1] = _mm512_maskz_unpackhi_epi64(all64, t[4 * i], t[4 * i + 2]);
            r[4 * i + 2] = _mm512_maskz_unpacklo_epi64(all64, t[4 * i + 1], t[4 * i + 3]);
            r[4 * i + 3] = _mm512_maskz_unpackhi_epi64(all64, t[4 * i + 1], t[4 * i + 3]);
        }
        auto shuffle = [](__m512i a, __m512i b, auto order) { return _mm512_maskz_shuffle_i32x4(all32, a, b, decltype(order)::value); };
        using even = std::integral_constant<int, 0x88>;
        using odd = std::integral_constant<int, 0xDD>;
        for (int j = 0; j < 4; ++j) {
            const __m512i even01 = shuffle(r[j], r[4 + j], even{}), odd01 = shuffle(r[j], r[4 + j], odd{});
            const __m512i even23 = shuffle(r[8 + j], r[12 + j], even{}), odd23 = shuffle(r[8 + j], r[12 + j], odd{});
            _mm512_storeu_si512(out[j], shuffle(even01, even23, even{}));
            _mm512_storeu_si512(out[8 + j], shuffle(even01, even23, odd{}));
            _mm512_storeu_si512(out[4 + j], shuffle(odd01, odd23, even{}));
            _mm512_storeu_si512(out[12 + j], shuffle(odd01, odd23, odd{}));
        }
    }
    static vec merge(vec a, vec b) noexcept {
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
    }
    static fvec fzero() noexcept { return _mm512_setzero_ps(); }
    static fvec fload_partial(const float* p, int count) noexcept {
        return _mm512_maskz_loadu_ps(static_cast<__mmask16>(count >= 16 ? 0xFFFFu : (1u << count) - 1u), p);
    }
    static fvec fload(const float* p) noexcept { return _mm512_loadu_ps(p); }
    static void fstore(float* p, fvec v) noexcept { _mm512_storeu_ps(p, v); }
    static fvec fbroadcast(float f) noexcept { return _mm512_set1_ps(f); }
    static fvec fmul(fvec a, fvec b) noexcept { return _mm512_mul_ps(a, b); }
    static fvec fadd(fvec a, fvec b) noexcept { return _mm512_add_ps(a, b); }
    static fvec fmadd(fvec a, fvec b, fvec c) noexcept { return _mm512_fmadd_ps(a, b, c); }
    static fvec to_float(vec v) noexcept { return _mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), v); }  // maskz: GCC bug 105593
    static float freduce(fvec v) noexcept {
        // Masked extracts with an explicit source: GCC 12's cast/extract intrinsics start from an
        // undefined register that -Wuninitialized reports (GCC bug 105593; see x86_avx512.hpp).
        const __m512d all = _mm512_castps_pd(v);
        const __m256d none = _mm256_setzero_pd();
        const __m256 eight = _mm256_add_ps(
            _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(none, static_cast<__mmask8>(0xF), all, 0)),
            _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(none, static_cast<__mmask8>(0xF), all, 1)));
        __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
        four = _mm_add_ps(four, _mm_movehl_ps(four, four));
        return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
    }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
#define LOWBIT_HAS_INT8_AVX2 1
/// 256-bit vectors, vpmaddubsw + vpmaddwd. vpmaddubsw adds two u8*s8 products into a saturating
/// int16: exact for codes below 2^6 (63 * 127 * 2 < 32767); 8-bit codes are split into nibbles.
struct avx2 {
    using vec = __m256i;
    using fvec = __m256;
    static constexpr int lanes = 8;
    static constexpr int bytes = 32;
    static vec zero() noexcept { return _mm256_setzero_si256(); }
    static vec load(const void* p) noexcept { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
    static vec byte_mask(vec v, std::uint8_t mask) noexcept {
        return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(mask)));
    }
    template <int Shift>
    static vec shift_right(vec v) noexcept { return _mm256_srli_epi16(v, Shift); }
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
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[4 + j]), _mm256_permute2x128_si256(r[j], r[4 + j], 0x31));
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
    static float freduce(fvec v) noexcept {
        __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        four = _mm_add_ps(four, _mm_movehl_ps(four, four));
        return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
    }
};
#endif

#if defined(LOWBIT_HAS_INT8_AVX512_VNNI)
using best = avx512_vnni;
inline constexpr bool available = true;
#elif defined(LOWBIT_HAS_INT8_AVX2)
using best = avx2;
inline constexpr bool available = true;
#else
using best = void;
inline constexpr bool available = false;
#endif

}  // namespace detail::simd::int8
LOWBIT_END_NAMESPACE
