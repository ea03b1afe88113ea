// xsimd kernels for out[M, N] = x[M, K] * dequantize(q)^T on MLX-packed codes (docs/numerics.md N10).
//
// Both kernels use the per-group identity
//     sum_{k in g} x_k * (s q_k + b)  =  s * sum_{k in g} x_k q_k  +  b * sum_{k in g} x_k
// with sum(x) computed once per row of x and group (group_sums) and shared by every output column,
// everything accumulated in f32, and the float weight matrix never formed.
//
// qgemv (M = 1, Bits in {2, 4, 8}): streams each packed row once. x is first permuted (x_lanes) so that
//   lane i of code-step t in chunk c of W words is code (c*W + i) * (32/Bits) + t: a chunk is loaded
//   as one uint32 batch and each step is one mask, one int->float conversion and one fma. Step t keeps
//   its code in place (q << t*Bits) and x_lanes holds x * 2^-(t*Bits) instead, which is exact (a power
//   of two) unless x is below 2^-102 in magnitude, and saves the shift. Rows are taken one at a time
//   (one sequential stream of codes), four chunks in flight. A lane's group is fixed within a chunk,
//   so s is applied per lane once per chunk.
// qgemm (every other case): per tile of NC output columns and one group, the codes are unpacked into a
//   private float panel [GroupSize][NC] (k-major, zero-padded to a multiple of NR); an MR x NR register
//   block of x rows then accumulates sum(x*q) over the group with broadcast-x fmas, and the epilogue
//   adds s * acc + b * sum(x) to the output. The panel is reused by every row of the tile's row block.
//
// Overflow: codes < 2^8 and code sums stay in f32; no integer accumulation.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "../../quantized_matrix.hpp"
#include "../parallel.hpp"
#include "../simd.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// Forces a call to be inlined: Clang 14's inliner otherwise gives up on the unrolled qgemv pass and
/// calls the code-step lambdas through the stack (much slower: benchmarks/README.md).
#if defined(__GNUC__) || defined(__clang__)
#define LOWBIT_ALWAYS_INLINE __attribute__((always_inline))
#else
#define LOWBIT_ALWAYS_INLINE
#endif

template <class Body, int... I>
LOWBIT_ALWAYS_INLINE inline void static_for_each(Body& body, std::integer_sequence<int, I...>) {
    (body(std::integral_constant<int, I>{}), ...);
}

/// Calls body(std::integral_constant<int, I>{}) for I = 0 .. Count-1 (compile-time unrolled loop).
template <int Count, class Body>
LOWBIT_ALWAYS_INLINE inline void static_for(Body&& body) {
    static_for_each(body, std::make_integer_sequence<int, Count>{});
}

/// x_sum[m * groups + g] = sum_{k in group g} x[m * x_stride + k].
template <class Arch, int GroupSize>
void group_sums(const float* x, Index x_stride, Index M, Index K, float* x_sum) {
    using batch = xsimd::batch<float, Arch>;
    constexpr Index W = static_cast<Index>(batch::size);
    static_assert(GroupSize % W == 0, "group_sums: GroupSize must be a multiple of the float lanes");
    const Index groups = K / GroupSize;
    for (Index m = 0; m < M; ++m) {
        const float* row = x + m * x_stride;
        for (Index g = 0; g < groups; ++g) {
            batch sum(0.0f);
            for (Index k = g * GroupSize; k < (g + 1) * GroupSize; k += W) sum += batch::load_unaligned(row + k);
            x_sum[m * groups + g] = simd::reduce_add(sum);
        }
    }
}

/// Bits whose codes never straddle words: the qgemv path and the vector panel unpack.
template <int Bits>
inline constexpr bool word_aligned_bits = (32 % Bits) == 0;

// ---------------------------------------------------------------------------------------------- qgemv

