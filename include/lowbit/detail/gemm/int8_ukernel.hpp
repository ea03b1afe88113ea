// The register-blocked microkernel of the int8-activation GEMM (docs/numerics.md N11, N14) on the panels
// of int8_panels.hpp: an MR x NR tile of outputs (NR = NJ * Ops::lanes weight rows, one per int32
// lane), int32 accumulators per weight group. Per word of the group, each of the NJ code vectors is
// loaded once and its S steps unpacked once, for all MR rows; each broadcast activation quad feeds the
// NJ vectors. At the end of a group an epilogue folds the int32 sums into the outputs: for MLX affine
// (AffineInt8Epilogue), per output, total = fma(fl(s * a), float(isum), total) and then total = fma(b,
// xsum, total): the 2G terms in group order, each product fused into its add (the order the
// reference's tolerance allows: mlx_affine/int8_epilogue.hpp); the ternary one is in
// ternary/int8_gemm.hpp. An epilogue says how many float parameters a record holds per row
// (param_slots), folds a group's int32 sums into the tile's totals (group), turns the totals into the
// tile's floats (finish) and writes a tile row to the output (store). A format whose 4-bit codes are not
// their own values (mxfp4) names a 16-byte code_table: each code is replaced by its entry (Ops::lookup16,
// one instruction per code vector and step) before the dot.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "../unroll.hpp"
#include "int8_panels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The finish and store of an epilogue whose group() leaves the outputs themselves in the float totals
/// (MLX affine, E2M1, mxfp8): finish does nothing, store copies a tile row (out: row m of the output at
/// the tile's first column). Such an epilogue derives from this.
struct TotalsAreOutputs {
    template <class Ops, int MR, int NJ>
    LOWBIT_ALWAYS_INLINE void finish(const Int8BlockData&, typename Ops::fvec (&)[MR][NJ],
                                     const typename Ops::vec (&)[MR][NJ]) const {}
    void store(const float* tile_row, Eigen::Index columns, Eigen::Index, Eigen::Index, float* out) const {
        std::copy(tile_row, tile_row + columns, out);
    }
};

/// The tile of the microkernel for Ops: MR activation rows x NJ vectors of Ops::lanes weight rows, as
/// Ops sizes it for its register file (2 * MR * NJ accumulators, int32 and float, plus the code vectors).
template <class Ops>
struct Int8TileShape {
    static constexpr int rows = Ops::tile_rows;           ///< MR
    static constexpr int vectors = Ops::tile_vectors;     ///< NJ
    static constexpr int columns = vectors * Ops::lanes;  ///< NR
    static constexpr Int8RowSplit split{Ops::tile_rows, Ops::one_block_rows};
    static constexpr int widest_rows = split.widest();  ///< the most rows of a tile
    /// The tiles of the first row block of a pass over a layer's panels (the ones that bring the panels
    /// in; qgemm_i8's own panels were just packed, in cache) prefetch the panel prefetch_bytes ahead
    /// (rounded up to whole records) into L2: with words, scales and biases in three arrays, the
    /// hardware prefetcher alone left the GEMV over DRAM-resident weights short of a plain read of the
    /// same size, and 4 KiB ahead closes the gap (and speeds up small M as well). The later row blocks
    /// find the panels in L2, where prefetching again costs time (benchmarks/README.md). Panels are
    /// consecutive, so this runs into the next. The one-row GEMV walks two panels without prefetch.
    static constexpr std::size_t prefetch_bytes = 4096;
};

/// Whether Epilogue decodes the panel's codes through its 16-entry code_table before the dot.
template <class Epilogue>
concept DecodesCodes = requires { Epilogue::code_table; };

/// Whether Epilogue starts row m's int32 sums of group g at group_start<Ops, MR>(rows, g, m) (the same for
/// every column) instead of zero: an offset taken off in the sums themselves costs no instruction in
/// group() (the start is copied into the accumulators where they would be zeroed).
template <class Epilogue, class Ops>
concept StartsGroupSums = requires(const Int8BlockData& rows) {
    { Epilogue::template group_start<Ops, 1>(rows, Eigen::Index{0}, 0) } -> std::same_as<typename Ops::vec>;
};

/// Prefetches the cache line `Bytes` past `address` into L2 (a hint: it never faults, and an address
/// past the end of the panels is computed as an integer, not as a pointer into them).
template <std::size_t Bytes>
LOWBIT_ALWAYS_INLINE inline void prefetch_ahead(const void* address) {
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(address) + Bytes), 0, 2);
}

