// qgemv_f32: out[n] = x * dequantize(q)^T for ONE row x (M = 1), f32 activations on the packed codes of
// any format whose codes fill whole words (MLX affine 2, 4 and 8 bits, mxfp4), any xsimd Arch (W float
// lanes). Kernel only; the threaded driver is f32_driver.hpp.
//
// It streams each packed row once. x is first permuted (x_lanes) so that lane i of code-step t in chunk
// c of W words is code (c*W + i) * (32/Bits) + t: a chunk is loaded as one uint32 batch and each step
// turns its codes into values (F32Codes<Format>::step, f32_codes.hpp) for one fma. MLX affine's step is
// one mask and one int->float conversion: it keeps its code in place (q << t*Bits) and x_lanes holds
// x * 2^-(t*Bits) instead, which is exact (a power of two) unless x is below 2^-96 in magnitude, and
// saves the shift. Rows are taken one at a time (one sequential stream of codes), four chunks in
// flight. A lane's group is fixed within a chunk, so s (Format::group_scale) is applied per lane once
// per chunk; byte scales that decode as vectors (F32Codes::group_scales) are decoded a row at a time
// first (decode_row_scales) and read as floats. Per group: s * sum(x q) (+ b * sum(x) with biases), f32 accumulation;
// no integer accumulation.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../unroll.hpp"
#include "f32_codes.hpp"
#include "group_sums.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// Chunks of W words in a row of K codes, the last one partial (the words after the last whole
/// chunk, zero-padded: finish_row) when the row's words are not a multiple of W.
template <class Arch, class Format>
Index gemv_chunks_with_tail(Index K) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    const Index words = K * Format::bits / 32;
    return (words + W - 1) / W;
}

/// Output rows per thread range of a GEMV over rows of K codes: about 256 KiB of packed codes, so a
/// range is worth a worker (benchmarks/README.md), and at least 4.
template <class Format>
std::size_t gemv_row_grain(Index K) {
    const Index row_bytes = K * Format::bits / 8;
    return static_cast<std::size_t>(std::max<Index>(4, (Index{1} << 18) / row_bytes));
}

/// x rearranged for qgemv (see the top of this file): gemv_chunks_with_tail(K) * (32/Bits) * W floats,
/// times the format's x_lanes_scale per code step (F32Codes); lanes past the row's last word are 0.
template <class Arch, class Format>
void permute_x_for_gemv(const float* x, Index K, float* x_lanes) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    constexpr Index codes_per_word = 32 / Format::bits;
    const Index words = K / codes_per_word;
    const Index chunks = gemv_chunks_with_tail<Arch, Format>(K);
    for (Index c = 0; c < chunks; ++c)
        for (Index t = 0; t < codes_per_word; ++t) {
            const float unscale = F32Codes<Format>::x_lanes_scale(static_cast<int>(t));
            for (Index i = 0; i < W; ++i)
                x_lanes[(c * codes_per_word + t) * W + i] =
                    c * W + i < words ? x[(c * W + i) * codes_per_word + t] * unscale : 0.0f;
        }
}

/// The per-lane group scales of one chunk of W words (lane i's group is fixed within a chunk; see the
/// top of this file), read from the stored scales (Scale = Format::scale_type) or from scales already
/// decoded to Format::group_scale (Scale = float: decode_row_scales).
template <class Arch, class Format, class Scale = typename Format::scale_type>
class ChunkScales {
public:
    using fbatch = xsimd::batch<float, Arch>;
    using scale_type = Scale;
    static constexpr int W = static_cast<int>(fbatch::size);
    static constexpr int words_per_group = Format::words_per_group;
    // A chunk of W words spans whole groups (W <= words_per_group) or holds several (W > words_per_group).
    static constexpr int groups_per_chunk = W > words_per_group ? W / words_per_group : 1;
    static constexpr int chunks_per_group = W > words_per_group ? 1 : words_per_group / W;

    ChunkScales() {
        if constexpr (selects) {
            alignas(64) std::array<float, 64> lane_index{};
            for (int i = 0; i < W; ++i) lane_index[static_cast<std::size_t>(i)] = static_cast<float>(i);
            const fbatch lanes = fbatch::load_unaligned(lane_index.data());
            for (int j = 0; j < groups_per_chunk; ++j)
                lane_in_group_[static_cast<std::size_t>(j)] = lanes >= fbatch(static_cast<float>(j * words_per_group));
        }
    }

