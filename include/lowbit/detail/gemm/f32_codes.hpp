// How the f32-activation kernels (the GEMV, batch GEMV and panel GEMM of mlx_affine/) read a format's
// packed code words as floats: F32Codes<Format>, specialized by each format in its own folder
// (mlx_affine/f32_codes.hpp, e2m1/f32_codes.hpp). A specialization has
//   x_lanes_scale(t)       the factor the GEMV's permuted x carries at code step t of a word: step<t>
//                          may return the code's value times 1 / x_lanes_scale(t) when that saves work
//                          (affine's codes masked in place); 1 otherwise;
//   step<Arch, t>(words)   code t of each lane's 32-bit word (bits t*Bits ..) as its value, times
//                          1 / x_lanes_scale(t);
//   value<Arch>(codes)     the value of each lane's code (codes < 2^Bits).
// The value is Format::value (the group scale and bias are applied by the kernels), exactly.
#pragma once

#include "../config.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

template <class Format>
struct F32Codes;

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
