// The int8 operations of the int8-activation GEMM on AVX-512 VNNI (with BW): simd::int8::avx512_vnni,
// the contract in int8.hpp. vpdpbusd multiplies unsigned code bytes by signed activation bytes into
// int32 lanes, exact for every code and activation byte.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "x86_avx512.hpp"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::int8 {

#define LOWBIT_HAS_INT8_AVX512_VNNI 1
/// 512-bit vectors, vpdpbusd (unsigned code bytes times signed activation bytes into int32).
struct avx512_vnni {
    using vec = __m512i;
    using fvec = __m512;
    using code_byte = std::uint8_t;       ///< dot's first operand: unsigned bytes (the weight codes)
    using activation_byte = std::int8_t;  ///< dot's second operand: signed bytes (the activations)
    static constexpr int lanes = 16;
    static constexpr int bytes = 64;
    /// The GEMM microkernel's tile (gemm/int8_ukernel.hpp): 6 rows x 2 vectors, for 32 registers; a
    /// batch of up to 8 rows runs as one 8-row tile (its float totals, touched once a group, spill).
    static constexpr int tile_rows = 6, tile_vectors = 2, one_block_rows = 8;
    static vec zero() noexcept { return _mm512_setzero_si512(); }
    static vec load(const void* p) noexcept { return _mm512_loadu_si512(p); }
    static vec byte_mask(vec v, std::uint8_t mask) noexcept {
        return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(mask)));
    }
    template <int Shift>
    static vec shift_right(vec v) noexcept {
        return _mm512_srli_epi16(v, Shift);
    }
    /// The 16 bytes at p in each 128-bit lane (lookup16's table).
    static vec table16(const std::uint8_t* p) noexcept {
        return _mm512_maskz_broadcast_i32x4(static_cast<__mmask16>(0xFFFF),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    /// Per byte of v (each < 16): that entry of the table (vpshufb; maskz: GCC bug 105593).
    static vec lookup16(vec table, vec v) noexcept { return _mm512_maskz_shuffle_epi8(~__mmask64{0}, table, v); }
    template <int CodeBits>
    static vec dot(vec acc, vec codes, vec x) noexcept {
        return _mm512_dpbusd_epi32(acc, codes, x);
    }
    static vec add(vec a, vec b) noexcept { return _mm512_add_epi32(a, b); }
    /// Each int32 lane shifted left by Shift bits.
    template <int Shift>
    static vec shift_left(vec v) noexcept {
        return _mm512_maskz_slli_epi32(static_cast<__mmask16>(0xFFFF), v, Shift);
    }
    static vec sub(vec a, vec b) noexcept { return _mm512_sub_epi32(a, b); }
    static vec set1(std::int32_t v) noexcept { return _mm512_set1_epi32(v); }
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
        auto shuffle = [](__m512i a, __m512i b, auto order) {
            return _mm512_maskz_shuffle_i32x4(all32, a, b, decltype(order)::value);
        };
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
    static fvec to_float(vec v) noexcept {
        return _mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), v);
    }  // maskz: GCC bug 105593
    /// The horizontal sum of x86_avx512.hpp (arch_ops::reduce_add), the one AVX-512 float reduction.
    static float freduce(fvec v) noexcept {
        return arch_ops::reduce_add(xsimd::batch<float, xsimd::avx512f>(v), xsimd::avx512f{});
    }
};

}  // namespace detail::simd::int8
LOWBIT_END_NAMESPACE

#endif