    /// Lane i: the scale (Format::group_scale) of the group of lane i of chunk `chunk` of the row whose
    /// stored scales are scale_row: one broadcast when the chunk lies in one group; else for float
    /// scales the chunk's scales spread over their lanes (simd::spread_groups: a load and a lane
    /// permute), for byte scales decoded and spread as a pair in registers (two groups), spread as bytes
    /// and decoded as one vector for eight groups or more where the format decodes vectors
    /// (F32Codes::group_scales) and the instruction set spreads bytes in registers (AVX2, AVX-512), else
    /// broadcast and selected group by group (decoded scales stored and loaded back as one vector stall
    /// on store forwarding; benchmarks/README.md).
    LOWBIT_ALWAYS_INLINE fbatch operator()(const scale_type* scale_row, Index chunk) const {
        const scale_type* s = scale_row + chunk * groups_per_chunk;
        if constexpr (groups_per_chunk == 1) {
            return fbatch(group_scale(scale_row[chunk / chunks_per_group]));
        } else if constexpr (std::is_same_v<scale_type, float>) {
            return simd::spread_groups<groups_per_chunk, Arch>(s);
        } else if constexpr (decodes_byte_vectors) {
            return F32Codes<Format>::template group_scales<Arch>(simd::spread_byte_groups<groups_per_chunk, Arch>(s));
        } else if constexpr (groups_per_chunk == 2) {
            const float pair[2] = {group_scale(s[0]), group_scale(s[1])};
            return simd::spread_groups<2, Arch>(pair);
        } else {
            fbatch scales(group_scale(s[0]));
            static_for<groups_per_chunk - 1>([&](auto j) {
                constexpr int group = decltype(j)::value + 1;
                scales = xsimd::select(lane_in_group_[group], fbatch(group_scale(s[group])), scales);
            });
            return scales;
        }
    }

private:
    LOWBIT_ALWAYS_INLINE static float group_scale(scale_type stored) {
        if constexpr (std::is_same_v<scale_type, typename Format::scale_type>)
            return Format::group_scale(stored);
        else
            return stored;
    }

    /// Whether the instruction set spreads bytes in registers (simd::spread_byte_groups).
    static constexpr bool spreads_bytes =
        std::is_base_of_v<xsimd::avx2, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>;
    static constexpr bool byte_scales = std::is_same_v<scale_type, std::uint8_t>;
    /// Whether byte scales of eight or more groups per chunk are spread in registers and decoded as a
    /// vector (above): faster than the selects there (nvfp4 on AVX-512), not at four (mxfp4 on AVX-512,
    /// nvfp4 on AVX2; benchmarks/README.md). The batch GEMV's case: the GEMV decodes whole rows first.
    static constexpr bool decodes_byte_vectors =
        groups_per_chunk >= 8 && spreads_bytes && byte_scales && DecodesScaleVectors<Format, Arch>;
    /// Whether the scales are byte codes spread by selects (more than two groups per chunk, otherwise).
    static constexpr bool selects = groups_per_chunk > 2 && !std::is_same_v<scale_type, float> && !decodes_byte_vectors;
    /// lane_in_group_[j]: lanes whose group is the chunk's j-th (read only when `selects`).
    std::array<xsimd::batch_bool<float, Arch>, groups_per_chunk> lane_in_group_{};
};

/// The words of weight row n after its last whole chunk (from tail_word on, fewer than W) as one more
/// chunk, zero-padded, with the scales of its lanes (zero past the row), for finish_row.
template <class Arch>
struct GemvTail {
    xsimd::batch<std::uint32_t, Arch> words;
    xsimd::batch<float, Arch> scales;
};

/// Whether rows of K codes have words after their last whole chunk of W (then gemv_tail is needed).
template <class Arch, class Format>
bool gemv_has_tail(Index K) {
    return (K * Format::bits / 32) % static_cast<Index>(xsimd::batch<float, Arch>::size) != 0;
}

/// GemvTail of weight row n, whose last whole chunk ends at word tail_word.
template <class Arch, class Format>
GemvTail<Arch> gemv_tail(const QuantizedView<Format>& q, Index n, Index tail_word) {
    constexpr int codes_per_word = 32 / Format::bits;
    constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
    const Index row_words = q.cols() * Format::bits / 32;
    alignas(64) std::array<std::uint32_t, W> words{};
    alignas(64) std::array<float, W> lane_scales{};
    for (Index i = 0; i < row_words - tail_word; ++i) {
        words[static_cast<std::size_t>(i)] = q.codes(n, tail_word + i);
        lane_scales[static_cast<std::size_t>(i)] =
            Format::group_scale(q.scales(n, (tail_word + i) * codes_per_word / Format::group_size));
    }
    return {xsimd::batch<std::uint32_t, Arch>::load_aligned(words.data()),
            xsimd::batch<float, Arch>::load_aligned(lane_scales.data())};
}

