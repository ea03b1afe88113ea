// The threaded drivers of the f32-activation matmul on the packed codes of any format (codes read through
// F32Codes<Format>, f32_codes.hpp; MLX affine and mxfp4):
//   qgemv_f32 (M = 1, codes in whole words): group sums and the permuted x, then qgemv_f32_rows over
//     ranges of output rows (about 256 KiB of codes each);
//   qgemv_f32_batch (small M, codes in whole words): the GEMV's layout with each unpacked code vector
//     shared by several rows of x (f32_gemv_batch.hpp: up to 4 rows two columns at a time, or on
//     AVX-512 up to 8 two columns at a time in L1-sized slices of the row), threads over output columns;
//   qgemm_f32 (every other case): tiles of MC rows x NC columns over threads; per tile, slice of about
//     KC codes and NR columns one panel block of scaled codes and biases (f32_panel.hpp), built into
//     L1 right before every register block (QgemmF32Ukernel) of the tile's rows passes over it (on
//     AVX-512, unpacked inside the last register block over the block before).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "f32_gemv.hpp"
#include "f32_gemv_batch.hpp"
#include "f32_panel.hpp"
#include "f32_ukernel.hpp"
#include "f32_x_panel.hpp"
#include "group_sums.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// out[n] = x * dequantize(q)^T for one row x (contiguous, q.cols() floats), threads over output rows.
template <class Arch, class Format>
void qgemv_f32(const float* x, const QuantizedView<Format>& q, float* out) {
    constexpr int GroupSize = Format::group_size, Bits = Format::bits;
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    const Index K = q.cols(), N = q.rows();
    std::vector<float> x_sum(static_cast<std::size_t>(K / GroupSize));
    group_sums<Arch, GroupSize>(x, K, 1, K, x_sum.data());
    const Index lanes = gemv_chunks_with_tail<Arch, Format>(K) * W * (32 / Bits);
    // Aligned: qgemv_f32_rows loads it once per code step, and a split load per step is measurably slower
    // (benchmarks/README.md).
    std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> x_lanes(
        static_cast<std::size_t>(std::max<Index>(lanes, 1)));
    permute_x_for_gemv<Arch, Format>(x, K, x_lanes.data());
    parallel_for(static_cast<std::size_t>(N), gemv_row_grain<Format>(K), [&](std::size_t begin, std::size_t end) {
        qgemv_f32_rows<Arch, Format>(q, x_lanes.data(), x_sum.data(), static_cast<Index>(begin),
                                     static_cast<Index>(end), out);
    });
}

