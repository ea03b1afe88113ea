// Which implementation of each kernel operation ran: the SIMD kernel or the scalar reference.
//
// Recording is compiled in only when LOWBIT_RECORD_KERNEL_PATHS is defined (lowbit's own tests define
// it), so a test can prove that a SIMD build really ran its SIMD kernels and did not quietly fall back
// to the reference (the idea of ruy's LogCoveredPathsOnDestruction). Elsewhere record() is empty.
// dispatch/, the one place kernels are selected, is the one caller of record().
#pragma once

#include "config.hpp"

#include <array>
#include <atomic>
#include <cstddef>

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The operations dispatch/ selects a kernel for.
enum class KernelOp : std::size_t {
    fake_quantize_forward,
    backward_clamped,
    finite_min_max,
    matmul_f32_gemv,   ///< M = 1 on MLX affine codes
    matmul_f32_gemm,   ///< M > 1, or a bit width without a GEMV kernel
    matmul_f32_batch,  ///< the batch GEMVs: 2 <= M <= 16 (1, 2, 4, 8 bits) or 7 (3, 5, 6 bits)
    quantize_group,    ///< quantization of one group (any format)
    matmul_i8_gemv,    ///< Activations::int8, M = 1
    matmul_i8_gemm,    ///< Activations::int8, M > 1
    ternary_gemv,      ///< TernaryLinear (packed ternary x int8), M = 1
    ternary_gemm,      ///< TernaryLinear, M > 1
    count,
};

enum class KernelPath : unsigned { reference = 1u, simd = 2u };

#if defined(LOWBIT_RECORD_KERNEL_PATHS)
/// Bit set of KernelPath values seen per KernelOp since the last reset.
inline std::array<std::atomic<unsigned>, static_cast<std::size_t>(KernelOp::count)> recorded_kernel_paths{};

inline void record(KernelOp op, KernelPath path) noexcept {
    recorded_kernel_paths[static_cast<std::size_t>(op)].fetch_or(static_cast<unsigned>(path), std::memory_order_relaxed);
}
inline unsigned recorded_paths(KernelOp op) noexcept {
    return recorded_kernel_paths[static_cast<std::size_t>(op)].load(std::memory_order_relaxed);
}
inline void reset_recorded_paths() noexcept {
    for (auto& paths : recorded_kernel_paths) paths.store(0, std::memory_order_relaxed);
}
#else
inline void record(KernelOp, KernelPath) noexcept {}
#endif

}  // namespace detail
LOWBIT_END_NAMESPACE