/// x rearranged for qgemv (see the top of this file): size chunks * (32/Bits) * W.
template <class Arch, int Bits>
void permute_x_for_gemv(const float* x, Index K, float* x_lanes) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    constexpr Index codes_per_word = 32 / Bits;
    const Index chunks = (K / codes_per_word) / W;
    for (Index c = 0; c < chunks; ++c)
        for (Index t = 0; t < codes_per_word; ++t) {
            // The last step shifts its code down instead of masking in place (it would not fit an int32).
            const float unscale = t + 1 == codes_per_word ? 1.0f : std::ldexp(1.0f, -static_cast<int>(t * Bits));
            for (Index i = 0; i < W; ++i)
                x_lanes[(c * codes_per_word + t) * W + i] = x[(c * W + i) * codes_per_word + t] * unscale;
        }
}

/// out[n] for n in [n_begin, n_end) (M = 1). x: the row (contiguous), x_lanes: permute_x_for_gemv(x)
/// (Arch::alignment()-aligned), x_sum: group_sums of x.
template <class Arch, int GroupSize, int Bits>
void qgemv_rows(const QuantizedMatrix<GroupSize, Bits>& q, const float* x, const float* x_lanes, const float* x_sum,
                Index n_begin, Index n_end, float* out) {
    static_assert(word_aligned_bits<Bits>, "qgemv handles Bits in {2, 4, 8}; other widths go through qgemm");
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int codes_per_word = 32 / Bits;
    constexpr int words_per_group = QuantizedMatrix<GroupSize, Bits>::words_per_group;
    // A chunk of W words spans whole groups (W <= words_per_group) or holds several (W > words_per_group).
    constexpr int groups_per_chunk = W > words_per_group ? W / words_per_group : 1;
    constexpr int chunks_per_group = W > words_per_group ? 1 : words_per_group / W;

    const Index K = q.cols(), groups = K / GroupSize;
    const Index row_words = K * Bits / 32;
    const Index chunks = row_words / W;

    // lane_in_group[j]: lanes whose group is the chunk's j-th. Only the select path below (more than two
    // groups per chunk) reads it; one and two groups per chunk take a broadcast.
    std::array<xsimd::batch_bool<float, Arch>, groups_per_chunk> lane_in_group{};
    if constexpr (groups_per_chunk > 2) {
        alignas(64) std::array<float, 64> lane_index{};
        for (int i = 0; i < W; ++i) lane_index[static_cast<std::size_t>(i)] = static_cast<float>(i);
        const fbatch lanes = fbatch::load_unaligned(lane_index.data());
        for (int j = 0; j < groups_per_chunk; ++j)
            lane_in_group[static_cast<std::size_t>(j)] = lanes >= fbatch(static_cast<float>(j * words_per_group));
    }
    auto lane_scales = [&](const float* scale_row, Index chunk) {
        if constexpr (groups_per_chunk == 1) {
            return fbatch(scale_row[chunk / chunks_per_group]);
        } else if constexpr (groups_per_chunk == 2) {
            return simd::broadcast_halves<Arch>(scale_row + chunk * 2);
        } else {
            const float* s = scale_row + chunk * groups_per_chunk;
            fbatch scales(s[0]);
            static_for<groups_per_chunk - 1>([&](auto j) {
                constexpr int group = decltype(j)::value + 1;
                scales = xsimd::select(lane_in_group[group], fbatch(s[group]), scales);
            });
            return scales;
        }
    };

    // One output row at a time, so the packed codes are read as one sequential stream (interleaving
    // rows to share x loads made DRAM serve several short streams at once, which it does slower:
    // benchmarks/README.md).
    // chunk_block consecutive chunks are in flight, each with its own accumulator, to cover the fma
    // latency. Loops over chunks and code steps are unrolled at compile time (static_for), which
    // Clang 14 would otherwise not do.
    constexpr int chunk_block = 4;
    // Codes are prefetched into L2 this many rows (a few KiB) ahead: about the DRAM latency at the
    // rate the arithmetic consumes them (distance and cache level chosen by measurement:
    // benchmarks/README.md).
    constexpr Index prefetch_rows = 2;
    auto row_dot = [&](Index n) {
        const std::uint32_t* codes = &q.codes(n, 0);
        const float* scales = &q.scales(n, 0);
        const std::uint32_t* ahead = n + prefetch_rows < n_end ? &q.codes(n + prefetch_rows, 0) : nullptr;
        std::array<fbatch, chunk_block> total;
        total.fill(fbatch(0.0f));
        auto block = [&]<int Count>(std::integral_constant<int, Count>, Index c0) LOWBIT_ALWAYS_INLINE {
            std::array<ubatch, Count> words;
            std::array<fbatch, Count> acc;
            static_for<Count>([&](auto i) {
                if (ahead) __builtin_prefetch(ahead + (c0 + i) * W, 0, 2);
                words[i] = ubatch::load_unaligned(codes + (c0 + i) * W);
            });
            static_for<codes_per_word>([&](auto step) {
                constexpr int t = decltype(step)::value;
                static_for<Count>([&](auto i) {
                    const fbatch xv = fbatch::load_aligned(x_lanes + ((c0 + i) * codes_per_word + t) * W);
                    ubatch code;
                    if constexpr (t + 1 == codes_per_word) code = words[i] >> (32 - Bits);
                    else code = words[i] & ubatch(((std::uint32_t{1} << Bits) - 1) << (t * Bits));
                    const fbatch value = xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(code));
                    if constexpr (t == 0) acc[i] = value * xv;
                    else acc[i] = simd::fma(value, xv, acc[i]);
                });
            });
            static_for<Count>([&](auto i) { total[i] = simd::fma(acc[i], lane_scales(scales, c0 + i), total[i]); });
        };
        Index c = 0;
        for (; c + chunk_block <= chunks; c += chunk_block) block(std::integral_constant<int, chunk_block>{}, c);
        for (; c < chunks; ++c) block(std::integral_constant<int, 1>{}, c);
        static_for<chunk_block - 1>([&](auto i) { total[0] += total[i + 1]; });

        // b * sum(x) over the row's groups, vectorised (a serial scalar loop is a dependency chain as
        // long as the row has groups, which holds up the next row).
        const float* bias_row = &q.biases(n, 0);
        Index g = 0;
        for (; g + W <= groups; g += W)
            total[0] = simd::fma(fbatch::load_unaligned(bias_row + g), fbatch::load_unaligned(x_sum + g), total[0]);
        float result = simd::reduce_add(total[0]);
        for (; g < groups; ++g) result += bias_row[g] * x_sum[g];
        // Words after the last whole chunk (only when a row has fewer than W words left over).
        for (Index word = chunks * W; word < row_words; ++word) {
            const std::uint32_t bits = codes[word];
            for (int t = 0; t < codes_per_word; ++t) {
                const Index k = word * codes_per_word + t;
                const auto code = static_cast<float>((bits >> (t * Bits)) & ((std::uint32_t{1} << Bits) - 1));
                result += scales[k / GroupSize] * (x[k] * code);
            }
        }
        out[n] = result;
    };
    for (Index n = n_begin; n < n_end; ++n) row_dot(n);
}

