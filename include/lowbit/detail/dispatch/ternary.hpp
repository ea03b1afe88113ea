// dispatch/: kernel selection for the packed ternary matmul of TernaryLinear (docs/numerics.md N14): the
// shared int8 GEMM (ternary/int8_gemm.hpp, on the integer instruction set of the int8 MLX path,
// dispatch_int8_ops) when the target has one, else the scalar reference. Both give the same bits.
#pragma once

#include "../config.hpp"

#include <mutex>
#include <type_traits>

#include <Eigen/Core>

#include "../gemm/int8_weight_panels.hpp"
#include "../kernel_paths.hpp"
#include "../simd.hpp"
#include "../ternary/int8_gemm.hpp"
#include "../ternary/reference.hpp"
#include "instruction_sets.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// out[m * out_stride + n] = the ternary matmul of the prepared activations and w with the int8 GEMM
/// of Ops (default: this build's), or the reference when Ops is void. `panels`: w's layer cache, where
/// w's panels are built on the first call (a cache holding another NR, from a translation unit of
/// another instruction set, and null both pack the panels for this call only). Threads inside.
template <class Ops = dispatch_int8_ops>
void ternary_matmul(const ternary::PackedTernaryView& w, const ternary::TernaryActivations& act, float* out,
                    Eigen::Index out_stride, Int8PanelCache* panels = nullptr) {
    const KernelOp op = act.rows == 1 ? KernelOp::ternary_gemv : KernelOp::ternary_gemm;
    if constexpr (!std::is_same_v<Ops, void>) {
        record(op, KernelPath::simd);
        constexpr int NR = kernels::Int8TileShape<Ops>::columns;
        if (panels != nullptr) {
            std::call_once(panels->built, [&] { panels->panels = ternary::kernels::pack_ternary_panels<Ops, NR>(w); });
            if (panels->panels.columns == NR)
                return ternary::kernels::ternary_matmul_int8<Ops>(w, panels->panels, act, out, out_stride);
        }
        ternary::kernels::ternary_matmul_int8<Ops>(w, ternary::kernels::pack_ternary_panels<Ops, NR>(w), act, out,
                                                   out_stride);
    } else {
        (void)panels;
        record(op, KernelPath::reference);
        ternary::reference::ternary_matmul(w, act, out, out_stride);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
