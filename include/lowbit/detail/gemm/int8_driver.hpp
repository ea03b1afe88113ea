// The threaded drivers of the int8-activation GEMM (docs/numerics.md N11, N14), for every format on it:
// the microkernel (int8_ukernel.hpp) run over every row block of packed activations (int8_panels.hpp)
// against a few weight panels at a time while they are in L2; one row (the GEMV) walks two panels side
// by side instead. Threads take ranges of panels (NR output columns each); each output is computed by
// one tile in a fixed order, so neither the thread count nor the pairing of panels changes a result.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "int8_panels.hpp"
#include "int8_ukernel.hpp"
#include "int8_weight_panels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// int8_panel_tiles for one activation row (M = 1, one row block): panel i beside panel i + half of
/// [p_begin, p_end) (an odd last panel alone), so that the tiles read two sequential streams, with no
/// software prefetch. Against one panel at a time with the prefetch (q4 g64 4096 x 4096, one program,
/// Zen 5): over DRAM 1.07 to 1.12 times as fast at 1 thread (q8 0.98 to 1.07) and 1.01 to 1.02 at 2,
/// over L3 1.22 to 1.42 (q8 1.14 to 1.20). Pairing M = 2 as well gained for q4 (DRAM 1.09 to 1.11, L3
/// 1.26 to 1.29) but lost a fifth for q8 over DRAM (benchmarks/README.md).
template <class Ops, int GroupSize, int Bits, class Epilogue>
void int8_panel_tiles_one_row(const Int8RowBlocks& blocks, const std::uint32_t* panels, Eigen::Index panel_units,
                              Eigen::Index p_begin, Eigen::Index p_end, Eigen::Index N, const Epilogue& epilogue,
                              float* out) {
    using shape = Int8TileShape<Ops>;
    constexpr int NJ = shape::vectors, NR = shape::columns;
    const Eigen::Index half = (p_end - p_begin) / 2;
    const Int8BlockData rows = Int8BlockData::of(blocks, 0);
    alignas(64) float tiles[2 * NR];
    auto store = [&](const float* tile, Eigen::Index p) {
        epilogue.store(tile, std::min<Eigen::Index>(NR, N - p * NR), 0, p * NR, out + p * NR);
    };
    auto run = [&]<int NP>(std::integral_constant<int, NP>, Eigen::Index i) {
        int8_tile<Ops, GroupSize, Bits, Epilogue, 1, NJ, NP>(epilogue, rows, panels + i * panel_units, blocks.groups,
                                                             false, tiles, half * panel_units);
    };
    for (Eigen::Index i = 0; i < half; ++i) {
        run(std::integral_constant<int, 2>{}, i);
        store(tiles, p_begin + i);
        store(tiles + NR, p_begin + half + i);
    }
    if ((p_end - p_begin) % 2 != 0) {
        run(std::integral_constant<int, 1>{}, p_end - 1 - p_begin);
        store(tiles, p_end - 1);
    }
}

/// The tiles of panels [p_begin, p_end) (`panels`: panel p_begin's first unit; consecutive panels
/// panel_units apart) for every row block: out[m * out_stride + n] for n < N. With fetch_panels (panels
/// not just packed by this thread), the first row block prefetches them. One row: the paired walk of
/// int8_panel_tiles_one_row, without prefetch. Epilogue: AffineInt8Epilogue or the ternary one.
template <class Ops, int GroupSize, int Bits, class Epilogue>
void int8_panel_tiles(const Int8RowBlocks& blocks, const std::uint32_t* panels, Eigen::Index panel_units,
                      Eigen::Index p_begin, Eigen::Index p_end, Eigen::Index N, bool fetch_panels,
                      const Epilogue& epilogue, float* out, Eigen::Index out_stride) {
    using shape = Int8TileShape<Ops>;
    constexpr int MR = shape::widest_rows, NJ = shape::vectors, NR = shape::columns;
    if (blocks.count == 1 && blocks.rows(0) == 1)
        return int8_panel_tiles_one_row<Ops, GroupSize, Bits>(blocks, panels, panel_units, p_begin, p_end, N, epilogue,
                                                              out);
    alignas(64) float tile[MR * NR];
    for (Eigen::Index block = 0; block < blocks.count; ++block) {
        const Eigen::Index rows = blocks.rows(block), m0 = blocks.first_row(block);
        const Int8BlockData data = Int8BlockData::of(blocks, block);
        for (Eigen::Index p = p_begin; p < p_end; ++p) {
            const Eigen::Index i = p - p_begin;
            static_for<MR>([&](auto r_constant) {
                constexpr int R = decltype(r_constant)::value + 1;
                if (rows == R)
                    int8_tile<Ops, GroupSize, Bits, Epilogue, R, NJ>(epilogue, data, panels + i * panel_units,
                                                                     blocks.groups, fetch_panels && block == 0, tile);
            });
            const Eigen::Index columns = std::min<Eigen::Index>(NR, N - p * NR);
            for (Eigen::Index r = 0; r < rows; ++r)
                epilogue.store(tile + r * NR, columns, m0 + r, p * NR, out + (m0 + r) * out_stride + p * NR);
        }
    }
}