/// tile[(p * MR + m) * NR + c] = the output (Epilogue's) of row m of an MR-row x block (rows: quads
/// [w][t][MR][4] and the epilogue's per-row data) and row c of weight panel p < NP (one record per
/// group: int8_panels.hpp; panel p at panel + p * apart units), over `groups` groups. NP = 2 walks
/// two panels side by side, group by group: two sequential streams (the one-row GEMV, int8_gemm.hpp).
/// With `prefetch`, the panel about prefetch_bytes on (whole records) is prefetched into L2 as the tile
/// goes.
template <class Ops, int GroupSize, int Bits, class Epilogue, int MR, int NJ, int NP = 1>
void int8_tile(const Epilogue& epilogue, const Int8BlockData& rows, const std::uint32_t* panel, Eigen::Index groups,
               bool prefetch, float* tile, Eigen::Index apart = 0) {
    using layout = Int8PanelLayout<GroupSize, Bits, Epilogue::param_slots>;
    using vec = typename Ops::vec;
    using fvec = typename Ops::fvec;
    constexpr int S = layout::steps, L = Ops::lanes, NR = NJ * L, WPG = layout::words_per_group;
    constexpr int unrolled = std::min(WPG, 8);
    static_assert(WPG % unrolled == 0, "int8_tile: words per group must be a multiple of the unrolled words");
    static_assert(NP == 1 || NP == 2, "int8_tile: one panel, or two side by side");
    static_assert(std::is_unsigned_v<typename Ops::code_byte> && std::is_signed_v<typename Ops::activation_byte>,
                  "int8_tile: the panels hold unsigned codes and the quads signed activations");
    constexpr int code_bits = Bits == 8 ? 8 : 6;  // AVX2's dot splits 8-bit codes; 2..6 bits are exact
    constexpr std::uint8_t mask = static_cast<std::uint8_t>((1u << layout::byte_bits) - 1u);
    constexpr Eigen::Index record_units = layout::record_units(NR);
    // `prefetch` stays a run-time flag: as a template parameter (two instantiations) the GEMM at small
    // M over DRAM ran slower (benchmarks/README.md).
    // The prefetch distance in whole records, so that each load's prefetch lands on the same place of a
    // later record and together they cover all of it.
    constexpr std::size_t record_bytes = static_cast<std::size_t>(record_units) * sizeof(std::uint32_t);
    constexpr std::size_t ahead_bytes =
        (Int8TileShape<Ops>::prefetch_bytes + record_bytes - 1) / record_bytes * record_bytes;

    static_assert(!DecodesCodes<Epilogue> || layout::byte_bits == 4, "int8_tile: a code table decodes 4-bit codes");
    [[maybe_unused]] vec table{};
    if constexpr (DecodesCodes<Epilogue>) table = Ops::table16(Epilogue::code_table.data());

    // Plain arrays: std::array of an intrinsic type drops its alignment attribute (-Wignored-attributes).
    fvec total[NP][MR][NJ];
    vec itotal[NP][MR][NJ];  // used by epilogues with integer_total only
    static_for<NP>([&](auto p) LOWBIT_ALWAYS_INLINE {
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                total[p][m][j] = Ops::fzero();
                if constexpr (Epilogue::integer_total) itotal[p][m][j] = Ops::zero();
            });
        });
    });
    for (Eigen::Index g = 0; g < groups; ++g) {
        const std::int8_t* group_quads = rows.quads + g * WPG * S * MR * 4;
        static_for<NP>([&](auto p) LOWBIT_ALWAYS_INLINE {
            const std::uint32_t* record = panel + p * apart + g * record_units;
            vec acc[MR][NJ];
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                vec start = Ops::zero();
                if constexpr (StartsGroupSums<Epilogue, Ops>)
                    start = Epilogue::template group_start<Ops, MR>(rows, g, m);
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { acc[m][j] = start; });
            });
            // The record's floats, stored bit for bit in its 32-bit units (Ops::fload may alias them).
            const float* params = reinterpret_cast<const float*>(record + layout::param_offset(NR, 0));
            if (prefetch)  // the parameter lines of the record ahead (its words: in the word loop)
                static_for<Epilogue::param_slots>([&](auto slot) LOWBIT_ALWAYS_INLINE {
                    static_for<NJ>(
                        [&](auto j) LOWBIT_ALWAYS_INLINE { prefetch_ahead<ahead_bytes>(params + slot * NR + j * L); });
                });
            for (int w0 = 0; w0 < WPG; w0 += unrolled) {
                static_for<unrolled>([&](auto w_constant) LOWBIT_ALWAYS_INLINE {
                    const int w = w0 + decltype(w_constant)::value;
                    vec codes[NJ];
                    static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { codes[j] = Ops::load(record + w * NR + j * L); });
                    if (prefetch)
                        static_for<NJ>(
                            [&](auto j) LOWBIT_ALWAYS_INLINE { prefetch_ahead<ahead_bytes>(record + w * NR + j * L); });
                    static_for<S>([&](auto t_constant) LOWBIT_ALWAYS_INLINE {
                        constexpr int t = decltype(t_constant)::value;
                        vec step[NJ];
                        static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                            if constexpr (S == 1)
                                step[j] = codes[j];
                            else if constexpr (t == 0)
                                step[j] = Ops::byte_mask(codes[j], mask);
                            else
                                step[j] =
                                    Ops::byte_mask(Ops::template shift_right<t * layout::byte_bits>(codes[j]), mask);
                            if constexpr (DecodesCodes<Epilogue>) step[j] = Ops::lookup16(table, step[j]);
                        });
                        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                            const vec quad = Ops::broadcast32(group_quads + ((w * S + t) * MR + m) * 4);
                            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                                acc[m][j] = Ops::template dot<code_bits>(acc[m][j], step[j], quad);
                            });
                        });
                    });
                });
            }
            Epilogue::template group<Ops, MR, NJ>(rows, g, params, acc, total[p], itotal[p]);
        });
    }
    static_for<NP>([&](auto p) LOWBIT_ALWAYS_INLINE {
        epilogue.template finish<Ops, MR, NJ>(rows, total[p], itotal[p]);
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            static_for<NJ>([&](auto j)
                               LOWBIT_ALWAYS_INLINE { Ops::fstore(tile + (p * MR + m) * NR + j * L, total[p][m][j]); });
        });
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
