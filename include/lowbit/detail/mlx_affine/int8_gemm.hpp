// The int8-activation GEMM of the MLX affine format (docs/numerics.md N11) on the shared driver
// (gemm/int8_driver.hpp): qgemm_i8 packs x and a few weight panels at a time per thread per call,
// qgemm_i8_prepacked runs on the panels a layer packed once (Int8WeightPanels).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../gemm/int8_driver.hpp"
#include "../gemm/int8_panels.hpp"
#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "int8_epilogue.hpp"
#include "int8_panels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// out[m * out_stride + n] = int8 matmul (N11) of x [M, K] (rows with stride x_stride, finite) and q,
/// for any M >= 1, packing the weight panels per call (int8_gemv.hpp is the row-dot alternative).
template <class Arch, class Ops, int GroupSize, int Bits>
void qgemm_i8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<MlxAffine<GroupSize, Bits>>& q,
              float* out, Eigen::Index out_stride) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    using shape = Int8TileShape<Ops>;
    constexpr int MR = shape::rows, NR = shape::columns;
    const Eigen::Index N = q.rows(), K = q.cols();
    const Int8RowBlocks blocks = pack_activations_int8<Arch, GroupSize, Bits>(x, x_stride, M, K, MR);
    const Eigen::Index panels = (N + NR - 1) / NR, panel_units = layout::panel_units(K, NR);
    const Eigen::Index chunk = int8_panels_per_pass(panel_units);
    parallel_for(static_cast<std::size_t>(panels), 1, [&](std::size_t begin, std::size_t end) {
        const Eigen::Index p_begin = static_cast<Eigen::Index>(begin), p_end = static_cast<Eigen::Index>(end);
        const Eigen::Index held = std::min(chunk, p_end - p_begin);
        std::vector<std::uint32_t, xsimd::aligned_allocator<std::uint32_t, 64>> held_panels(
            static_cast<std::size_t>(held * panel_units));
        std::vector<std::uint8_t> unpacked(layout::packed ? 0 : static_cast<std::size_t>(NR * K));
        for (Eigen::Index p0 = p_begin; p0 < p_end; p0 += chunk) {
            const Eigen::Index p1 = std::min(p0 + chunk, p_end);
            for (Eigen::Index p = p0; p < p1; ++p)
                pack_weight_panel_int8<Ops, NR>(q, p * NR, held_panels.data() + (p - p0) * panel_units,
                                                unpacked.data());
            int8_panel_tiles<Ops, GroupSize, Bits>(blocks, held_panels.data(), panel_units, p0, p1, N, false,
                                                   AffineInt8Epilogue{}, out, out_stride);
        }
    });
}

/// qgemm_i8 on panels packed once (pack_weight_panels_int8 with this Ops' NR), for any M >= 1: the
/// same tiles, so the same result, without the per-call packing (which costs more than the
/// microkernel below about 16 rows).
template <class Arch, class Ops, int GroupSize, int Bits>
void qgemm_i8_prepacked(const float* x, Eigen::Index x_stride, Eigen::Index M, const Int8WeightPanels& panels,
                        Eigen::Index N, Eigen::Index K, float* out, Eigen::Index out_stride) {
    constexpr int MR = Int8TileShape<Ops>::rows;
    const Int8RowBlocks blocks = pack_activations_int8<Arch, GroupSize, Bits>(x, x_stride, M, K, MR);
    int8_gemm_on_panels<Ops, GroupSize, Bits>(blocks, panels, N, AffineInt8Epilogue{}, out, out_stride);
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
