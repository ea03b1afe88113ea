// dispatch/: compiling the MLX affine kernels once per program instead of once per translation unit.
// Each translation unit that multiplies by or quantizes into a QuantizedMatrix<GroupSize, Bits> compiles
// that format's kernels (the f32 GEMV, batch GEMV and GEMM, the int8 ones, the row quantizer: tens of
// seconds per format with GCC at -O3). A program with many such translation units may compile them in
// one place instead:
//   - every translation unit defines LOWBIT_EXTERN_KERNELS (each format's three run_* entries, two in
//     dispatch/mlx_affine.hpp and one in dispatch/mlx_affine_quantize.hpp, are then declared
//     `extern template`, so calls link to one copy), and
//   - one or more translation units, built with the same compiler and flags, instantiate each format
//     the program uses with LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(GroupSize, Bits); at namespace scope
//     after including <lowbit/lowbit.hpp> (or <lowbit/quantized_linear.hpp>).
// Nothing changes in the results: the same functions run, from one copy. The run_* entries do not
// record kernel paths (their callers do), so the copy is the same with or without
// LOWBIT_RECORD_KERNEL_PATHS. lowbit's own tests and examples build this way (src/kernel_instances_*.cpp).
// Header-only use needs neither macro.
#pragma once

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../../quantized_matrix.hpp"

/// Explicit instantiation (`keyword` empty) or its extern declaration (`keyword` extern) of the three
/// dispatch entries of the MLX affine format <GroupSize, Bits>, which hold every matmul kernel of that
/// format and its row quantizer.
#define LOWBIT_MLX_AFFINE_KERNELS_WITH(keyword, GroupSize, Bits)                                         \
    keyword template auto ::lowbit::detail::run_quantized_matmul<GroupSize, Bits>(                            \
        const float*, ::Eigen::Index, ::Eigen::Index, const ::lowbit::QuantizedMatrix<GroupSize, Bits>&,     \
        float*, ::Eigen::Index, ::lowbit::detail::MatmulKernel) -> ::lowbit::detail::KernelRun;              \
    keyword template auto ::lowbit::detail::run_quantized_matmul_int8<GroupSize, Bits>(                       \
        const float*, ::Eigen::Index, ::Eigen::Index, const ::lowbit::QuantizedMatrix<GroupSize, Bits>&,     \
        float*, ::Eigen::Index, ::lowbit::detail::MatmulKernel, ::lowbit::detail::Int8PanelCache*)             \
        -> ::lowbit::detail::KernelRun;                                                                        \
    keyword template auto ::lowbit::detail::run_quantize_row<GroupSize, Bits>(                                \
        const float*, ::std::size_t, ::std::uint8_t*, ::std::uint32_t*, float*, float*)                     \
        -> ::lowbit::detail::RowFault

/// Compiles the kernels of the format <GroupSize, Bits> in this translation unit (see above).
#define LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(GroupSize, Bits) LOWBIT_MLX_AFFINE_KERNELS_WITH(, GroupSize, Bits)

#if defined(LOWBIT_EXTERN_KERNELS)
#define LOWBIT_EXTERN_MLX_AFFINE_KERNELS(GroupSize, Bits) LOWBIT_MLX_AFFINE_KERNELS_WITH(extern, GroupSize, Bits);
LOWBIT_MLX_AFFINE_FORMAT_LIST(LOWBIT_EXTERN_MLX_AFFINE_KERNELS)
#undef LOWBIT_EXTERN_MLX_AFFINE_KERNELS
#endif
