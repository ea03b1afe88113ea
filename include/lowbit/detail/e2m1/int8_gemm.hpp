// The int8-activation GEMM on E2M1 codes, mxfp4's and nvfp4's (docs/numerics.md N11), on the shared
// driver and microkernel (gemm/int8_driver.hpp, gemm/int8_ukernel.hpp). The panels hold the MLX words
// as they are (4-bit codes, S = 2 steps per byte) and one parameter slot per group, the group's scale
// as a float (Format::group_scale: 2^(e - 128) for mxfp4, half the E4M3 scale for nvfp4). The dot
// multiplies unsigned bytes, so the microkernel decodes each code through a 16-byte table to
// u = Format::value(code) + 12, in [0, 24]; the int32 sums of a group start at -12 times the group's
// sum of activation codes (group_start), which leaves the reference's isum exactly:
//   isum = -12 sum_k xq_k + sum_k u_k xq_k   (int32: every partial sum within 24 * 127 * 32)
//   total = fma(fl(s * a), float(isum), total)   per group, in group order (N11, no bias term).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../../formats/minifloats.hpp"
#include "../gemm/int8_activations.hpp"
#include "../gemm/int8_driver.hpp"
#include "../gemm/int8_panels.hpp"
#include "../gemm/int8_ukernel.hpp"
#include "../quantized_view.hpp"
#include "../unroll.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The E2M1 epilogue (the contract in gemm/int8_ukernel.hpp): one parameter slot (the group scale),
/// codes decoded through code_table, the offset removed by starting the sums at it (group_start).
struct E2m1Int8Epilogue : TotalsAreOutputs {
    static constexpr int param_slots = 1;
    static constexpr bool integer_total = false;
    static constexpr std::int32_t offset = 12;  ///< u = value + offset >= 0 for every code
    static constexpr std::array<std::uint8_t, 16> code_table = [] {
        std::array<std::uint8_t, 16> table{};
        for (std::uint32_t code = 0; code < 16; ++code)
            table[code] = static_cast<std::uint8_t>(static_cast<std::int32_t>(E2m1::doubled_value(code)) + offset);
        return table;
    }();
    static_assert(code_table[7] == 24 && code_table[15] == 0, "E2m1Int8Epilogue: u in [0, 24], exact in the dot");

    /// -offset times row m's sum of activation codes in group g (of an MR-row block), in every lane.
    template <class Ops, int MR>
    LOWBIT_ALWAYS_INLINE static typename Ops::vec group_start(const Int8BlockData& rows, Eigen::Index g, int m) {
        return Ops::set1(-offset * rows.code_sums[g * MR + m]);
    }

    template <class Ops, int MR, int NJ>
    LOWBIT_ALWAYS_INLINE static void group(const Int8BlockData& rows, Eigen::Index g, const float* params,
                                           const typename Ops::vec (&acc)[MR][NJ], typename Ops::fvec (&total)[MR][NJ],
                                           typename Ops::vec (&)[MR][NJ]) {
        using fvec = typename Ops::fvec;
        constexpr int L = Ops::lanes;
        fvec s[NJ];
        static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { s[j] = Ops::fload(params + j * L); });
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            const fvec scale = Ops::fbroadcast(rows.a[g * MR + m]);
            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                total[m][j] = Ops::fmadd(Ops::fmul(s[j], scale), Ops::to_float(acc[m][j]), total[m][j]);
            });
        });
    }
};

template <E2m1Format Format>
using E2m1Int8Layout = Int8PanelLayout<Format::group_size, Format::bits, E2m1Int8Epilogue::param_slots>;

/// Packs weight rows [n0, n0 + NR) of q (rows past q.rows() as zeros) into one panel
/// (E2m1Int8Layout<Format>::panel_units(K, NR) units): the words transposed by Ops, the scales decoded
/// in place.
template <class Ops, int NR, E2m1Format Format>
void pack_weight_panel_int8(const QuantizedView<Format>& q, Eigen::Index n0, std::uint32_t* panel) {
    using layout = E2m1Int8Layout<Format>;
    const Eigen::Index N = q.rows(), K = q.cols(), groups = q.groups_per_row();
    const Eigen::Index rows = std::min<Eigen::Index>(NR, N - n0);
    const std::uint8_t* code_rows[NR];
    for (Eigen::Index r = 0; r < rows; ++r) code_rows[r] = reinterpret_cast<const std::uint8_t*>(&q.codes(n0 + r, 0));
    constexpr Eigen::Index record = layout::record_units(NR);
    transpose_to_panel_int8<Ops, NR>(code_rows, rows, layout::words(K), layout::words_per_group, record, panel);
    for (Eigen::Index g = 0; g < groups; ++g) {
        std::uint32_t* slot = panel + g * record + layout::scales_offset(NR);
        for (Eigen::Index r = 0; r < NR; ++r)
            slot[r] = r < rows ? std::bit_cast<std::uint32_t>(Format::group_scale(q.scales(n0 + r, g))) : 0u;
    }
}

/// The int8 GEMM of the E2M1 formats, as dispatch/panel_int8.hpp runs it.
struct E2m1Int8Gemm {
    /// Every panel of q, once for a layer (Int8PanelCache); threads over panels.
    template <class Ops, int NR, E2m1Format Format>
    static Int8WeightPanels pack_panels(const QuantizedView<Format>& q) {
        return pack_all_int8_panels<NR, Format::group_size, Format::bits, E2m1Int8Epilogue::param_slots>(
            q.rows(), q.cols(),
            [&](Eigen::Index n0, std::uint32_t* panel) { pack_weight_panel_int8<Ops, NR>(q, n0, panel); });
    }

    /// out[m * out_stride + n] = int8 matmul (N11) of x [M, K] (row stride x_stride, finite) and q, for
    /// any M >= 1, packing the weight panels per call.
    template <class Arch, class Ops, E2m1Format Format>
    static void gemm(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q, float* out,
                     Eigen::Index out_stride) {
        constexpr int NR = Int8TileShape<Ops>::columns;
        const Int8RowBlocks blocks = activations<Arch, Ops, Format>(x, x_stride, M, q.cols());
        int8_gemm_packing_panels<Ops, Format::group_size, Format::bits>(
            blocks, q.rows(), q.cols(), 0,
            [&](Eigen::Index n0, std::uint32_t* panel, std::uint8_t*) {
                pack_weight_panel_int8<Ops, NR>(q, n0, panel);
            },
            E2m1Int8Epilogue{}, out, out_stride);
    }

    /// gemm on panels packed once (pack_panels with this Ops' NR): the same tiles, so the same result.
    template <class Arch, class Ops, E2m1Format Format>
    static void gemm_prepacked(const float* x, Eigen::Index x_stride, Eigen::Index M, const Int8WeightPanels& panels,
                               const QuantizedView<Format>& q, float* out, Eigen::Index out_stride) {
        const Int8RowBlocks blocks = activations<Arch, Ops, Format>(x, x_stride, M, q.cols());
        int8_gemm_on_panels<Ops, Format::group_size, Format::bits>(blocks, panels, q.rows(), E2m1Int8Epilogue{}, out,
                                                                   out_stride);
    }

private:
    /// Activations of x [M, K] (finite) for the tiles of Format: codes, scales and code sums per group.
    template <class Arch, class Ops, E2m1Format Format>
    static Int8RowBlocks activations(const float* x, Eigen::Index x_stride, Eigen::Index M, Eigen::Index K) {
        return pack_activations_int8<Arch, Format::group_size, E2m1Int8Layout<Format>::steps, Int8RowSums::codes>(
            x, x_stride, M, K, Int8TileShape<Ops>::split);
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
