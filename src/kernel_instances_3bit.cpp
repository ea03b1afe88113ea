// The MLX affine matmul kernels and row quantizers of the 3-bit formats, compiled once for lowbit's own
// executables (tests and examples, built with LOWBIT_EXTERN_KERNELS: cmake/lowbitProjectOptions.cmake,
// lowbit_shared_kernels; include/lowbit/detail/dispatch/mlx_affine_instances.hpp). One file per bit width, so
// that a parallel build spreads them over the cores. The library itself is header-only and needs none of this.
#include <lowbit/quantized_linear.hpp>

LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(32, 3);
LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(64, 3);
LOWBIT_INSTANTIATE_MLX_AFFINE_KERNELS(128, 3);
