// Integer dot-product building blocks of the int8-activation matmul (docs/numerics.md N11, and the
// ternary one, N14), one struct per instruction set in its own file beside the float ones:
// x86_avx512_vnni_int8.hpp (AVX-512 VNNI with BW) and x86_avx2_int8.hpp (AVX2 with FMA). xsimd has no
// int8 dot product, so these are raw intrinsics, compiled only for the targets that have them. `best`
// is the widest this target has (void: none; the kernels then run their references).
//
// Each struct Ops has: `vec` (int32 lanes), `lanes`, `bytes` (code bytes per vector), code_byte and
// activation_byte (the dot's operand types: unsigned codes, signed activations), tile_rows and
// tile_vectors (the GEMM microkernel's MR and NJ for its register file), one_block_rows (the most rows
// a batch runs as one block: Int8RowSplit);
//   zero(), load(p) (unaligned), byte_mask(v, m) (v & m per byte), shift_right(v, s) (16-bit shift),
//   table16(p), lookup16(table, v): per byte of v (< 16), byte v of the 16 at p (a format's code decode);
//   dot(acc, u8, i8)  : acc[i] += sum_{j<4} u8[4i+j] * i8[4i+j], exact for u8 codes < 2^CodeBits
//                       (the template parameter says how wide the codes can be);
//   add(a, b), sub(a, b), set1(v), shift_left<s>(v) : int32 lanes;
//   merge(a, b)       : [a0+a1, a2+a3, ..., b0+b1, b2+b3, ...] (adjacent lanes summed, a's first);
//   broadcast32(p)   : the 4 bytes at p in every int32 lane (the GEMM's activation quad);
//   transpose_words(rows, out): out[i][r] = 32-bit word i of rows[r], r, i < lanes (the GEMM's weight
//                       panel, whose rows of words need not be evenly spaced);
//   and the float epilogue: fvec, fzero, fload_partial(p, count), fload(p), fstore(p, v), fbroadcast(f),
//   fmul, fadd, fmadd(a, b, c) = a * b + c (one rounding), to_float, freduce (the horizontal sum of
//   arch/: the same order as simd::reduce_add's AVX-512 and SSE folds).
#pragma once

#include "../config.hpp"

#include <tuple>

#include "x86_avx2_int8.hpp"
#include "x86_avx512_vnni_int8.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::int8 {

/// Every instruction set of this target, widest first (the kernel tests run each).
using all = decltype(std::tuple_cat(
#if defined(LOWBIT_HAS_INT8_AVX512_VNNI)
    std::tuple<avx512_vnni>{},
#endif
#if defined(LOWBIT_HAS_INT8_AVX2)
    std::tuple<avx2>{},
#endif
    std::tuple<>{}));

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
