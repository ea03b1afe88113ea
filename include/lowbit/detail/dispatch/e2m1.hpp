// dispatch/: the matmul on E2M1 codes (mxfp4, nvfp4). run_quantized_matmul and run_quantized_matmul_int8
// below are what FormatKernels<Format> calls for these formats (format_kernels.hpp): the format-generic
// f32 kernels of gemm/ on the E2M1 code decode (e2m1/f32_codes.hpp), and the int8 panel GEMM of
// e2m1/int8_gemm.hpp. Each format's row quantizer is in its own folder (mxfp4/, nvfp4/ quantize.hpp).
#pragma once

#include "../config.hpp"

#include <mutex>
#include <type_traits>

#include <Eigen/Core>

#include "../../formats/minifloats.hpp"
#include "../gemm/f32_driver.hpp"
#include "../gemm/int8_matmul_reference.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../gemm/matmul_reference.hpp"
#include "../kernel_paths.hpp"
#include "../e2m1/f32_codes.hpp"
#include "../e2m1/int8_gemm.hpp"
#include "../mxfp4/quantize.hpp"
#include "../nvfp4/quantize.hpp"
#include "../quantized_view.hpp"
#include "format_kernels.hpp"
#include "instruction_sets.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// FormatKernels::matmul of an E2M1 format (contract there): the f32 kernels of gemm/f32_driver.hpp on
/// its codes (e2m1/f32_codes.hpp), chosen as for MLX affine's whole-word formats: the GEMV at M = 1, the
/// batch GEMV up to QgemvF32Batch::max_m rows, the panel GEMM above; the reference without SIMD (Arch
/// void: a template, so that the SIMD branches are discarded then).
template <class Arch = dispatch_arch, E2m1Format Format>
KernelRun run_quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                               float* out, Eigen::Index out_stride, MatmulKernel kernel) {
    if constexpr (!std::is_same_v<Arch, void>) {
        if (kernel == MatmulKernel::automatic) {
            if (M == 1) kernel = MatmulKernel::gemv;
            else if (M <= kernels::QgemvF32Batch<Arch>::max_m) kernel = MatmulKernel::batch;
            else kernel = MatmulKernel::gemm;
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

/// FormatKernels::matmul_int8 of an E2M1 format (contract there): the panel GEMM of e2m1/int8_gemm.hpp on the
/// integer instruction set of the affine int8 path (dispatch_int8_ops) for every M and every `kernel` but
/// reference (the format has no row-dot kernel), on the layer's panels when given `panels` and
/// automatic; the reference without an integer instruction set (Ops void: a template, so that the
/// SIMD branch is discarded then).
template <class Ops = dispatch_int8_ops, E2m1Format Format>
KernelRun run_quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                    const QuantizedView<Format>& q, float* out, Eigen::Index out_stride,
                                    MatmulKernel kernel, Int8PanelCache* panels) {
    const KernelOp op = M == 1 ? KernelOp::matmul_i8_gemv : KernelOp::matmul_i8_gemm;
    if constexpr (!std::is_same_v<Ops, void>) {
        if (kernel != MatmulKernel::reference) {
            constexpr int NR = kernels::Int8TileShape<Ops>::columns;
            if (panels != nullptr && kernel == MatmulKernel::automatic) {
                std::call_once(panels->built, [&] { panels->panels = kernels::pack_weight_panels_int8<Ops, NR>(q); });
                if (panels->panels.columns == NR) {
                    kernels::qgemm_i8_prepacked<dispatch_arch, Ops>(x, x_stride, M, panels->panels, q, out, out_stride);
                    return {op, KernelPath::simd};
                }
            }
            kernels::qgemm_i8<dispatch_arch, Ops>(x, x_stride, M, q, out, out_stride);
            return {op, KernelPath::simd};
        }
    }
    reference::quantized_matmul_int8(x, x_stride, M, q, out, out_stride);
    return {op, KernelPath::reference};
}

}  // namespace detail
LOWBIT_END_NAMESPACE