/// out[m * out_stride + n] = (x * dequantize(q)^T)[m, n] for small M (Bits in {2, 4, 8}): the batch
/// GEMV. Threads over output columns; within a thread, tiles of output columns whose codes stay in L2
/// while every block of x rows (max_rows, or deep_rows on AVX-512) passes over them.
template <class Arch, class Format>
void qgemv_f32_batch(const float* x, Index x_stride, Index M, const QuantizedView<Format>& q, float* out,
                     Index out_stride) {
    constexpr int GroupSize = Format::group_size, Bits = Format::bits;
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    constexpr int max_rows = QgemvF32Batch<Arch>::max_rows;
    const Index K = q.cols(), N = q.rows(), groups = K / GroupSize;
    std::vector<float> x_sum(static_cast<std::size_t>(M * groups));
    group_sums<Arch, GroupSize>(x, x_stride, M, K, x_sum.data());
    // Each permuted row padded to a whole number of cache lines, so every row starts aligned.
    const Index lanes = gemv_chunks_with_tail<Arch, Format>(K) * W * (32 / Bits);
    const Index lanes_stride = (std::max<Index>(lanes, 1) + 15) / 16 * 16;
    std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> x_lanes(
        static_cast<std::size_t>(M * lanes_stride));
    for (Index m = 0; m < M; ++m)
        permute_x_for_gemv<Arch, Format>(x + m * x_stride, K, x_lanes.data() + m * lanes_stride);

    // Row blocks: deep_rows rows at a time where the deep kernel exists (a last block of fewer than
    // deep_min_rows rows by the 2-column kernel), else max_rows by the 2-column kernel.
    constexpr int deep_rows = QgemvF32Batch<Arch>::deep_rows, deep_min_rows = QgemvF32Batch<Arch>::deep_min_rows;
    constexpr int block_rows = deep_rows > 0 ? deep_rows : max_rows;
    const BatchGemvSplit split = batch_gemv_split(K * Bits / 8, M, block_rows);
    const Index tile = split.tile;
    parallel_for(static_cast<std::size_t>(N), split.grain, [&](std::size_t begin, std::size_t end) {
        std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> totals(
            deep_rows > 0 && M >= deep_min_rows ? static_cast<std::size_t>(tile * deep_rows * W) : 0);
        for (auto n0 = static_cast<Index>(begin); n0 < static_cast<Index>(end); n0 += tile) {
            const Index n1 = std::min<Index>(n0 + tile, static_cast<Index>(end));
            for (Index m = 0; m < M; m += block_rows) {
                const Index rows = std::min<Index>(block_rows, M - m);
                static_for<block_rows + 1>([&](auto count) {
                    constexpr int Rows = decltype(count)::value;
                    if constexpr (Rows > 0 && (deep_rows == 0 || Rows < deep_min_rows)) {
                        if (rows == Rows)
                            qgemv_f32_batch_rows<Arch, Format, Rows>(q, x_lanes.data() + m * lanes_stride, lanes_stride,
                                                                     x_sum.data() + m * groups, n0, n1,
                                                                     out + m * out_stride, out_stride);
                    } else if constexpr (Rows >= deep_min_rows) {
                        if (rows == Rows)
                            qgemv_f32_batch_rows_deep<Arch, Format, Rows>(
                                q, x_lanes.data() + m * lanes_stride, lanes_stride, x_sum.data() + m * groups, n0, n1,
                                static_cast<Index>(end), out + m * out_stride, out_stride, totals.data());
                    }
                });
            }
        }
    });
}

