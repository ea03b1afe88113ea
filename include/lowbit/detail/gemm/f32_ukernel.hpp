// QgemmF32Ukernel: the register-blocked microkernel of the f32 GEMM on codes a format has unpacked and
// scaled into a float panel (f32_panel.hpp), any xsimd Arch. run goes over a slice of groups: out =
// (first ? 0 : out) + sum_k x * fl(s * q) + sum_g sum(x) * b; run_depth over plain steps (the
// transposed product of f32_dx.hpp, whose depth is the weight rows). f32 accumulation, no integer
// arithmetic.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>

#include <Eigen/Core>

#include "../simd.hpp"
#include "../unroll.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// The qgemm_f32 microkernel: an MR x NR register block of x rows times one panel block of NR output
/// columns, over a slice of groups, with broadcast-x fmas (2 accumulators of W lanes per row). Its tile
/// sizes are declared here and read by the driver and by the tests' shape loops.
template <class Arch>
struct QgemmF32Ukernel {
    /// The default of run's after_chunk: nothing.
    struct NoHook {
        LOWBIT_ALWAYS_INLINE void operator()(Index, int) const noexcept {}
    };

    static constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
    static constexpr int NR = 2 * W;              ///< panel columns per register block
    static constexpr int MR = W >= 16 ? 8 : 6;    ///< x rows per register block (MR * 2 accumulators)
    static constexpr Index NC = (256 / NR) * NR;  ///< output columns per tile (one panel)
    static constexpr Index MC = 256;              ///< x rows per tile
    /// k per panel slice, in whole groups (slice_groups): one NR-column block of the slice's panel
    /// (KC + KC / GroupSize rows of NR floats: 33 KiB at g64 on AVX-512) stays in L1 while the tile's
    /// rows pass over it, and each output is read and written once per slice instead of once per group
    /// (benchmarks/README.md).
    static constexpr Index KC = 256;
    template <int GroupSize>
    static constexpr Index slice_groups = KC / GroupSize > 0 ? KC / GroupSize : 1;

    /// A Rows x NR register block's accumulators (2 vectors of W lanes per row) and its two operations.
    template <int Rows>
    struct Accumulators {
        using fbatch = xsimd::batch<float, Arch>;
        std::array<fbatch, Rows> acc0, acc1;

        LOWBIT_ALWAYS_INLINE Accumulators() {
            acc0.fill(fbatch(0.0f));
            acc1.fill(fbatch(0.0f));
        }
        /// acc += a[r] * b[0 .. NR) per row r: one row of a panel block (NR floats) times one step of a
        /// packed x block (Rows floats), each product fused into its add.
        LOWBIT_ALWAYS_INLINE void step(const float* b, const float* a) {
            const fbatch b0 = fbatch::load_unaligned(b);
            const fbatch b1 = fbatch::load_unaligned(b + W);
            // Unrolled by static_for, not left to the optimizer: GCC 12 at -O2 keeps a runtime loop over
            // the rows here, with the accumulators in memory (2.5x slower; benchmarks/README.md).
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                const fbatch a_r(a[decltype(r)::value]);
                acc0[r] = simd::fma(a_r, b0, acc0[r]);
                acc1[r] = simd::fma(a_r, b1, acc1[r]);
            });
        }
        /// out[r * out_stride + j] = (first ? 0 : out[..]) + acc for j < cols (cols <= NR).
        LOWBIT_ALWAYS_INLINE void store(float* out, Index out_stride, Index cols, bool first) const {
            // static_for here too: a runtime index into acc0 / acc1 keeps them in memory, and Clang 14 at
            // -O2 then stores every accumulator after each fma above.
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                fbatch v0 = acc0[r], v1 = acc1[r];
                float* o = out + decltype(r)::value * out_stride;
                if (cols == NR) {
                    if (!first) {
                        v0 += fbatch::load_unaligned(o);
                        v1 += fbatch::load_unaligned(o + W);
                    }
                    v0.store_unaligned(o);
                    v1.store_unaligned(o + W);
                } else {
                    alignas(64) std::array<float, 2 * 64> lanes{};
                    v0.store_unaligned(lanes.data());
                    v1.store_unaligned(lanes.data() + W);
                    for (Index j = 0; j < cols; ++j) o[j] = (first ? 0.0f : o[j]) + lanes[static_cast<std::size_t>(j)];
                }
            });
        }
    };

    /// One Rows x NR register block over `depth` plain steps (no groups, no bias rows): out = (first ? 0 :
    /// out) + sum_d a_block[d * Rows + r] * block[d * NR + j], accumulated in d order. block: depth rows of
    /// NR floats; a_block: depth steps of Rows floats. Writes only the first `cols` columns of out.
    template <int Rows>
    LOWBIT_NOINLINE static void run_depth(const float* block, Index depth, const float* a_block, float* out,
                                          Index out_stride, Index cols, bool first) {
        Accumulators<Rows> acc;
        for (Index d = 0; d < depth; ++d) acc.step(block + d * NR, a_block + d * Rows);
        acc.store(out, out_stride, cols, first);
    }

    /// One Rows x NR register block over `groups` groups of one panel block (f32_panel.hpp's layout):
    ///   out = (first ? 0 : out) + sum over the groups' k of x * fl(s * q) + sum over the groups of sum(x) * b,
    /// accumulated in that order (per group its GroupSize codes, then its bias row). x_block: the block's
    /// rows of x packed as the panel block is (pack_x_block: per group GroupSize steps of x, then one of
    /// sum(x), each Rows floats), from the slice's first group. Writes only the first `cols` columns of
    /// out. after_chunk(i, c) runs after the steps of rows [c * Chunk, (c + 1) * Chunk) of group i (c =
    /// GroupSize / Chunk: after its bias row), when the block has read them: it may overwrite them (the
    /// driver unpacks the next panel block there; it must fit in the registers the accumulators leave).
    template <int Rows, int GroupSize, int Chunk = GroupSize, class AfterChunk = NoHook>
    LOWBIT_NOINLINE static void run(const float* block, Index groups, const float* x_block, float* out,
                                    Index out_stride, Index cols, bool first, AfterChunk after_chunk = {}) {
        static_assert(GroupSize % Chunk == 0, "QgemmF32Ukernel::run: Chunk must divide GroupSize");
        constexpr int chunks = GroupSize / Chunk;
        Accumulators<Rows> acc;
        auto step = [&]() LOWBIT_ALWAYS_INLINE {
            acc.step(block, x_block);
            block += NR;
            x_block += Rows;
        };
        for (Index i = 0; i < groups; ++i) {
            for (int c = 0; c < chunks; ++c) {
                for (int k = 0; k < Chunk; ++k) step();
                after_chunk(i, c);
            }
            step();
            after_chunk(i, chunks);
        }
        acc.store(out, out_stride, cols, first);
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