/// out[n] = x * dequantize(q)^T for one row x (contiguous, q.cols() floats), threads over output rows.
template <class Arch, int GroupSize, int Bits>
void qgemv(const float* x, const QuantizedMatrix<GroupSize, Bits>& q, float* out) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    const Index K = q.cols(), N = q.rows();
    std::vector<float> x_sum(static_cast<std::size_t>(K / GroupSize));
    group_sums<Arch, GroupSize>(x, K, 1, K, x_sum.data());
    const Index lanes = (K * Bits / 32) / W * W * (32 / Bits);
    // Aligned: qgemv_rows loads it once per code step, and a split load per step is measurably slower
    // (benchmarks/README.md).
    std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> x_lanes(
        static_cast<std::size_t>(std::max<Index>(lanes, 1)));
    permute_x_for_gemv<Arch, Bits>(x, K, x_lanes.data());
    // About 256 KiB of packed codes per range, so a range is worth a worker (benchmarks/README.md).
    const Index row_bytes = K * Bits / 8;
    const std::size_t grain = static_cast<std::size_t>(std::max<Index>(4, (Index{1} << 18) / row_bytes));
    parallel_for(static_cast<std::size_t>(N), grain, [&](std::size_t begin, std::size_t end) {
        qgemv_rows<Arch, GroupSize, Bits>(q, x, x_lanes.data(), x_sum.data(), static_cast<Index>(begin),
                                          static_cast<Index>(end), out);
    });
}

