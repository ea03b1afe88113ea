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
#include "../gemm/int8_activations.hpp"
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
    constexpr int NR = shape::columns;
    const Eigen::Index K = q.cols();
    const Int8RowBlocks blocks =
        pack_activations_int8<Arch, GroupSize, layout::steps, Int8RowSums::x>(x, x_stride, M, K, shape::split);
    const std::size_t unpacked_bytes = static_cast<std::size_t>(repack_scratch_bytes<GroupSize, Bits>(NR, K));
    int8_gemm_packing_panels<Ops, GroupSize, Bits>(
        blocks, q.rows(), K, unpacked_bytes,
        [&](Eigen::Index n0, std::uint32_t* panel, std::uint8_t* unpacked) {
            pack_weight_panel_int8<Ops, NR>(q, n0, panel, unpacked);
        },
        AffineInt8Epilogue{}, out, out_stride);
}

/// qgemm_i8 on panels packed once (pack_weight_panels_int8 with this Ops' NR), for any M >= 1: the
/// same tiles, so the same result, without the per-call packing (which costs more than the
/// microkernel below about 16 rows).
template <class Arch, class Ops, int GroupSize, int Bits>
void qgemm_i8_prepacked(const float* x, Eigen::Index x_stride, Eigen::Index M, const Int8WeightPanels& panels,
                        Eigen::Index N, Eigen::Index K, float* out, Eigen::Index out_stride) {
    const Int8RowBlocks blocks =
        pack_activations_int8<Arch, GroupSize, Int8PanelLayout<GroupSize, Bits>::steps, Int8RowSums::x>(
            x, x_stride, M, K, Int8TileShape<Ops>::split);
    int8_gemm_on_panels<Ops, GroupSize, Bits>(blocks, panels, N, AffineInt8Epilogue{}, out, out_stride);
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