/// Panels walked at a time: about 256 KiB, so that they stay in L2 while every row block (MR rows x K
/// bytes, in L1) passes over them.
inline Eigen::Index int8_panels_per_pass(Eigen::Index panel_units) {
    return std::max<Eigen::Index>(1, (Eigen::Index{1} << 16) / panel_units);
}

/// The int8 GEMM of packed activations (blocks) and panels packed once (N output columns), for any
/// M >= 1, threads over panels: what qgemm_i8_prepacked and the ternary matmul run.
template <class Ops, int GroupSize, int Bits, class Epilogue>
void int8_gemm_on_panels(const Int8RowBlocks& blocks, const Int8WeightPanels& panels, Eigen::Index N,
                         const Epilogue& epilogue, float* out, Eigen::Index out_stride) {
    // Passes keep panels in L2 while the row blocks go over them; one row is one block, so its pass is
    // the thread's whole range (pairs half the range apart: two distant streams; pairs within a pass of
    // 256 KiB ran slower over DRAM).
    const bool one_row = blocks.count == 1 && blocks.rows(0) == 1;
    const Eigen::Index chunk = one_row ? panels.panels : int8_panels_per_pass(panels.panel_units);
    parallel_for(static_cast<std::size_t>(panels.panels), 1, [&](std::size_t begin, std::size_t end) {
        for (auto p0 = static_cast<Eigen::Index>(begin); p0 < static_cast<Eigen::Index>(end); p0 += chunk) {
            const Eigen::Index p1 = std::min(p0 + chunk, static_cast<Eigen::Index>(end));
            int8_panel_tiles<Ops, GroupSize, Bits>(blocks, panels.units.data() + p0 * panels.panel_units,
                                                   panels.panel_units, p0, p1, N, true, epilogue, out, out_stride);
        }
    });
}

/// Every weight panel of an N x K matrix (ceil(N / NR) of them), packed once for the layer's cache;
/// pack_panel(n0, panel) packs rows [n0, n0 + NR) into one panel (as for int8_gemm_packing_panels,
/// without scratch). Threads over panels.
template <int NR, int GroupSize, int Bits, int ParamSlots, class PackPanel>
Int8WeightPanels pack_all_int8_panels(Eigen::Index N, Eigen::Index K, const PackPanel& pack_panel) {
    Int8WeightPanels all;
    all.columns = NR;
    all.panels = (N + NR - 1) / NR;
    all.panel_units = Int8PanelLayout<GroupSize, Bits, ParamSlots>::panel_units(K, NR);
    all.units.resize(static_cast<std::size_t>(all.panels * all.panel_units));
    parallel_for(static_cast<std::size_t>(all.panels), 1, [&](std::size_t begin, std::size_t end) {
        for (auto p = static_cast<Eigen::Index>(begin); p < static_cast<Eigen::Index>(end); ++p)
            pack_panel(p * NR, all.units.data() + p * all.panel_units);
    });
    return all;
}

/// The int8 GEMM of packed activations (blocks) and weight panels packed per call, a few at a time per
/// thread while they are in cache (N output columns, K inputs), for any M >= 1; threads over panels.
/// pack_panel(n0, panel, scratch) packs weight rows [n0, n0 + NR) into one panel, the format's record
/// layout (Int8PanelLayout<GroupSize, Bits, Epilogue::param_slots>), with scratch_bytes of scratch.
template <class Ops, int GroupSize, int Bits, class Epilogue, class PackPanel>
void int8_gemm_packing_panels(const Int8RowBlocks& blocks, Eigen::Index N, Eigen::Index K, std::size_t scratch_bytes,
                              const PackPanel& pack_panel, const Epilogue& epilogue, float* out,
                              Eigen::Index out_stride) {
    using layout = Int8PanelLayout<GroupSize, Bits, Epilogue::param_slots>;
    constexpr int NR = Int8TileShape<Ops>::columns;
    const Eigen::Index panels = (N + NR - 1) / NR, panel_units = layout::panel_units(K, NR);
    const Eigen::Index chunk = int8_panels_per_pass(panel_units);
    parallel_for(static_cast<std::size_t>(panels), 1, [&](std::size_t begin, std::size_t end) {
        const Eigen::Index p_begin = static_cast<Eigen::Index>(begin), p_end = static_cast<Eigen::Index>(end);
        const Eigen::Index held = std::min(chunk, p_end - p_begin);
        std::vector<std::uint32_t, xsimd::aligned_allocator<std::uint32_t, 64>> held_panels(
            static_cast<std::size_t>(held * panel_units));
        std::vector<std::uint8_t> scratch(scratch_bytes);
        for (Eigen::Index p0 = p_begin; p0 < p_end; p0 += chunk) {
            const Eigen::Index p1 = std::min(p0 + chunk, p_end);
            for (Eigen::Index p = p0; p < p1; ++p)
                pack_panel(p * NR, held_panels.data() + (p - p0) * panel_units, scratch.data());
            int8_panel_tiles<Ops, GroupSize, Bits>(blocks, held_panels.data(), panel_units, p0, p1, N, false, epilogue,
                                                   out, out_stride);
        }
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