/// The end of one output of a GEMV row dot product, before its horizontal sum: the vector sum of s *
/// sum(x q), plus the row's tail chunk when it has one (`tail`, with the permuted x of that chunk at
/// tail_lanes: the last chunk of permute_x_for_gemv), plus, in a format with biases, the bias term
/// sum_g b[n, g] * x_sum[g] over its whole vectors of groups (vectorised: a serial scalar loop is a
/// dependency chain as long as the row has groups, which holds up the next row).
template <class Arch, class Format>
LOWBIT_ALWAYS_INLINE inline xsimd::batch<float, Arch> finish_row_lanes(xsimd::batch<float, Arch> total,
                                                                       const QuantizedView<Format>& q, Index n,
                                                                       const float* x_sum, const GemvTail<Arch>* tail,
                                                                       const float* tail_lanes) {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int codes_per_word = 32 / Format::bits;
    constexpr Index W = static_cast<Index>(fbatch::size);
    if (tail != nullptr) {
        fbatch acc(0.0f);
        static_for<codes_per_word>([&](auto step) LOWBIT_ALWAYS_INLINE {
            constexpr int t = decltype(step)::value;
            acc = simd::fma(F32Codes<Format>::template step<Arch, t>(tail->words),
                            fbatch::load_aligned(tail_lanes + t * W), acc);
        });
        total = simd::fma(acc, tail->scales, total);
    }
    if constexpr (Format::has_biases) {
        const Index groups = q.cols() / Format::group_size;
        const float* bias_row = &q.biases(n, 0);
        for (Index g = 0; g + W <= groups; g += W)
            total = simd::fma(fbatch::load_unaligned(bias_row + g), fbatch::load_unaligned(x_sum + g), total);
    }
    return total;
}

/// The output from the horizontal sum of finish_row_lanes: plus the bias term's groups past its last
/// whole vector.
template <class Arch, class Format>
LOWBIT_ALWAYS_INLINE inline float finish_row_rest(float sum, const QuantizedView<Format>& q, Index n,
                                                  const float* x_sum) {
    if constexpr (Format::has_biases) {
        constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
        const Index groups = q.cols() / Format::group_size;
        const float* bias_row = &q.biases(n, 0);
        for (Index g = groups / W * W; g < groups; ++g) sum += bias_row[g] * x_sum[g];
    }
    return sum;
}

/// One output of a GEMV row dot product: finish_row_lanes, its horizontal sum, finish_row_rest.
template <class Arch, class Format>
LOWBIT_ALWAYS_INLINE inline float finish_row(xsimd::batch<float, Arch> total, const QuantizedView<Format>& q, Index n,
                                             const float* x_sum, const GemvTail<Arch>* tail, const float* tail_lanes) {
    return finish_row_rest<Arch>(simd::reduce_add(finish_row_lanes<Arch>(total, q, n, x_sum, tail, tail_lanes)), q, n,
                                 x_sum);
}

/// finish_row of a batch kernel's Rows x Cols outputs at once (Rows * Cols <= W), their horizontal sums
/// in one simd::reduce_add_each (the same bits; on AVX-512 30 lane permutes and 15 adds where 16
/// separate sums cost about four times the instructions). Output (r, j), for the first `valid` columns:
///   out[r * out_stride + column[j]] = finish_row(total[r * Cols + j], q, column[j], x_sum + r * groups,
///                                                tails[j], tail_lanes + r * lanes_stride)
/// x_sum: the group sums of the Rows x rows, groups = q.cols() / group_size apart.
template <class Arch, class Format, int Rows, int Cols>
LOWBIT_ALWAYS_INLINE inline void finish_rows(const std::array<xsimd::batch<float, Arch>, Rows * Cols>& total,
                                             const QuantizedView<Format>& q, const std::array<Index, Cols>& column,
                                             int valid, const float* x_sum,
                                             const std::array<const GemvTail<Arch>*, Cols>& tails,
                                             const float* tail_lanes, Index lanes_stride, float* out,
                                             Index out_stride) {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    static_assert(Rows * Cols <= W, "finish_rows: one lane per output");
    const Index groups = q.cols() / Format::group_size;
    std::array<fbatch, W> lanes;
    lanes.fill(fbatch(0.0f));
    static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
        static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
            constexpr int i = decltype(r)::value * Cols + decltype(j)::value;
            lanes[i] = finish_row_lanes<Arch>(total[i], q, column[j], x_sum + r * groups, tails[j],
                                              tail_lanes == nullptr ? nullptr : tail_lanes + r * lanes_stride);
        });
    });
    alignas(64) std::array<float, W> sums;
    simd::reduce_add_each(lanes.data()).store_aligned(sums.data());
    for (int j = 0; j < valid; ++j)
        for (int r = 0; r < Rows; ++r)
            out[r * out_stride + column[static_cast<std::size_t>(j)]] =
                finish_row_rest<Arch>(sums[static_cast<std::size_t>(r * Cols + j)], q,
                                      column[static_cast<std::size_t>(j)], x_sum + r * groups);
}

