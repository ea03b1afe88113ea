// The MLX affine format's side of the int8 GEMM (docs/numerics.md N11; layout in gemm/int8_panels.hpp):
// its activations quantized per row and weight group and packed into row blocks, and its weight rows
// packed into panels (the MLX words themselves for 2, 4 and 8 bits, codes unpacked to bytes for 3, 5 and
// 6), per call or once per layer.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../gemm/group_sums.hpp"
#include "../gemm/int8_panels.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../quantized_view.hpp"
#include "../threading/parallel.hpp"
#include "int8_quantize_x.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// Quantizes x [M, K] (finite, row stride x_stride) and packs it for the microkernel; rows split across
/// threads (each row's work is independent, so the result does not depend on the thread count).
template <class Arch, int GroupSize, int Bits>
Int8RowBlocks pack_activations_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, Eigen::Index K, int MR) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    constexpr int S = layout::steps;
    Int8RowBlocks blocks;
    blocks.split(M, MR);
    blocks.quads_per_row = K / 4;
    blocks.groups = K / GroupSize;
    blocks.quads.resize(static_cast<std::size_t>(M * K));
    blocks.a.resize(static_cast<std::size_t>(M * blocks.groups));
    blocks.x_sum.resize(static_cast<std::size_t>(M * blocks.groups));
    const Eigen::Index groups = blocks.groups, words = layout::words(K);
    parallel_for(static_cast<std::size_t>(blocks.count), 1, [&](std::size_t begin, std::size_t end) {
        std::vector<std::int8_t> xq(static_cast<std::size_t>(K));
        std::vector<float> a(static_cast<std::size_t>(groups)), sums(static_cast<std::size_t>(groups));
        for (auto block = static_cast<Eigen::Index>(begin); block < static_cast<Eigen::Index>(end); ++block) {
            const Eigen::Index r_count = blocks.rows(block), m0 = blocks.first_row(block);
            std::int8_t* quads = blocks.quads.data() + m0 * K;
            float* a_out = blocks.a.data() + m0 * groups;
            float* sum_out = blocks.x_sum.data() + m0 * groups;
            for (Eigen::Index r = 0; r < r_count; ++r) {
                const float* row = x + (m0 + r) * x_stride;
                quantize_activations_int8<Arch, GroupSize>(row, K, xq.data(), a.data());
                group_sums<Arch, GroupSize>(row, K, 1, K, sums.data());
                for (Eigen::Index g = 0; g < groups; ++g) {
                    a_out[g * r_count + r] = a[static_cast<std::size_t>(g)];
                    sum_out[g * r_count + r] = sums[static_cast<std::size_t>(g)];
                }
                pack_row_quads<S>(xq.data(), words, r, r_count, quads);
            }
        }
    });
    return blocks;
}

/// Packs weight rows [n0, n0 + NR) of q (rows past q.rows() as zeros) into one panel (panel_units(K, NR)
/// units at `panel`, the record layout above). `unpacked` is scratch of NR * K bytes (used for 3, 5 and
/// 6 bits). Ops (detail/arch/int8.hpp) transposes the words.
template <class Ops, int NR, int GroupSize, int Bits>
void pack_weight_panel_int8(const QuantizedView<MlxAffine<GroupSize, Bits>>& q, Eigen::Index n0, std::uint32_t* panel,
                            std::uint8_t* unpacked) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    static_assert(sizeof(float) == 4, "pack_weight_panel_int8: floats are moved as 32-bit words");
    const Eigen::Index N = q.rows(), K = q.cols(), groups = K / GroupSize;
    const Eigen::Index rows = std::min<Eigen::Index>(NR, N - n0);
    const std::uint8_t* code_rows[NR];
    const std::uint8_t* scale_rows[NR];
    const std::uint8_t* bias_rows[NR];
    for (Eigen::Index r = 0; r < rows; ++r) {
        if constexpr (layout::packed) {
            code_rows[r] = reinterpret_cast<const std::uint8_t*>(&q.codes(n0 + r, 0));
        } else {
            unpack_codes<Bits>(&q.codes(n0 + r, 0), static_cast<std::size_t>(K), unpacked + r * K);
            code_rows[r] = unpacked + r * K;
        }
        scale_rows[r] = reinterpret_cast<const std::uint8_t*>(&q.scales(n0 + r, 0));
        bias_rows[r] = reinterpret_cast<const std::uint8_t*>(&q.biases(n0 + r, 0));
    }
    constexpr Eigen::Index record = layout::record_units(NR);
    transpose_to_panel_int8<Ops, NR>(code_rows, rows, layout::words(K), layout::words_per_group, record, panel);
    transpose_to_panel_int8<Ops, NR>(scale_rows, rows, groups, 1, record, panel + layout::scales_offset(NR));
    transpose_to_panel_int8<Ops, NR>(bias_rows, rows, groups, 1, record, panel + layout::biases_offset(NR));
}

/// Every panel of q (ceil(N / NR) of them), for Bits in {2, 4, 8} (the words are q's own); threads
/// over panels.
template <class Ops, int NR, int GroupSize, int Bits>
Int8WeightPanels pack_weight_panels_int8(const QuantizedView<MlxAffine<GroupSize, Bits>>& q) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    static_assert(layout::packed, "pack_weight_panels_int8: 3, 5 and 6 bits unpack codes per call instead");
    Int8WeightPanels all;
    all.columns = NR;
    all.panels = (q.rows() + NR - 1) / NR;
    all.panel_units = layout::panel_units(q.cols(), NR);
    all.units.resize(static_cast<std::size_t>(all.panels * all.panel_units));
    parallel_for(static_cast<std::size_t>(all.panels), 1, [&](std::size_t begin, std::size_t end) {
        for (auto p = static_cast<Eigen::Index>(begin); p < static_cast<Eigen::Index>(end); ++p)
            pack_weight_panel_int8<Ops, NR>(q, p * NR, all.units.data() + p * all.panel_units, nullptr);
    });
    return all;
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
