// The MLX affine format's side of the int8 GEMM (docs/numerics.md N11; layout in gemm/int8_panels.hpp):
// its weight rows packed into panels (the MLX words themselves for 2, 4 and 8 bits, the codes repacked at
// Int8PanelLayout::byte_bits for 1, 3, 5 and 6), per call or once per layer. Its activations:
// gemm/int8_activations.hpp.
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
#include "../gemm/int8_weight_panels.hpp"
#include "../quantized_view.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// Bytes of the scratch pack_weight_panel_int8 needs for NR rows of K codes: none when the panel reads
/// q's own words; else the rows repacked at byte_bits, plus one row unpacked to bytes on the way when
/// byte_bits < 8.
template <int GroupSize, int Bits>
constexpr Eigen::Index repack_scratch_bytes(int NR, Eigen::Index K) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    if (layout::packed) return 0;
    return NR * K * layout::byte_bits / 8 + (layout::byte_bits < 8 ? K : 0);
}

/// Packs weight rows [n0, n0 + NR) of q (rows past q.rows() as zeros) into one panel (panel_units(K, NR)
/// units at `panel`, the record layout above). `unpacked` is scratch of repack_scratch_bytes(NR, K)
/// bytes, 4-byte aligned (codes of 1, 3, 5 and 6 bits are unpacked there and repacked at byte_bits).
/// Ops (detail/arch/int8.hpp) transposes the words.
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
            std::uint8_t* row = unpacked + r * K * layout::byte_bits / 8;
            if constexpr (layout::byte_bits == 8) {
                unpack_codes<Bits>(&q.codes(n0 + r, 0), static_cast<std::size_t>(K), row);
            } else {
                std::uint8_t* bytes = unpacked + NR * K * layout::byte_bits / 8;
                unpack_codes<Bits>(&q.codes(n0 + r, 0), static_cast<std::size_t>(K), bytes);
                pack_codes<layout::byte_bits>(bytes, static_cast<std::size_t>(K),
                                              reinterpret_cast<std::uint32_t*>(row));
            }
            code_rows[r] = row;
        }
        scale_rows[r] = reinterpret_cast<const std::uint8_t*>(&q.scales(n0 + r, 0));
        bias_rows[r] = reinterpret_cast<const std::uint8_t*>(&q.biases(n0 + r, 0));
    }
    constexpr Eigen::Index record = layout::record_units(NR);
    transpose_to_panel_int8<Ops, NR>(code_rows, rows, layout::words(K), layout::words_per_group, record, panel);
    transpose_to_panel_int8<Ops, NR>(scale_rows, rows, groups, 1, record, panel + layout::scales_offset(NR));
    transpose_to_panel_int8<Ops, NR>(bias_rows, rows, groups, 1, record, panel + layout::biases_offset(NR));
}

/// Every panel of q (ceil(N / NR) of them); threads over panels. For 1, 3, 5 and 6 bits the panels hold
/// the codes repacked (at 2, 4, 8 and 8 bits: up to 8/5 of the codes' memory), built once here.
template <class Ops, int NR, int GroupSize, int Bits>
Int8WeightPanels pack_weight_panels_int8(const QuantizedView<MlxAffine<GroupSize, Bits>>& q) {
    const Eigen::Index scratch_words = (repack_scratch_bytes<GroupSize, Bits>(NR, q.cols()) + 3) / 4;
    return pack_all_int8_panels<NR, GroupSize, Bits, 2>(q.rows(), q.cols(), [&](Eigen::Index n0, std::uint32_t* panel) {
        std::vector<std::uint32_t> scratch(static_cast<std::size_t>(scratch_words));
        pack_weight_panel_int8<Ops, NR>(q, n0, panel, reinterpret_cast<std::uint8_t*>(scratch.data()));
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