// ---------------------------------------------------------------------------------------------- qgemm

template <class Arch>
struct GemmBlocking {
    static constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
    static constexpr int NR = 2 * W;                 ///< panel columns per register block
    static constexpr int MR = W >= 16 ? 8 : 6;       ///< x rows per register block (MR * 2 accumulators)
    static constexpr Index NC = (256 / NR) * NR;     ///< output columns per tile (one panel)
    static constexpr Index MC = 256;                 ///< x rows per tile
};

/// Unpacks group g of columns [n0, n0 + nc) into panel[k * panel_stride + j] (k < GroupSize,
/// j < panel_stride; columns nc.. are zero) and their scales and biases into panel_scales/biases.
template <class Arch, int GroupSize, int Bits>
void build_panel(const QuantizedMatrix<GroupSize, Bits>& q, Index g, Index n0, Index nc, Index panel_stride,
                 float* panel, float* panel_scales, float* panel_biases, std::uint32_t* words_t) {
    constexpr int words_per_group = QuantizedMatrix<GroupSize, Bits>::words_per_group;
    for (Index j = 0; j < panel_stride; ++j) {
        panel_scales[j] = j < nc ? q.scales(n0 + j, g) : 0.0f;
        panel_biases[j] = j < nc ? q.biases(n0 + j, g) : 0.0f;
    }
    if constexpr (word_aligned_bits<Bits>) {
        using ubatch = xsimd::batch<std::uint32_t, Arch>;
        using fbatch = xsimd::batch<float, Arch>;
        constexpr Index W = static_cast<Index>(fbatch::size);
        constexpr int codes_per_word = 32 / Bits;
        // Transpose the group's words to [word][column], then unpack W columns per vector.
        for (Index j = 0; j < panel_stride; ++j) {
            const std::uint32_t* words = j < nc ? &q.codes(n0 + j, g * words_per_group) : nullptr;
            for (int w = 0; w < words_per_group; ++w) words_t[w * panel_stride + j] = words ? words[w] : 0u;
        }
        const ubatch mask((std::uint32_t{1} << Bits) - 1);
        for (int w = 0; w < words_per_group; ++w)
            for (Index j = 0; j < panel_stride; j += W) {
                const ubatch words = ubatch::load_unaligned(words_t + w * panel_stride + j);
                static_for<codes_per_word>([&](auto step) {
                    constexpr int t = decltype(step)::value;
                    const ubatch code = (words >> (t * Bits)) & mask;
                    xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(code))
                        .store_unaligned(panel + (w * codes_per_word + t) * panel_stride + j);
                });
            }
    } else {
        std::array<float, GroupSize> codes{};
        for (Index j = 0; j < panel_stride; ++j) {
            if (j < nc) unpack_codes<Bits>(&q.codes(n0 + j, g * words_per_group), GroupSize, codes.data());
            else codes.fill(0.0f);
            for (int k = 0; k < GroupSize; ++k) panel[k * panel_stride + j] = codes[static_cast<std::size_t>(k)];
        }
    }
}

