// The ternary x int8 matmul (docs/numerics.md N14) on the shared int8 GEMM of the MLX affine path
// (int8_gemm.hpp: panels, microkernel, threaded driver). What is ternary's own is here: the weight
// panels, the activation blocks and the epilogue.
//
// A ternary weight t is the 2-bit code u = t + 1 (0..2), so a ternary row is an MLX 2-bit row of
// group size 64 (both I2 and TQ1 unpack into it once per layer: pack_ternary_panels), and the
// microkernel's int32 sum of a group is raw = sum u * xq; the ternary sum is raw - sum xq (the
// activation code sum of the group, or of the row). The epilogue then applies N14's arithmetic
// (reference.hpp), so the outputs are the reference's bit for bit:
//   per group:  p = fma(float(raw_g - xsum_g), gamma[n, g], p), g ascending (gamma: the record's one
//               parameter slot); y = fma(p, a[m], bias[n]);
//   per tensor: the raw sums of the groups are added in int32 (at most 2 * 127 * K < 2^31 for K <= 2^22,
//               ternary::max_cols), p = fl(float(raw - xsum) * gamma), y = fma(p, a[m], bias[n]).
// Rows are padded to whole groups of 64 with u = 0 against zero activation codes.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../gemm/int8_driver.hpp"
#include "../gemm/int8_panels.hpp"
#include "../gemm/int8_ukernel.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../threading/parallel.hpp"
#include "activations.hpp"
#include "packing.hpp"
#include "reference.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ternary::kernels {

using detail::kernels::int8_gemm_on_panels;
using detail::kernels::Int8BlockData;
using detail::kernels::Int8RowBlocks;
using detail::kernels::Int8RowSplit;
using detail::kernels::Int8TileShape;
using detail::kernels::pack_row_quads;
using detail::kernels::transpose_to_panel_int8;

/// The ternary rows' int8 GEMM layout: 2-bit codes in groups of 64 (the panel words are MLX 2-bit
/// words), with one parameter slot (gamma) per group in per-group mode, none per tensor.
inline constexpr int panel_group = group_codes;
inline constexpr int panel_bits = 2;

/// Weights per row as the panels hold them: K padded to whole groups of 64.
inline Eigen::Index panel_cols(Eigen::Index K) {
    return (K + panel_group - 1) / panel_group * panel_group;
}

/// The N14 epilogue (top of this file): per group or per tensor. rows.code_sums holds the activation
/// code sums ([g][r] or [r]); a (per row), bias (per output, or null) and gamma (per tensor) are the
/// epilogue's own.
template <bool PerGroup>
struct TernaryInt8Epilogue {
    static constexpr int param_slots = PerGroup ? 1 : 0;
    static constexpr bool integer_total = !PerGroup;
    const float* a = nullptr;
    const float* bias = nullptr;
    float gamma = 0.0f;

    template <class Ops, int MR, int NJ>
    LOWBIT_ALWAYS_INLINE static void group(const Int8BlockData& rows, Eigen::Index g, const float* params,
                                           const typename Ops::vec (&acc)[MR][NJ], typename Ops::fvec (&total)[MR][NJ],
                                           typename Ops::vec (&itotal)[MR][NJ]) {
        constexpr int L = Ops::lanes;
        if constexpr (PerGroup) {
            typename Ops::fvec gammas[NJ];
            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { gammas[j] = Ops::fload(params + j * L); });
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                const typename Ops::vec sum = Ops::set1(rows.code_sums[g * MR + m]);
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                    total[m][j] = Ops::fmadd(Ops::to_float(Ops::sub(acc[m][j], sum)), gammas[j], total[m][j]);
                });
            });
        } else {
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { itotal[m][j] = Ops::add(itotal[m][j], acc[m][j]); });
            });
        }
    }
    template <class Ops, int MR, int NJ>
    LOWBIT_ALWAYS_INLINE void finish(const Int8BlockData& rows, typename Ops::fvec (&total)[MR][NJ],
                                     const typename Ops::vec (&itotal)[MR][NJ]) const {
        if constexpr (!PerGroup) {
            const typename Ops::fvec scale = Ops::fbroadcast(gamma);
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                const typename Ops::vec sum = Ops::set1(rows.code_sums[m]);
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                    total[m][j] = Ops::fmul(Ops::to_float(Ops::sub(itotal[m][j], sum)), scale);
                });
            });
        }
    }
    /// out[c] = fma(p, a[m], bias[n0 + c]) for the tile row's p.
    void store(const float* tile_row, Eigen::Index columns, Eigen::Index m, Eigen::Index n0, float* out) const {
        const float scale = a[m];
        if (bias == nullptr)
            for (Eigen::Index c = 0; c < columns; ++c) out[c] = std::fma(tile_row[c], scale, 0.0f);
        else
            for (Eigen::Index c = 0; c < columns; ++c) out[c] = std::fma(tile_row[c], scale, bias[n0 + c]);
    }
};

