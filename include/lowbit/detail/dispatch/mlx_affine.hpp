// dispatch/: kernel selection for the matmul on MLX affine codes (the table is in fake_quant.hpp of
// this folder, at the top; this file holds the format's rows).
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <type_traits>

#include <Eigen/Core>

#include "../../quantized_matrix.hpp"
#include "../kernel_paths.hpp"
#include "../mlx_affine/matmul_driver.hpp"
#include "../mlx_affine/int8_matmul_reference.hpp"
#include "../mlx_affine/matmul_reference.hpp"
#include "../mlx_affine/qgemm_i8.hpp"
#include "../mlx_affine/qgemv_i8.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

// ------------------------------------------------------------------------- matmul on MLX affine codes

/// The f32-activation kernels of the MLX affine format <GroupSize, Bits> for instruction set Arch.
template <int GroupSize, int Bits, class Arch>
struct MlxAffineF32Kernels {
    static constexpr bool simd = !std::is_same_v<Arch, void>;
    static constexpr bool gemv = simd && MlxAffine<GroupSize, Bits>::codes_in_whole_words;  ///< M = 1
    static constexpr bool batch = gemv;  ///< 2 <= M <= QgemvF32Batch<Arch>::max_m
    static constexpr bool gemm = simd;   ///< every M
};

/// The Arch the kernel tables are instantiated with: simd::arch, or void when SIMD is off.
using dispatch_arch = std::conditional_t<simd::enabled, simd::arch, void>;

/// out = x * dequantize(q)^T on raw row-major storage (x [M, K] with row stride x_stride, out [M, N]
/// with row stride out_stride), threads inside.
template <int GroupSize, int Bits>
void quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedMatrix<GroupSize, Bits>& q,
                      float* out, Eigen::Index out_stride) {
    using table = MlxAffineF32Kernels<GroupSize, Bits, dispatch_arch>;
    if constexpr (table::gemv) {
        if (M == 1) {
            record(KernelOp::matmul_f32_gemv, KernelPath::simd);
            kernels::qgemv_f32<dispatch_arch>(x, q, out);
            return;
        }
    }
    if constexpr (table::batch) {
        if (M <= kernels::QgemvF32Batch<dispatch_arch>::max_m) {
            record(KernelOp::matmul_f32_batch, KernelPath::simd);
            kernels::qgemv_f32_batch<dispatch_arch>(x, x_stride, M, q, out, out_stride);
            return;
        }
    }
    if constexpr (table::gemm) {
        record(KernelOp::matmul_f32_gemm, KernelPath::simd);
        kernels::qgemm_f32<dispatch_arch>(x, x_stride, M, q, out, out_stride);
    } else {
        record(M == 1 ? KernelOp::matmul_f32_gemv : KernelOp::matmul_f32_gemm, KernelPath::reference);
        reference::quantized_matmul(x, x_stride, M, q, out, out_stride);
    }
}

/// The int8-activation kernels (N11) of the MLX affine format <GroupSize, Bits> for the integer
/// instruction set Ops of detail/arch/x86_int8.hpp (void: none, the reference runs). Every bit width
/// has them (3, 5 and 6 bits unpack codes to bytes first). Below gemm_rows rows the row-dot kernel
/// of qgemv_i8.hpp runs (M = 1 is recorded as GEMV, M > 1 as GEMM), from gemm_rows on the panel GEMM
/// of qgemm_i8.hpp (recorded as GEMM); the threshold is measured (4096 x 4096, 1 thread).
template <int GroupSize, int Bits, class Ops>
struct MlxAffineI8Kernels {
    static constexpr bool simd = !std::is_same_v<Ops, void>;
    static constexpr bool gemv = simd;  ///< M = 1
    static constexpr bool gemm = simd;  ///< M > 1
    static constexpr Eigen::Index gemm_rows = 12;  ///< first M of the panel GEMM (M = 8: row dot faster, 16: GEMM)
};

/// The integer instruction set the int8 kernel table is instantiated with (void when SIMD is off or
/// the target has neither AVX-512 VNNI+BW nor AVX2+FMA).
using dispatch_int8_ops = std::conditional_t<simd::enabled && simd::int8::available, simd::int8::best, void>;

/// out = the int8-activation matmul (N11) of x and q on raw row-major storage; x must be finite
/// (the caller checks). Threads inside.
template <int GroupSize, int Bits>
void quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                           const QuantizedMatrix<GroupSize, Bits>& q, float* out, Eigen::Index out_stride) {
    using table = MlxAffineI8Kernels<GroupSize, Bits, dispatch_int8_ops>;
    const KernelOp op = M == 1 ? KernelOp::matmul_i8_gemv : KernelOp::matmul_i8_gemm;
    if constexpr (table::gemv && table::gemm) {
        record(op, KernelPath::simd);
        if (M >= table::gemm_rows)
            kernels::qgemm_i8<dispatch_arch, dispatch_int8_ops, GroupSize, Bits>(x, x_stride, M, q, out, out_stride);
        else
            kernels::qgemv_i8<dispatch_arch, dispatch_int8_ops, GroupSize, Bits>(x, x_stride, M, q, out, out_stride);
    } else {
        record(op, KernelPath::reference);
        reference::quantized_matmul_int8(x, x_stride, M, q, out, out_stride);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