/// One Rows x NR register block over one group: out = (first ? 0 : out) + s * sum(x*q) + b * sum(x).
/// Writes only the first `cols` columns of out.
template <class Arch, int Rows, int GroupSize>
void gemm_micro(const float* panel, Index panel_stride, const float* x, Index x_stride, const float* x_sum,
                Index x_sum_stride, const float* scales, const float* biases, float* out, Index out_stride, Index cols,
                bool first) {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int NR = 2 * W;
    std::array<fbatch, Rows> acc0, acc1;
    acc0.fill(fbatch(0.0f));
    acc1.fill(fbatch(0.0f));
    for (int k = 0; k < GroupSize; ++k) {
        const fbatch b0 = fbatch::load_unaligned(panel + k * panel_stride);
        const fbatch b1 = fbatch::load_unaligned(panel + k * panel_stride + W);
        for (int r = 0; r < Rows; ++r) {
            const fbatch a(x[r * x_stride + k]);
            acc0[r] = simd::fma(a, b0, acc0[r]);
            acc1[r] = simd::fma(a, b1, acc1[r]);
        }
    }
    const fbatch s0 = fbatch::load_unaligned(scales), s1 = fbatch::load_unaligned(scales + W);
    const fbatch c0 = fbatch::load_unaligned(biases), c1 = fbatch::load_unaligned(biases + W);
    for (int r = 0; r < Rows; ++r) {
        const fbatch sum_x(x_sum[r * x_sum_stride]);
        fbatch v0 = simd::fma(acc0[r], s0, c0 * sum_x);
        fbatch v1 = simd::fma(acc1[r], s1, c1 * sum_x);
        float* o = out + r * out_stride;
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
    }
}

/// out[m * out_stride + n] = (x * dequantize(q)^T)[m, n]; x rows contiguous with stride x_stride.
/// Threads over tiles of MC rows x NC columns.
template <class Arch, int GroupSize, int Bits>
void qgemm(const float* x, Index x_stride, Index M, const QuantizedMatrix<GroupSize, Bits>& q, float* out,
           Index out_stride) {
    using blocking = GemmBlocking<Arch>;
    constexpr int MR = blocking::MR, NR = blocking::NR;
    constexpr int words_per_group = QuantizedMatrix<GroupSize, Bits>::words_per_group;
    const Index N = q.rows(), K = q.cols(), groups = K / GroupSize;
    std::vector<float> x_sum(static_cast<std::size_t>(M * groups));
    group_sums<Arch, GroupSize>(x, x_stride, M, K, x_sum.data());

    const Index n_tiles = (N + blocking::NC - 1) / blocking::NC;
    const Index m_blocks = (M + blocking::MC - 1) / blocking::MC;
    // Tiny problems stay on one thread: a tile must be worth handing to a worker (about 2 MFLOP).
    const double tile_flops = 2.0 * double(std::min(M, blocking::MC)) * double(std::min(N, blocking::NC)) * double(K);
    const std::size_t grain = tile_flops >= 2e6 ? 1 : static_cast<std::size_t>(n_tiles * m_blocks);
    parallel_for(static_cast<std::size_t>(n_tiles * m_blocks), grain, [&](std::size_t begin, std::size_t end) {
        std::vector<float> panel(static_cast<std::size_t>(GroupSize * blocking::NC));
        std::vector<float> panel_scales(static_cast<std::size_t>(blocking::NC));
        std::vector<float> panel_biases(static_cast<std::size_t>(blocking::NC));
        std::vector<std::uint32_t> words_t(static_cast<std::size_t>(words_per_group * blocking::NC));
        for (std::size_t task = begin; task < end; ++task) {
            const Index n0 = static_cast<Index>(task) / m_blocks * blocking::NC;
            const Index m0 = static_cast<Index>(task) % m_blocks * blocking::MC;
            const Index nc = std::min(blocking::NC, N - n0), mc = std::min(blocking::MC, M - m0);
            const Index panel_stride = (nc + NR - 1) / NR * NR;
            for (Index g = 0; g < groups; ++g) {
                build_panel<Arch, GroupSize, Bits>(q, g, n0, nc, panel_stride, panel.data(), panel_scales.data(),
                                                   panel_biases.data(), words_t.data());
                for (Index j = 0; j < panel_stride; j += NR) {
                    const Index cols = std::min<Index>(NR, nc - j);
                    auto block = [&]<int Rows>(std::integral_constant<int, Rows>, Index m) {
                        gemm_micro<Arch, Rows, GroupSize>(panel.data() + j, panel_stride,
                                                          x + m * x_stride + g * GroupSize, x_stride,
                                                          x_sum.data() + m * groups + g, groups,
                                                          panel_scales.data() + j, panel_biases.data() + j,
                                                          out + m * out_stride + n0 + j, out_stride, cols, g == 0);
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
