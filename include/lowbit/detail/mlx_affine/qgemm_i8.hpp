// The threaded driver of the int8-activation GEMM (docs/numerics.md N11): x quantized and packed once
// per call (qgemm_i8_panel.hpp), weight rows packed a few panels at a time per thread, and the
// microkernel (qgemm_i8_ukernel.hpp) run over every row block against those panels while they are
// in L2. Threads take ranges of panels (NR output columns each); each output is computed by one tile
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

/// out[m * out_stride + n] = int8 matmul (N11) of x [M, K] (rows with stride x_stride, finite) and q,
/// for any M >= 1 (the dispatch uses it from a few rows up; qgemv_i8.hpp below that).
template <class Arch, class Ops, int GroupSize, int Bits>
void qgemm_i8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedMatrix<GroupSize, Bits>& q,
              float* out, Eigen::Index out_stride) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    using shape = Int8TileShape<Ops>;
    constexpr int MR = shape::rows, NJ = shape::vectors, NR = shape::columns;
    const Eigen::Index N = q.rows(), K = q.cols(), groups = K / GroupSize, words = layout::words(K);
    const Int8RowBlocks blocks = pack_activations_int8<Arch, GroupSize, Bits>(x, x_stride, M, K, MR);
    const Eigen::Index panels = (N + NR - 1) / NR;
    // Panels packed at a time: about 256 KiB of words, so that they stay in L2 while every row block
    // (MR rows x K bytes, in L1) passes over them.
    const Eigen::Index panel_words = words * NR, panel_groups = groups * NR;
    const Eigen::Index chunk = std::max<Eigen::Index>(1, (Eigen::Index{1} << 16) / panel_words);
    parallel_for(static_cast<std::size_t>(panels), 1, [&](std::size_t begin, std::size_t end) {
        const Eigen::Index p_begin = static_cast<Eigen::Index>(begin), p_end = static_cast<Eigen::Index>(end);
        const Eigen::Index held = std::min(chunk, p_end - p_begin);
        std::vector<std::uint32_t, xsimd::aligned_allocator<std::uint32_t, 64>> panel_codes(static_cast<std::size_t>(held * panel_words));
        std::vector<float, xsimd::aligned_allocator<float, 64>> panel_scales(static_cast<std::size_t>(held * panel_groups)),
            panel_biases(panel_scales.size());
        std::vector<std::uint8_t> unpacked(layout::packed ? 0 : static_cast<std::size_t>(NR * K));
        alignas(64) float tile[MR * NR];
        for (Eigen::Index p0 = p_begin; p0 < p_end; p0 += chunk) {
            const Eigen::Index p1 = std::min(p0 + chunk, p_end);
            for (Eigen::Index p = p0; p < p1; ++p)
                pack_weight_panel_int8<Ops, NR>(q, p * NR, panel_codes.data() + (p - p0) * panel_words,
                                           panel_scales.data() + (p - p0) * panel_groups,
                                           panel_biases.data() + (p - p0) * panel_groups, unpacked.data());
            for (Eigen::Index block = 0; block < blocks.count; ++block) {
                const Eigen::Index rows = blocks.rows(block), m0 = blocks.first_row(block);
                const std::int8_t* quads = blocks.quads.data() + m0 * K;
                const float* a = blocks.a.data() + m0 * groups;
                const float* x_sum = blocks.x_sum.data() + m0 * groups;
                for (Eigen::Index p = p0; p < p1; ++p) {
                    const std::uint32_t* codes = panel_codes.data() + (p - p0) * panel_words;
                    const float* scales = panel_scales.data() + (p - p0) * panel_groups;
                    const float* biases = panel_biases.data() + (p - p0) * panel_groups;
                    static_for<MR>([&](auto r_constant) {
                        constexpr int R = decltype(r_constant)::value + 1;
                        if (rows == R)
                            int8_tile<Ops, GroupSize, Bits, R, NJ>(quads, a, x_sum, codes, scales, biases, groups, tile);
                    });
                    const Eigen::Index columns = std::min<Eigen::Index>(NR, N - p * NR);
                    for (Eigen::Index r = 0; r < rows; ++r)
                        std::copy(tile + r * NR, tile + r * NR + columns, out + (m0 + r) * out_stride + p * NR);
                }
            }
        }
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
