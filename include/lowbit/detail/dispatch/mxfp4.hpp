// dispatch/: the matmul on mxfp4 codes. run_quantized_matmul and run_quantized_matmul_int8 below are
// what FormatKernels<Mxfp4> calls (format_kernels.hpp). Every kernel of this format runs as the
// format-generic scalar reference for now (gemm/matmul_reference.hpp, gemm/int8_matmul_reference.hpp):
// the f32 and int8 kernels on the shared GEMM machinery are still to come.
#pragma once

#include "../config.hpp"

#include <Eigen/Core>

#include "../../formats/mxfp4.hpp"
#include "../gemm/int8_matmul_reference.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../gemm/matmul_reference.hpp"
#include "../kernel_paths.hpp"
#include "../mxfp4/quantize.hpp"
#include "../quantized_view.hpp"
#include "format_kernels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// FormatKernels::matmul of mxfp4 (contract there): the reference for every `kernel`.
inline KernelRun run_quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                      const QuantizedView<Mxfp4>& q, float* out, Eigen::Index out_stride,
                                      MatmulKernel /*kernel*/) {
    reference::quantized_matmul(x, x_stride, M, q, out, out_stride);
    return {M == 1 ? KernelOp::matmul_f32_gemv : KernelOp::matmul_f32_gemm, KernelPath::reference};
}

/// FormatKernels::matmul_int8 of mxfp4 (contract there): the reference for every `kernel`; no panels.
inline KernelRun run_quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                           const QuantizedView<Mxfp4>& q, float* out, Eigen::Index out_stride,
                                           MatmulKernel /*kernel*/, Int8PanelCache* /*panels*/) {
    reference::quantized_matmul_int8(x, x_stride, M, q, out, out_stride);
    return {M == 1 ? KernelOp::matmul_i8_gemv : KernelOp::matmul_i8_gemm, KernelPath::reference};
}

}  // namespace detail
LOWBIT_END_NAMESPACE
