// dispatch/: compiling each format's kernels once per program instead of once per translation unit.
// Each translation unit that multiplies by or quantizes into a QuantizedMatrixOf<Format> compiles that
// format's kernels (the f32 GEMV, batch GEMV and GEMM, the int8 ones, the row quantizer: tens of
// seconds per format with GCC at -O3). A program with many such translation units may compile them in
// one place instead:
//   - every translation unit defines LOWBIT_EXTERN_KERNELS (FormatKernels<Format> of every format in
//     LOWBIT_FORMAT_LIST is then declared `extern template`, so calls link to one copy), and
//   - one or more translation units, built with the same compiler and flags, instantiate each format
//     the program uses with LOWBIT_INSTANTIATE_FORMAT_KERNELS(Format); (for MLX affine also
//     LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(GroupSize, Bits);) at namespace scope after including
//     <lowbit/lowbit.hpp> (or <lowbit/quantized_linear.hpp>).
// Nothing changes in the results: the same functions run, from one copy. The entries do not record
// kernel paths (their callers do), so the copy is the same with or without LOWBIT_RECORD_KERNEL_PATHS.
// The CMake target lowbit::kernels (cmake/lowbitKernels.cmake, src/kernel_instances.cpp) does both for
// every format; lowbit's own tests, examples and benchmark link it. Header-only use needs neither macro.
#pragma once

#include "../../formats/formats.hpp"
#include "format_kernels.hpp"

/// Explicit instantiation (`keyword` empty) or its extern declaration (`keyword` extern) of the
/// compiled entries of a format (the format type is the rest of the arguments).
#define LOWBIT_FORMAT_KERNELS_WITH(keyword, ...) \
    keyword template struct ::lowbit::detail::FormatKernels<__VA_ARGS__, true>

/// Compiles the kernels of a format in this translation unit (see above).
#define LOWBIT_INSTANTIATE_FORMAT_KERNELS(...) LOWBIT_FORMAT_KERNELS_WITH(, __VA_ARGS__)
#define LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(GroupSize, Bits) \
    LOWBIT_INSTANTIATE_FORMAT_KERNELS(::lowbit::MlxAffine<GroupSize, Bits>)

#if defined(LOWBIT_EXTERN_KERNELS)
#define LOWBIT_EXTERN_FORMAT_KERNELS(...) LOWBIT_FORMAT_KERNELS_WITH(extern, __VA_ARGS__);
LOWBIT_FORMAT_LIST(LOWBIT_EXTERN_FORMAT_KERNELS)
#undef LOWBIT_EXTERN_FORMAT_KERNELS
#endif
