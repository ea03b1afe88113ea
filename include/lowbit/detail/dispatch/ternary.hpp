// dispatch/: kernel selection for the packed ternary matmul of TernaryLinear (docs/numerics.md N14): the
// AVX-512 VNNI or AVX2 kernels of detail/ternary/ when the target has them (the integer instruction
// set of the int8 MLX path, dispatch_int8_ops), else the scalar reference. Both give the same bits.
#pragma once

#include "../config.hpp"

#include <type_traits>

#include <Eigen/Core>

#include "../kernel_paths.hpp"
#include "../simd.hpp"
#include "../ternary/matmul_driver.hpp"
#include "../ternary/reference.hpp"
#include "mlx_affine.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// out[m * out_stride + n] = the ternary matmul of the prepared activations and w with the kernels of
/// Ops (default: this build's), or the reference when Ops is void. Threads inside.
template <class Ops = dispatch_int8_ops>
void ternary_matmul(const ternary::PackedTernaryView& w, const ternary::TernaryActivations& act, float* out,
                    Eigen::Index out_stride) {
    const KernelOp op = act.rows == 1 ? KernelOp::ternary_gemv : KernelOp::ternary_gemm;
    if constexpr (!std::is_same_v<Ops, void>) {
        record(op, KernelPath::simd);
        ternary::kernels::ternary_matmul<Ops>(w, act, out, out_stride);
    } else {
        record(op, KernelPath::reference);
        ternary::reference::ternary_matmul(w, act, out, out_stride);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
