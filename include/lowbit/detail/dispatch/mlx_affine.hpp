// dispatch/: kernel selection for the matmul on MLX affine codes (the table is in fake_quant.hpp of
// this folder, at the top; this file holds the format's rows). run_quantized_matmul and
// run_quantized_matmul_int8 below are what FormatKernels<MlxAffine<G, B>> calls (format_kernels.hpp).
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <mutex>
#include <type_traits>

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../gemm/f32_driver.hpp"
#include "../gemm/int8_matmul_reference.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../gemm/matmul_reference.hpp"
#include "../kernel_paths.hpp"
#include "../mlx_affine/f32_codes.hpp"
#include "../mlx_affine/f32_gemv_straddling.hpp"
#include "../mlx_affine/int8_gemm.hpp"
#include "../mlx_affine/int8_gemv.hpp"
#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "format_kernels.hpp"
#include "instruction_sets.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

// ------------------------------------------------------------------------- matmul on MLX affine codes

/// The f32-activation kernels of the MLX affine format <GroupSize, Bits> for instruction set Arch.
template <int GroupSize, int Bits, class Arch>
struct MlxAffineF32Kernels {
    static constexpr bool simd = !std::is_same_v<Arch, void>;
    static constexpr bool whole_words = MlxAffine<GroupSize, Bits>::codes_in_whole_words;
    static constexpr bool gemv = simd;   ///< M = 1 (f32_gemv_straddling.hpp for 3, 5 and 6 bits)
    static constexpr bool batch = simd;  ///< 2 <= M <= batch_max_m (the same file for 3, 5 and 6 bits)
    static constexpr bool gemm = simd;   ///< every M
    /// The largest M the batch GEMV is chosen for (then the GEMM).
    static constexpr Eigen::Index batch_max_m = [] {
        if constexpr (!simd)
            return Eigen::Index{0};
        else if constexpr (whole_words)
            return kernels::QgemvF32Batch<Arch>::max_m;
        else
            return kernels::StraddlingGemv<Arch, MlxAffine<GroupSize, Bits>>::batch_max_m;
    }();
};

/// FormatKernels::matmul of the MLX affine format (contract there). Without SIMD every kernel runs as
/// the reference.
template <int GroupSize, int Bits>
KernelRun run_quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M,
                               const QuantizedView<MlxAffine<GroupSize, Bits>>& q, float* out, Eigen::Index out_stride,
                               MatmulKernel kernel) {
    using table = MlxAffineF32Kernels<GroupSize, Bits, dispatch_arch>;
    if (kernel == MatmulKernel::automatic) {
        if (table::gemv && M == 1) kernel = MatmulKernel::gemv;
        else if (table::batch && M <= table::batch_max_m)
            kernel = MatmulKernel::batch;
        else kernel = MatmulKernel::gemm;
    }
    if constexpr (table::gemv) {
        if (kernel == MatmulKernel::gemv) {
            for (Eigen::Index m = 0; m < M; ++m) {
                if constexpr (table::whole_words)
                    kernels::qgemv_f32<dispatch_arch>(x + m * x_stride, q, out + m * out_stride);
                else
                    kernels::qgemv_f32_straddling<dispatch_arch>(x + m * x_stride, q, out + m * out_stride);
            }
            return {KernelOp::matmul_f32_gemv, KernelPath::simd};
        }
    }
    if constexpr (table::batch) {
        if (kernel == MatmulKernel::batch) {
            if constexpr (table::whole_words)
                kernels::qgemv_f32_batch<dispatch_arch>(x, x_stride, M, q, out, out_stride);
            else
                kernels::qgemv_f32_straddling_batch<dispatch_arch>(x, x_stride, M, q, out, out_stride);
            return {KernelOp::matmul_f32_batch, KernelPath::simd};
        }
    }
    if constexpr (table::gemm) {
        if (kernel == MatmulKernel::gemm) {
            kernels::qgemm_f32<dispatch_arch>(x, x_stride, M, q, out, out_stride);
            return {KernelOp::matmul_f32_gemm, KernelPath::simd};
        }
    }
    reference::quantized_matmul(x, x_stride, M, q, out, out_stride);
    return {M == 1 ? KernelOp::matmul_f32_gemv : KernelOp::matmul_f32_gemm, KernelPath::reference};
}