/// out[m * out_stride + n] = (x * dequantize(q)^T)[m, n]; x rows contiguous with stride x_stride.
/// Threads over tiles of MC rows x NC columns.
template <class Arch, class Format>
void qgemm_f32(const float* x, Index x_stride, Index M, const QuantizedView<Format>& q, float* out, Index out_stride) {
    constexpr int GroupSize = Format::group_size, Bits = Format::bits;
    using blocking = QgemmF32Ukernel<Arch>;
    constexpr int MR = blocking::MR, NR = blocking::NR;
    constexpr int words_per_group = Format::words_per_group;
    const Index N = q.rows(), K = q.cols(), groups = K / GroupSize;
    std::vector<float> x_sum(static_cast<std::size_t>(M * groups));
    group_sums<Arch, GroupSize>(x, x_stride, M, K, x_sum.data());

    const Index n_tiles = (N + blocking::NC - 1) / blocking::NC;
    const Index m_blocks = (M + blocking::MC - 1) / blocking::MC;
    // x packed once per call in the register blocks' order.
    const PackedX<Arch, GroupSize> x_packed(x, x_stride, M, x_sum.data(), groups);

    // Tiny problems stay on one thread: a tile must be worth handing to a worker (about 2 MFLOP).
    const double tile_flops = 2.0 * double(std::min(M, blocking::MC)) * double(std::min(N, blocking::NC)) * double(K);
    const std::size_t grain = tile_flops >= 2e6 ? 1 : static_cast<std::size_t>(n_tiles * m_blocks);
    constexpr Index slice_groups = blocking::template slice_groups<GroupSize>;
    parallel_for(static_cast<std::size_t>(n_tiles * m_blocks), grain, [&](std::size_t begin, std::size_t end) {
        // One panel block of NR columns. Aligned, so that no vector load or store of the panel or the
        // transposed words splits a cache line.
        std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> panel(
            static_cast<std::size_t>(panel_floats<Arch, GroupSize>(slice_groups)));
        PanelScratch<Arch, Format> scratch(groups, slice_groups);
        for (std::size_t task = begin; task < end; ++task) {
            const Index n0 = static_cast<Index>(task) / m_blocks * blocking::NC;
            const Index m0 = static_cast<Index>(task) % m_blocks * blocking::MC;
            const Index nc = std::min(blocking::NC, N - n0), mc = std::min(blocking::MC, M - m0);
            const Index panel_stride = (nc + NR - 1) / NR * NR;
            gather_tile_scales<Arch>(q, n0, nc, scratch);
            auto block_scales = [&](Index g0, Index j) {
                return PanelBlockScales{scratch.scales_t.data() + g0 * blocking::NC + j,
                                        scratch.biases_t.data() + g0 * blocking::NC + j};
            };
            for (Index g0 = 0; g0 < groups; g0 += slice_groups) {
                const Index slice = std::min(slice_groups, groups - g0);
                // Columns outside, rows inside: each NR-column block of the slice is built right before
                // the tile's rows pass over it, so it goes from the builder's stores to the register
                // blocks' loads in L1 (building the slice's whole panel first, 266 KiB through L2, took
                // 0.99 to 1.04 times as long for q4 and 1.11 times for q8 at M = 32; benchmarks/README.md).
                for (Index j = 0; j < panel_stride; j += NR) {
                    // Where fuses_panel_build: the tile's next block (the next NR columns, or the next
                    // slice's first ones) is unpacked inside the last register block over this one, each
                    // word's rows right after that block has read them, so that the unpacking runs
                    // beside the fmas instead of after them (benchmarks/README.md). Its words and scales
                    // are gathered first; only the tile's first block is built on its own.
                    const bool slice_ends = j + NR >= panel_stride;
                    const Index next_g0 = slice_ends ? g0 + slice : g0, next_j = slice_ends ? 0 : j + NR;
                    const Index next_slice = std::min(slice_groups, groups - next_g0);
                    const bool unpack_next = fuses_panel_build<Arch, Format> && next_g0 < groups;
                    if (!fuses_panel_build<Arch, Format> || (g0 == 0 && j == 0))
                        build_panel<Arch, Format>(q, g0, slice, n0 + j, std::min<Index>(NR, nc - j), panel.data(),
                                                  scratch, block_scales(g0, j));
                    if (unpack_next)
                        gather_panel_words<Arch>(q, next_g0, next_slice, n0 + next_j, std::min<Index>(NR, nc - next_j),
                                                 scratch);
                    const PanelBlockScales next_scales = block_scales(next_g0, next_j);
                    const float* panel_block = panel.data();
                    auto block = [&]<int Rows>(std::integral_constant<int, Rows>, Index m) {
                        auto run = [&]<int Chunk, class AfterChunk>(AfterChunk after_chunk) {
                            blocking::template run<Rows, GroupSize, Chunk>(
                                panel_block, slice, x_packed.block(m, Rows, g0), out + m * out_stride + n0 + j,
                                out_stride, std::min<Index>(NR, nc - j), g0 == 0, after_chunk);
                        };
                        if constexpr (fuses_panel_build<Arch, Format>) {
                            if (unpack_next && m + Rows == m0 + mc) {
                                // The next slice may be shorter (the last one of K): groups past it stay.
                                run.template operator()<32 / Bits>([&](Index i, int c) LOWBIT_ALWAYS_INLINE {
                                    if (i >= next_slice) return;
                                    if (c < words_per_group)
                                        unpack_panel_word<Arch>(scratch, next_scales, i, c, panel.data());
                                    else
                                        store_panel_biases<Arch, GroupSize>(next_scales, i, panel.data());
                                });
                                return;
                            }
                        }
                        run.template operator()<GroupSize>(typename blocking::NoHook{});
                    };
                    Index m = m0;
                    for (; m + MR <= m0 + mc; m += MR) block(std::integral_constant<int, MR>{}, m);
                    const Index rest = m0 + mc - m;
                    static_for<MR>([&](auto rows) {
                        if constexpr (decltype(rows)::value > 0)
                            if (rest == decltype(rows)::value) block(rows, m);
                    });
                }
            }
        }
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
