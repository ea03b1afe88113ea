// The threaded drivers of the int8-activation GEMM (docs/numerics.md N11): x quantized and packed once
// per call (qgemm_i8_panel.hpp), weight rows packed a few panels at a time per thread (qgemm_i8) or
// once per layer (qgemm_i8_prepacked, Int8WeightPanels), and the microkernel (qgemm_i8_ukernel.hpp)
// run over every row block against a few panels at a time while they are in L2. Threads take ranges of panels (NR output columns each); each output is computed by one tile
// in a fixed order, so the thread count never changes a result.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../../quantized_matrix.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "qgemm_i8_panel.hpp"
#include "qgemm_i8_ukernel.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The tiles of panels [p_begin, p_end) (`codes`, `scales`, `biases`: panel p_begin's; consecutive
/// panels at panel_words / panel_groups) for every row block: out[m * out_stride + n] for n < N. With
/// fetch_panels (panels not just packed by this thread), the first row block prefetches them.
template <class Ops, int GroupSize, int Bits>
void int8_panel_tiles(const Int8RowBlocks& blocks, const std::uint32_t* codes, const float* scales,
                      const float* biases, Eigen::Index panel_words, Eigen::Index panel_groups, Eigen::Index p_begin,
                      Eigen::Index p_end, Eigen::Index N, bool fetch_panels, float* out, Eigen::Index out_stride) {
    using shape = Int8TileShape<Ops>;
    constexpr int MR = shape::rows, NJ = shape::vectors, NR = shape::columns;
    const Eigen::Index K = blocks.quads_per_row * 4, groups = blocks.groups;
    alignas(64) float tile[MR * NR];
    for (Eigen::Index block = 0; block < blocks.count; ++block) {
        const Eigen::Index rows = blocks.rows(block), m0 = blocks.first_row(block);
        const std::int8_t* quads = blocks.quads.data() + m0 * K;
        const float* a = blocks.a.data() + m0 * groups;
        const float* x_sum = blocks.x_sum.data() + m0 * groups;
        for (Eigen::Index p = p_begin; p < p_end; ++p) {
            const Eigen::Index i = p - p_begin;
            static_for<MR>([&](auto r_constant) {
                constexpr int R = decltype(r_constant)::value + 1;
                if (rows == R)
                    int8_tile<Ops, GroupSize, Bits, R, NJ>(quads, a, x_sum, codes + i * panel_words,
                                                           scales + i * panel_groups, biases + i * panel_groups, groups,
                                                           fetch_panels && block == 0, tile);
            });
            const Eigen::Index columns = std::min<Eigen::Index>(NR, N - p * NR);
            for (Eigen::Index r = 0; r < rows; ++r)
                std::copy(tile + r * NR, tile + r * NR + columns, out + (m0 + r) * out_stride + p * NR);
        }
    }
}

/// Panels walked at a time: about 256 KiB of words, so that they stay in L2 while every row block
/// (MR rows x K bytes, in L1) passes over them.
inline Eigen::Index int8_panels_per_pass(Eigen::Index panel_words) {
    return std::max<Eigen::Index>(1, (Eigen::Index{1} << 16) / panel_words);
}

/// out[m * out_stride + n] = int8 matmul (N11) of x [M, K] (rows with stride x_stride, finite) and q,
/// for any M >= 1, packing the weight panels per call (qgemv_i8.hpp is the row-dot alternative).
template <class Arch, class Ops, int GroupSize, int Bits>
void qgemm_i8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedMatrix<GroupSize, Bits>& q,
              float* out, Eigen::Index out_stride) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    using shape = Int8TileShape<Ops>;
    constexpr int MR = shape::rows, NR = shape::columns;
    const Eigen::Index N = q.rows(), K = q.cols(), groups = K / GroupSize, words = layout::words(K);
    const Int8RowBlocks blocks = pack_activations_int8<Arch, GroupSize, Bits>(x, x_stride, M, K, MR);
    const Eigen::Index panels = (N + NR - 1) / NR;
    const Eigen::Index panel_words = words * NR, panel_groups = groups * NR;
    const Eigen::Index chunk = int8_panels_per_pass(panel_words);
    parallel_for(static_cast<std::size_t>(panels), 1, [&](std::size_t begin, std::size_t end) {
        const Eigen::Index p_begin = static_cast<Eigen::Index>(begin), p_end = static_cast<Eigen::Index>(end);
        const Eigen::Index held = std::min(chunk, p_end - p_begin);
        std::vector<std::uint32_t, xsimd::aligned_allocator<std::uint32_t, 64>> panel_codes(static_cast<std::size_t>(held * panel_words));
        std::vector<float, xsimd::aligned_allocator<float, 64>> panel_scales(static_cast<std::size_t>(held * panel_groups)),
            panel_biases(panel_scales.size());
        std::vector<std::uint8_t> unpacked(layout::packed ? 0 : static_cast<std::size_t>(NR * K));
        for (Eigen::Index p0 = p_begin; p0 < p_end; p0 += chunk) {
            const Eigen::Index p1 = std::min(p0 + chunk, p_end);
            for (Eigen::Index p = p0; p < p1; ++p)
                pack_weight_panel_int8<Ops, NR>(q, p * NR, panel_codes.data() + (p - p0) * panel_words,
                                           panel_scales.data() + (p - p0) * panel_groups,
                                           panel_biases.data() + (p - p0) * panel_groups, unpacked.data());
            int8_panel_tiles<Ops, GroupSize, Bits>(blocks, panel_codes.data(), panel_scales.data(), panel_biases.data(),
                                                   panel_words, panel_groups, p0, p1, N, false, out, out_stride);
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
    const Eigen::Index chunk = int8_panels_per_pass(panels.panel_words);
    parallel_for(static_cast<std::size_t>(panels.panels), 1, [&](std::size_t begin, std::size_t end) {
        for (auto p0 = static_cast<Eigen::Index>(begin); p0 < static_cast<Eigen::Index>(end); p0 += chunk) {
            const Eigen::Index p1 = std::min(p0 + chunk, static_cast<Eigen::Index>(end));
            int8_panel_tiles<Ops, GroupSize, Bits>(blocks, panels.words.data() + p0 * panels.panel_words,
                                                   panels.scales.data() + p0 * panels.panel_groups,
                                                   panels.biases.data() + p0 * panels.panel_groups, panels.panel_words,
                                                   panels.panel_groups, p0, p1, N, true, out, out_stride);
        }
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
