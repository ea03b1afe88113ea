// The int8-activation GEMM on mxfp8's E4M3 codes (docs/numerics.md N11, N18), on the shared driver and
// microkernel (gemm/int8_driver.hpp, gemm/int8_ukernel.hpp). A code's integer value v =
// Mxfp8::value (2^9 times the E4M3 value, an integer, |v| <= 245760 < 2^18) is too wide for the dot's
// unsigned bytes, so each code becomes u = v + 245760 in [0, 491520] (245760 = 480 * 2^9 covers the NaN
// patterns' +-480 too), written as three base-256 digits
// (d0, d1 < 256, d2 <= 7), and each group of 32 codes as three digit planes: the panel GEMM runs over
// K' = 3K inputs, planes d0, d1, d2 of group g at virtual groups 3g, 3g + 1, 3g + 2, and every
// activation group is packed three times (the same codes, the same scale a). The epilogue gathers the
// planes' int32 sums in the integer total and, at the third, takes 245760 times the group's sum of
// activation codes back off, which leaves the reference's isum exactly:
//   isum = P0 + 256 P1 + 65536 P2 - 245760 sum_k xq_k   (P_i = sum_k d_i,k xq_k;
//          |P0 + 256 P1 + 65536 P2| <= 491520 * 127 * 32 < 2^31, |isum| <= 245760 * 127 * 32)
//   total = fma(fl(s * a), float(isum), total)   per group, in group order (float(isum) rounds to nearest
//                                                 even from 2^24 on, as in the reference).
// Three dots per code where 8-bit affine codes take one: the bound on this path's speed (N18).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../../formats/mxfp8.hpp"
#include "../gemm/int8_activations.hpp"
#include "../gemm/int8_driver.hpp"
#include "../gemm/int8_panels.hpp"
#include "../gemm/int8_ukernel.hpp"
#include "../quantized_view.hpp"
#include "../unroll.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The mxfp8 epilogue (the contract in gemm/int8_ukernel.hpp) over virtual groups of one digit plane
/// each: one parameter slot (the group scale 2^(e - 136) as a float, in the record of a group's last
/// plane), the planes gathered in the integer total.
struct Mxfp8Int8Epilogue : TotalsAreOutputs {
    static constexpr int param_slots = 1;
    static constexpr bool integer_total = true;
    static constexpr int planes = 3;
    static constexpr std::int32_t offset = 480 * 512;  ///< u = v + offset >= 0 for every code byte
    /// The three digits of u for every code byte, d0 | d1 << 8 | d2 << 16.
    static constexpr std::array<std::uint32_t, 256> digits = [] {
        std::array<std::uint32_t, 256> table{};
        for (std::uint32_t code = 0; code < 256; ++code)
            table[code] = static_cast<std::uint32_t>(static_cast<std::int32_t>(Mxfp8::value(code)) + offset);
        return table;
    }();
    static_assert(Mxfp8::value(0x7F) == offset && Mxfp8::value(0xFF) == -offset,
                  "Mxfp8Int8Epilogue: 480 * 2^9 is the largest magnitude of a code byte");

    template <class Ops, int MR, int NJ>
    LOWBIT_ALWAYS_INLINE static void group(const Int8BlockData& rows, Eigen::Index g, const float* params,
                                           const typename Ops::vec (&acc)[MR][NJ], typename Ops::fvec (&total)[MR][NJ],
                                           typename Ops::vec (&planes_sum)[MR][NJ]) {
        using fvec = typename Ops::fvec;
        using vec = typename Ops::vec;
        constexpr int L = Ops::lanes;
        const Eigen::Index plane = g % planes;
        if (plane == 0) {
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { planes_sum[m][j] = acc[m][j]; });
            });
            return;
        }
        if (plane == 1) {
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                    planes_sum[m][j] = Ops::add(planes_sum[m][j], Ops::template shift_left<8>(acc[m][j]));
                });
            });
            return;
        }
        fvec s[NJ];
        static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { s[j] = Ops::fload(params + j * L); });
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            const fvec scale = Ops::fbroadcast(rows.a[g * MR + m]);
            const vec removed = Ops::set1(offset * rows.code_sums[g * MR + m]);
            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                const vec all = Ops::add(planes_sum[m][j], Ops::template shift_left<16>(acc[m][j]));
                total[m][j] = Ops::fmadd(Ops::fmul(s[j], scale), Ops::to_float(Ops::sub(all, removed)), total[m][j]);
            });
        });
    }
};

/// The panel layout over virtual groups: 32 digit bytes of 8 bits, one parameter slot.
using Mxfp8Int8Layout = Int8PanelLayout<Mxfp8::group_size, 8, Mxfp8Int8Epilogue::param_slots>;

/// The int8 GEMM of mxfp8, as dispatch/panel_int8.hpp runs it.
struct Mxfp8Int8Gemm {
    static constexpr int planes = Mxfp8Int8Epilogue::planes;

    /// Scratch bytes of pack_panel for NR rows of K codes: their digit planes.
    static std::size_t scratch_bytes(Eigen::Index K, int NR) { return static_cast<std::size_t>(planes * K * NR); }