/// The int8-activation kernels (N11) of the MLX affine format <GroupSize, Bits> for the integer
/// instruction set Ops of detail/arch/int8.hpp (void: none, the reference runs). Every bit width
/// has them (the row dot unpacks 1, 3, 5 and 6-bit codes to bytes first; the panels repack them at 2,
/// 4 or 8 bits). Without a layer's panels: below gemm_rows rows the row-dot kernel of int8_gemv.hpp
/// runs (M = 1 is recorded as GEMV, M > 1 as GEMM), from gemm_rows on the panel GEMM of int8_gemm.hpp
/// (recorded as GEMM); the threshold is measured (4096 x 4096, 1 thread). With a layer's
/// Int8PanelCache (`prepacked`, every width), the GEMM on the panels built once runs for every M (as
/// fast as the row dot at M = 1, faster from M = 2; measured).
template <int GroupSize, int Bits, class Ops>
struct MlxAffineI8Kernels {
    using ops = Ops;
    static constexpr bool simd = !std::is_same_v<Ops, void>;
    static constexpr bool gemv = simd;  ///< M = 1
    static constexpr bool gemm = simd;  ///< M > 1
    static constexpr bool prepacked = simd;        ///< every M, on a layer's panels
    static constexpr Eigen::Index gemm_rows = 12;  ///< first M of the panel GEMM (M = 8: row dot faster, 16: GEMM)
};

/// FormatKernels::matmul_int8 of the MLX affine format (contract there). `kernel`: automatic, gemv or
/// batch (the row-dot kernel of int8_gemv.hpp for any M), gemm (the panel GEMM of int8_gemm.hpp), or
/// reference. With `panels`, automatic builds q's panels there once and runs the GEMM on them (when
/// the table has `prepacked` and the cache holds this build's NR).
template <int GroupSize, int Bits>
KernelRun run_quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                    const QuantizedView<MlxAffine<GroupSize, Bits>>& q, float* out,
                                    Eigen::Index out_stride, MatmulKernel kernel, Int8PanelCache* panels) {
    using table = MlxAffineI8Kernels<GroupSize, Bits, dispatch_int8_ops>;
    const KernelOp op = M == 1 ? KernelOp::matmul_i8_gemv : KernelOp::matmul_i8_gemm;
    if constexpr (table::prepacked) {
        constexpr int NR = kernels::Int8TileShape<typename table::ops>::columns;
        if (panels != nullptr && kernel == MatmulKernel::automatic) {
            std::call_once(panels->built, [&] { panels->panels = kernels::pack_weight_panels_int8<dispatch_int8_ops, NR>(q); });
            if (panels->panels.columns == NR) {
                kernels::qgemm_i8_prepacked<dispatch_arch, dispatch_int8_ops, GroupSize, Bits>(
                    x, x_stride, M, panels->panels, q.rows(), q.cols(), out, out_stride);
                return {op, KernelPath::simd};
            }
        }
    }
    if (kernel == MatmulKernel::automatic) kernel = M >= table::gemm_rows ? MatmulKernel::gemm : MatmulKernel::gemv;
    if constexpr (table::gemv && table::gemm) {
        if (kernel == MatmulKernel::gemm) {
            kernels::qgemm_i8<dispatch_arch, dispatch_int8_ops, GroupSize, Bits>(x, x_stride, M, q, out, out_stride);
            return {op, KernelPath::simd};
        }
        if (kernel != MatmulKernel::reference) {
            kernels::qgemv_i8<dispatch_arch, dispatch_int8_ops, GroupSize, Bits>(x, x_stride, M, q, out, out_stride);
            return {op, KernelPath::simd};
        }
    }
    reference::quantized_matmul_int8(x, x_stride, M, q, out, out_stride);
    return {op, KernelPath::reference};
}

}  // namespace detail
LOWBIT_END_NAMESPACE
