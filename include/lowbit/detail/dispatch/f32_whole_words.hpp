// dispatch/: the f32-activation matmul of a format whose codes fill whole words and whose values come
// from F32Codes<Format> (the microscaling float formats: e2m1.hpp, mxfp8.hpp): the format-generic f32
// kernels of gemm/f32_driver.hpp, chosen as for MLX affine's whole-word formats.
#pragma once

#include "../config.hpp"

#include <type_traits>

#include <Eigen/Core>

#include "../gemm/f32_driver.hpp"
#include "../gemm/matmul_reference.hpp"
#include "../kernel_paths.hpp"
#include "../quantized_view.hpp"
#include "format_kernels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// FormatKernels::matmul (contract there) on the kernels of gemm/f32_driver.hpp: the GEMV at M = 1, the
/// batch GEMV up to QgemvF32Batch::max_m rows, the panel GEMM above; the reference without SIMD (Arch
/// void: a template, so that the SIMD branches are discarded then).
template <class Arch, class Format>
KernelRun run_whole_word_matmul_f32(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                    const QuantizedView<Format>& q, float* out, Eigen::Index out_stride,
                                    MatmulKernel kernel) {
    static_assert(Format::codes_in_whole_words, "run_whole_word_matmul_f32: codes must fill whole words");
    if constexpr (!std::is_same_v<Arch, void>) {
        if (kernel == MatmulKernel::automatic) {
            if (M == 1)
                kernel = MatmulKernel::gemv;
            else if (M <= kernels::QgemvF32Batch<Arch>::max_m)
                kernel = MatmulKernel::batch;
            else
                kernel = MatmulKernel::gemm;
        }
        if (kernel == MatmulKernel::gemv) {
            for (Eigen::Index m = 0; m < M; ++m) kernels::qgemv_f32<Arch>(x + m * x_stride, q, out + m * out_stride);
            return {KernelOp::matmul_f32_gemv, KernelPath::simd};
        }
        if (kernel == MatmulKernel::batch) {
            kernels::qgemv_f32_batch<Arch>(x, x_stride, M, q, out, out_stride);
            return {KernelOp::matmul_f32_batch, KernelPath::simd};
        }
        if (kernel == MatmulKernel::gemm) {
            kernels::qgemm_f32<Arch>(x, x_stride, M, q, out, out_stride);
            return {KernelOp::matmul_f32_gemm, KernelPath::simd};
        }
    }
    reference::quantized_matmul(x, x_stride, M, q, out, out_stride);
    return {M == 1 ? KernelOp::matmul_f32_gemv : KernelOp::matmul_f32_gemm, KernelPath::reference};
}

}  // namespace detail
LOWBIT_END_NAMESPACE