    /// Packs weight rows [n0, n0 + NR) of q (rows past q.rows() as zeros) into one panel
    /// (Mxfp8Int8Layout::panel_units(3K, NR) units), with scratch_bytes(K, NR) of scratch: each row's
    /// digit planes, group by group, then transposed by Ops; the scale decoded into each group's last
    /// plane's record.
    template <class Ops, int NR>
    static void pack_panel(const QuantizedView<Mxfp8>& q, Eigen::Index n0, std::uint32_t* panel,
                           std::uint8_t* scratch) {
        using layout = Mxfp8Int8Layout;
        constexpr Eigen::Index G = Mxfp8::group_size;
        const Eigen::Index N = q.rows(), K = q.cols(), groups = q.groups_per_row();
        const Eigen::Index rows = std::min<Eigen::Index>(NR, N - n0);
        const std::uint8_t* plane_rows[NR];
        for (Eigen::Index r = 0; r < rows; ++r) {
            const auto* codes = reinterpret_cast<const std::uint8_t*>(&q.codes(n0 + r, 0));
            std::uint8_t* row = scratch + r * planes * K;
            for (Eigen::Index g = 0; g < groups; ++g)
                for (Eigen::Index i = 0; i < G; ++i) {
                    const std::uint32_t u = Mxfp8Int8Epilogue::digits[codes[g * G + i]];
                    for (int d = 0; d < planes; ++d)
                        row[(g * planes + d) * G + i] = static_cast<std::uint8_t>(u >> (8 * d));
                }
            plane_rows[r] = row;
        }
        constexpr Eigen::Index record = layout::record_units(NR);
        transpose_to_panel_int8<Ops, NR>(plane_rows, rows, layout::words(planes * K), layout::words_per_group, record,
                                         panel);
        // The epilogue reads a group's scale at its last plane only; the other planes' slots stay 0.
        for (Eigen::Index g = 0; g < planes * groups; ++g) {
            std::uint32_t* slot = panel + g * record + layout::scales_offset(NR);
            const bool read = g % planes == planes - 1;
            for (Eigen::Index r = 0; r < NR; ++r)
                slot[r] = read && r < rows
                              ? std::bit_cast<std::uint32_t>(Mxfp8::group_scale(q.scales(n0 + r, g / planes)))
                              : 0u;
        }
    }

    /// Every panel of q, once for a layer (Int8PanelCache); threads over panels.
    template <class Ops, int NR>
    static Int8WeightPanels pack_panels(const QuantizedView<Mxfp8>& q) {
        const Eigen::Index K = q.cols();
        return pack_all_int8_panels<NR, Mxfp8::group_size, 8, Mxfp8Int8Epilogue::param_slots>(
            q.rows(), planes * K, [&](Eigen::Index n0, std::uint32_t* panel) {
                std::vector<std::uint8_t> scratch(scratch_bytes(K, NR));
                pack_panel<Ops, NR>(q, n0, panel, scratch.data());
            });
    }

    /// out[m * out_stride + n] = int8 matmul (N11) of x [M, K] (row stride x_stride, finite) and q, for
    /// any M >= 1, packing the weight panels per call.
    template <class Arch, class Ops>
    static void gemm(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Mxfp8>& q, float* out,
                     Eigen::Index out_stride) {
        constexpr int NR = Int8TileShape<Ops>::columns;
        const Int8RowBlocks blocks = activations<Arch, Ops>(x, x_stride, M, q.cols());
        int8_gemm_packing_panels<Ops, Mxfp8::group_size, 8>(
            blocks, q.rows(), planes * q.cols(), scratch_bytes(q.cols(), NR),
            [&](Eigen::Index n0, std::uint32_t* panel, std::uint8_t* scratch) {
                pack_panel<Ops, NR>(q, n0, panel, scratch);
            },
            Mxfp8Int8Epilogue{}, out, out_stride);
    }

    /// gemm on panels packed once (pack_panels with this Ops' NR): the same tiles, so the same result.
    template <class Arch, class Ops>
    static void gemm_prepacked(const float* x, Eigen::Index x_stride, Eigen::Index M, const Int8WeightPanels& panels,
                               const QuantizedView<Mxfp8>& q, float* out, Eigen::Index out_stride) {
        const Int8RowBlocks blocks = activations<Arch, Ops>(x, x_stride, M, q.cols());
        int8_gemm_on_panels<Ops, Mxfp8::group_size, 8>(blocks, panels, q.rows(), Mxfp8Int8Epilogue{}, out, out_stride);
    }

private:
    /// Activations of x [M, K] (finite) over the virtual groups: each row quantized once and each group
    /// of 32 inputs packed three times in a row of 3K (the same codes and scale for every plane).
    template <class Arch, class Ops>
    static Int8RowBlocks activations(const float* x, Eigen::Index x_stride, Eigen::Index M, Eigen::Index K) {
        return pack_activations_int8<Arch, Mxfp8::group_size, Mxfp8Int8Layout::steps, Int8RowSums::codes, planes>(
            x, x_stride, M, K, Int8TileShape<Ops>::split);
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
