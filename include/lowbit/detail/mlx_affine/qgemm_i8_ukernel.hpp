// The register-blocked microkernel of the int8-activation GEMM (docs/numerics.md N11) on the panels of
// qgemm_i8_panel.hpp: an MR x NR tile of outputs (NR = NJ * Ops::lanes weight rows, one per int32
// lane), int32 accumulators per weight group. Per word of the group, each of the NJ code vectors is
// loaded once and its S steps unpacked once, for all MR rows; each broadcast activation quad feeds the
// NJ vectors. At the end of a group, per output, total = fma(fl(s * a), float(isum), total) and then
// total = fma(b, xsum, total): the 2G terms in group order, each product fused into its add (the order
// the reference's tolerance allows, int8_matmul_reference.hpp).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../unroll.hpp"
#include "qgemm_i8_panel.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The tile of the microkernel for Ops: MR activation rows x NJ vectors of Ops::lanes weight rows. Sized
/// for the register file: 2 * MR * NJ accumulators (int32 and float) plus the code vectors.
template <class Ops>
struct Int8TileShape {
    static constexpr int rows = Ops::lanes == 16 ? 6 : 4;  ///< MR: 32 registers (AVX-512) or 16 (AVX2)
    static constexpr int vectors = Ops::lanes == 16 ? 2 : 1;  ///< NJ
    static constexpr int columns = vectors * Ops::lanes;       ///< NR
    /// The tiles of the first row block of a pass over a layer's panels (the ones that bring the panels
    /// in; qgemm_i8's own panels were just packed, in cache) prefetch the panel words prefetch_bytes ahead
    /// into L2: the hardware prefetcher alone left the q4
    /// GEMV over DRAM-resident weights at 0.76 to 0.84 of a read of the same size; 4 KiB ahead reached
    /// 0.94 to 1.16 (1 and 2 threads), and M = 8 to 32 ran 1.06 to 1.16 times as fast as with the
    /// prefetch at M <= 2 only. The later row blocks find the panels in L2, and prefetching there too
    /// cost 2.5 % at M = 512 (benchmarks/README.md). Panels are consecutive, so this runs into the next.
    static constexpr std::size_t prefetch_bytes = 4096;
};

/// Prefetches the cache line `Bytes` past `address` into L2 (a hint: it never faults, and an address
/// past the end of the panels is computed as an integer, not as a pointer into them).
template <std::size_t Bytes>
LOWBIT_ALWAYS_INLINE inline void prefetch_ahead(const void* address) {
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(address) + Bytes), 0, 2);
}

/// tile[m * NR + c] = the N11 output of row m of an MR-row x block (quads [w][t][MR][4], a and x_sum
/// [g][MR]) and row c of a weight panel (words [w][NR], scales and biases [g][NR]), over `groups` groups.
/// With `prefetch`, the words prefetch_bytes on are prefetched into L2 as the tile goes.
template <class Ops, int GroupSize, int Bits, int MR, int NJ>
void int8_tile(const std::int8_t* quads, const float* a, const float* x_sum, const std::uint32_t* words,
               const float* scales, const float* biases, Eigen::Index groups, bool prefetch, float* tile) {
    using layout = Int8PanelLayout<GroupSize, Bits>;
    using vec = typename Ops::vec;
    using fvec = typename Ops::fvec;
    constexpr int S = layout::steps, L = Ops::lanes, NR = NJ * L, WPG = layout::words_per_group;
    constexpr int unrolled = std::min(WPG, 8);
    static_assert(WPG % unrolled == 0, "int8_tile: words per group must be a multiple of the unrolled words");
    constexpr int code_bits = Bits == 8 ? 8 : 6;  // AVX2's dot splits 8-bit codes; 2..6 bits are exact
    constexpr std::uint8_t mask = static_cast<std::uint8_t>((1u << layout::byte_bits) - 1u);

    // Plain arrays: std::array of an intrinsic type drops its alignment attribute (-Wignored-attributes).
    fvec total[MR][NJ];
    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE { static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { total[m][j] = Ops::fzero(); }); });
    for (Eigen::Index g = 0; g < groups; ++g) {
        vec acc[MR][NJ];
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE { static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { acc[m][j] = Ops::zero(); }); });
        const std::uint32_t* group_words = words + g * WPG * NR;
        const std::int8_t* group_quads = quads + g * WPG * S * MR * 4;
        for (int w0 = 0; w0 < WPG; w0 += unrolled) {
            static_for<unrolled>([&](auto w_constant) LOWBIT_ALWAYS_INLINE {
                const int w = w0 + decltype(w_constant)::value;
                vec codes[NJ];
                static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { codes[j] = Ops::load(group_words + w * NR + j * L); });
                if (prefetch)
                    static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                        prefetch_ahead<Int8TileShape<Ops>::prefetch_bytes>(group_words + w * NR + j * L);
                    });
                static_for<S>([&](auto t_constant) LOWBIT_ALWAYS_INLINE {
                    constexpr int t = decltype(t_constant)::value;
                    vec step[NJ];
                    static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                        if constexpr (S == 1) step[j] = codes[j];
                        else if constexpr (t == 0) step[j] = Ops::byte_mask(codes[j], mask);
                        else step[j] = Ops::byte_mask(Ops::template shift_right<t * layout::byte_bits>(codes[j]), mask);
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
        fvec s[NJ], b[NJ];
        static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
            s[j] = Ops::fload(scales + g * NR + j * L);
            b[j] = Ops::fload(biases + g * NR + j * L);
        });
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            const fvec scale = Ops::fbroadcast(a[g * MR + m]), sum = Ops::fbroadcast(x_sum[g * MR + m]);
            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                total[m][j] = Ops::fmadd(Ops::fmul(s[j], scale), Ops::to_float(acc[m][j]), total[m][j]);
                total[m][j] = Ops::fmadd(b[j], sum, total[m][j]);
            });
        });
    }
    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
        static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE { Ops::fstore(tile + m * NR + j * L, total[m][j]); });
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