/// Every panel of w's rows as 2-bit MLX words (u = t + 1, rows padded to panel_cols with u = 0), for
/// NR rows per panel, with gamma in the records' slot in per-group mode; threads over panels.
template <class Ops, int NR>
Int8WeightPanels pack_ternary_panels(const PackedTernaryView& w) {
    using group_layout = detail::kernels::Int8PanelLayout<panel_group, panel_bits, 1>;
    using tensor_layout = detail::kernels::Int8PanelLayout<panel_group, panel_bits, 0>;
    const Eigen::Index K = panel_cols(w.cols), words = tensor_layout::words(K), groups = K / panel_group;
    const Eigen::Index record_units = w.per_tensor ? tensor_layout::record_units(NR) : group_layout::record_units(NR);
    Int8WeightPanels all;
    all.columns = NR;
    all.panels = (w.rows + NR - 1) / NR;
    all.panel_units = groups * record_units;
    all.units.resize(static_cast<std::size_t>(all.panels * all.panel_units));
    parallel_for(static_cast<std::size_t>(all.panels), 1, [&](std::size_t begin, std::size_t end) {
        std::vector<std::uint32_t> row_words(static_cast<std::size_t>(NR * words));
        // The packed rows' own padding holds u = 1; the panels' holds u = 0 (against zero activations
        // either is exact), so the digits past w.cols are zeroed once.
        std::vector<std::uint8_t> digits(static_cast<std::size_t>(padded_cols(w.format, w.cols)), 0);
        for (auto p = static_cast<Eigen::Index>(begin); p < static_cast<Eigen::Index>(end); ++p) {
            const Eigen::Index n0 = p * NR, rows = std::min<Eigen::Index>(NR, w.rows - n0);
            const std::uint8_t* code_rows[NR];
            const std::uint8_t* scale_rows[NR];
            for (Eigen::Index r = 0; r < rows; ++r) {
                std::uint32_t* out = row_words.data() + r * words;
                const std::uint8_t* packed = w.codes + (n0 + r) * w.row_bytes;
                unpack_row_digits(w.format, packed, w.cols, digits.data());
                std::fill(digits.begin() + w.cols, digits.end(), std::uint8_t{0});
                for (Eigen::Index word = 0; word < words; ++word) {
                    std::uint32_t bits = 0;
                    for (int i = 0; i < 16; ++i)
                        bits |= static_cast<std::uint32_t>(digits[static_cast<std::size_t>(word * 16 + i)]) << (2 * i);
                    out[word] = bits;
                }
                code_rows[r] = reinterpret_cast<const std::uint8_t*>(out);
                if (!w.per_tensor) scale_rows[r] = reinterpret_cast<const std::uint8_t*>(w.scales + (n0 + r) * groups);
            }
            std::uint32_t* panel = all.units.data() + p * all.panel_units;
            transpose_to_panel_int8<Ops, NR>(code_rows, rows, words, tensor_layout::words_per_group, record_units,
                                             panel);
            if (!w.per_tensor)
                transpose_to_panel_int8<Ops, NR>(scale_rows, rows, groups, 1, record_units,
                                                 panel + group_layout::scales_offset(NR));
        }
    });
    return all;
}

/// The activations' codes (act: per-token int8, zero padded) in MR-row blocks of quads for 2-bit panel
/// words, with the code sums the epilogue subtracts (per group of 64, or per row).
inline Int8RowBlocks pack_ternary_activations(const TernaryActivations& act, Eigen::Index K, bool per_group,
                                              Int8RowSplit split) {
    constexpr int S = 4;  // 2-bit codes: four steps per byte
    const Eigen::Index padded = panel_cols(K), words = padded / 16;
    Int8RowBlocks blocks;
    blocks.split(act.rows, split);
    blocks.quads_per_row = padded / 4;
    blocks.groups = padded / panel_group;
    blocks.sum_groups = per_group ? blocks.groups : 1;
    blocks.quads.resize(static_cast<std::size_t>(act.rows * padded));
    blocks.code_sums.resize(static_cast<std::size_t>(act.rows * blocks.sum_groups));
    parallel_for(static_cast<std::size_t>(blocks.count), 1, [&](std::size_t begin, std::size_t end) {
        for (auto block = static_cast<Eigen::Index>(begin); block < static_cast<Eigen::Index>(end); ++block) {
            const Eigen::Index r_count = blocks.rows(block), m0 = blocks.first_row(block);
            std::int8_t* quads = blocks.quads.data() + m0 * padded;
            std::int32_t* sums = blocks.code_sums.data() + m0 * blocks.sum_groups;
            for (Eigen::Index r = 0; r < r_count; ++r) {
                const auto row = static_cast<std::size_t>(m0 + r);
                pack_row_quads<S>(act.row(m0 + r), words, r, r_count, quads);
                if (per_group) {
                    for (Eigen::Index g = 0; g < blocks.groups; ++g)
                        sums[g * r_count + r] =
                            act.group_sums[row * static_cast<std::size_t>(act.groups) + static_cast<std::size_t>(g)];
                } else {
                    sums[r] = act.sums[row];
                }
            }
        }
    });
    return blocks;
}

/// out[m * out_stride + n] = the ternary matmul of act and w on w's panels (pack_ternary_panels with
/// Ops' NR) with the int8 GEMM of Ops; threads inside.
template <class Ops>
void ternary_matmul_int8(const PackedTernaryView& w, const Int8WeightPanels& panels, const TernaryActivations& act,
                         float* out, Eigen::Index out_stride) {
    const Int8RowBlocks blocks = pack_ternary_activations(act, w.cols, !w.per_tensor, Int8TileShape<Ops>::split);
    if (w.per_tensor) {
        const TernaryInt8Epilogue<false> epilogue{act.scales.data(), w.bias, w.scales[0]};
        int8_gemm_on_panels<Ops, panel_group, panel_bits>(blocks, panels, w.rows, epilogue, out, out_stride);
    } else {
        const TernaryInt8Epilogue<true> epilogue{act.scales.data(), w.bias, 0.0f};
        int8_gemm_on_panels<Ops, panel_group, panel_bits>(blocks, panels, w.rows, epilogue, out, out_stride);
    }
}

}  // namespace detail::ternary::kernels
LOWBIT_END_NAMESPACE
