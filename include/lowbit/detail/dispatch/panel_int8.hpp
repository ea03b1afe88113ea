// dispatch/: the int8-activation matmul (docs/numerics.md N11) of a format that runs only on the panel
// GEMM (the microscaling float formats: e2m1.hpp, mxfp8.hpp). `Gemm` is the format's kernels
// (E2m1Int8Gemm, Mxfp8Int8Gemm): pack_panels<Ops, NR>(q), gemm<Arch, Ops>(...) packing per call and
// gemm_prepacked<Arch, Ops>(...) on a layer's panels.
#pragma once

#include "../config.hpp"

#include <mutex>
#include <type_traits>

#include <Eigen/Core>

#include "../gemm/int8_matmul_reference.hpp"
#include "../gemm/int8_ukernel.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../kernel_paths.hpp"
#include "../quantized_view.hpp"
#include "format_kernels.hpp"
#include "instruction_sets.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// FormatKernels::matmul_int8 (contract there) on Gemm's panel GEMM, on the integer instruction set of
/// the affine int8 path (Ops), for every M and every `kernel` but reference (no row-dot kernel), on the
/// layer's panels when given `panels` and automatic; the reference without an integer instruction set
/// (Ops void: a template, so that the SIMD branch is discarded then).
template <class Gemm, class Ops, class Format>
KernelRun run_panel_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                                float* out, Eigen::Index out_stride, MatmulKernel kernel, Int8PanelCache* panels) {
    const KernelOp op = M == 1 ? KernelOp::matmul_i8_gemv : KernelOp::matmul_i8_gemm;
    if constexpr (!std::is_same_v<Ops, void>) {
        if (kernel != MatmulKernel::reference) {
            constexpr int NR = kernels::Int8TileShape<Ops>::columns;
            if (panels != nullptr && kernel == MatmulKernel::automatic) {
                std::call_once(panels->built, [&] { panels->panels = Gemm::template pack_panels<Ops, NR>(q); });
                if (panels->panels.columns == NR) {
                    Gemm::template gemm_prepacked<dispatch_arch, Ops>(x, x_stride, M, panels->panels, q, out,
                                                                      out_stride);
                    return {op, KernelPath::simd};
                }
            }
            Gemm::template gemm<dispatch_arch, Ops>(x, x_stride, M, q, out, out_stride);
            return {op, KernelPath::simd};
        }
    }
    reference::quantized_matmul_int8(x, x_stride, M, q, out, out_stride);
    return {op, KernelPath::reference};
}

}  // namespace detail
LOWBIT_END_NAMESPACE