/// out[n] for n in [n_begin, n_end) (M = 1). x_lanes: permute_x_for_gemv of the row x
/// (Arch::alignment()-aligned), x_sum: group_sums of x.
template <class Arch, class Format>
void qgemv_f32_rows(const QuantizedView<Format>& q, const float* x_lanes, const float* x_sum, Index n_begin,
                    Index n_end, float* out) {
    static_assert(Format::codes_in_whole_words, "qgemv handles Bits in {2, 4, 8}; other widths go through qgemm");
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr int Bits = Format::bits;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int codes_per_word = 32 / Bits;

    const Index chunks = (q.cols() * Bits / 32) / W;
    const bool has_tail = gemv_has_tail<Arch, Format>(q.cols());
    // Byte scales that decode as vectors are decoded a row at a time (a vector per W groups) and read
    // as floats, which costs fewer instructions per chunk than decoding each chunk's scales.
    constexpr bool decodes_rows = DecodesScaleVectors<Format, Arch>;
    using lane_scale_type = std::conditional_t<decodes_rows, float, typename Format::scale_type>;
    const ChunkScales<Arch, Format, lane_scale_type> lane_scales;
    std::vector<float> decoded_scales(decodes_rows ? static_cast<std::size_t>(q.groups_per_row()) : 0);

    // One output row at a time, so the packed codes are read as one sequential stream (interleaving
    // rows to share x loads made DRAM serve several short streams at once, which it does slower:
    // benchmarks/README.md).
    // chunk_block consecutive chunks are in flight, each with its own accumulator, to cover the fma
    // latency. Loops over chunks and code steps are unrolled at compile time (static_for), which
    // Clang 14 would otherwise not do.
    // Fewer for 2- and 1-bit codes: with 16 or 32 code steps (a mask each) four chunks' words and
    // accumulators no longer fit the registers, and GCC kept the accumulators on the stack, storing
    // and reloading them at every step (benchmarks/README.md).
    constexpr int chunk_block = codes_per_word >= 32 ? 1 : codes_per_word >= 16 ? 2 : 4;
    // Codes are prefetched into L2 this many rows (a few KiB) ahead: about the DRAM latency at the
    // rate the arithmetic consumes them (distance and cache level chosen by measurement:
    // benchmarks/README.md).
    constexpr Index prefetch_rows = 2;
    auto row_dot = [&](Index n) {
        const std::uint32_t* codes = &q.codes(n, 0);
        const lane_scale_type* scales;
        if constexpr (decodes_rows) {
            decode_row_scales<Arch, Format>(&q.scales(n, 0), q.groups_per_row(), decoded_scales.data());
            scales = decoded_scales.data();
        } else {
            scales = &q.scales(n, 0);
        }
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
                    const fbatch value = F32Codes<Format>::template step<Arch, t>(words[i]);
                    if constexpr (t == 0)
                        acc[i] = value * xv;
                    else
                        acc[i] = simd::fma(value, xv, acc[i]);
                });
            });
            static_for<Count>([&](auto i) { total[i] = simd::fma(acc[i], lane_scales(scales, c0 + i), total[i]); });
        };
        Index c = 0;
        for (; c + chunk_block <= chunks; c += chunk_block) block(std::integral_constant<int, chunk_block>{}, c);
        for (; c < chunks; ++c) block(std::integral_constant<int, 1>{}, c);
        static_for<chunk_block - 1>([&](auto i) { total[0] += total[i + 1]; });

        const GemvTail<Arch> tail = has_tail ? gemv_tail<Arch>(q, n, chunks * W) : GemvTail<Arch>{};
        out[n] =
            finish_row<Arch>(total[0], q, n, x_sum, has_tail ? &tail : nullptr, x_lanes + chunks * codes_per_word * W);
    };
    for (Index n = n_begin; n < n_end; ++n) row_dot(n);
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
