// The f32 GEMV (M = 1) on MLX affine codes that straddle words (3, 5 and 6 bits): out[n] = x *
// dequantize(q)^T for one row x, f32 activations on the packed codes, any xsimd Arch (W float lanes).
// Kernel and threaded driver; the whole-word widths have gemm/f32_gemv.hpp.
//
// A row's bit pattern repeats every P = Bits / gcd(Bits, 32) words (3 words for 3 and 6 bits, 5 for 5
// bits). A chunk is P vectors of W consecutive words, a whole number of periods; lane i of vector v
// holds word v*W + i, whose phase (v*W + i) % P fixes which bits belong to which code. 3 bits:
//
//   phase 0  bits  0..29: codes 0..9 whole      bits 30-31: the low 2 bits of code 10
//   phase 1  bit   0: the top bit of code 10    bits 1..30: codes 11..20 whole   bit 31: the low bit of 21
//   phase 2  bits  0-1: the top 2 bits of 21    bits 2..31: codes 22..31 whole
//
// Each lane takes its own word's pieces, one code step at a time, and no lane needs another's bits: a
// code split over two words is two pieces, each met by its own x times 2^(the code's bits below the
// piece), and the two products sum to the code's. Steps 0..T-2 mask a piece in place (word & mask, a
// mask per lane) and meet x prescaled by 2^-start (exact, as in the whole-word GEMV), so they shift
// nothing. Step T-1 takes the piece that ends at bit 31 as (word >> S) & mask, S the smallest such
// start, so the converted int is never negative. A lane with fewer pieces meets mask 0 and x 0. Code
// steps per word against the whole-word widths': T = 12 for 3 bits (4-bit: 8), 8 for 5 bits and 6 for
// 6 bits (8-bit: 4), for 10.7, 6.4 and 5.3 codes.
//
// Groups are whole words and a code never crosses a group's edge, so every word lies in one group:
// each vector takes its lanes' group scales once per chunk, a lane permute of the chunk's scales (a
// broadcast when a chunk lies in one group). Per group s * sum(x q) (+ b * sum(x)), f32 accumulation.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../gemm/f32_gemv.hpp"
#include "../gemm/group_sums.hpp"
#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// One piece of a word: bits [start, start + length) of the word are bits [below, below + length) of
/// code `code` of the period.
struct StraddlingPiece {
    int start = 0, length = 0, below = 0, code = -1;
};

/// The pieces of a word of phase `phase` (Bits-bit codes) in ascending bit order; `count` of them.
template <int Bits>
constexpr std::array<StraddlingPiece, 16> straddling_pieces(int phase, int& count) {
    constexpr int period_codes = Bits / std::gcd(Bits, 32) * 32 / Bits;
    std::array<StraddlingPiece, 16> list{};
    count = 0;
    for (int j = 0; j < period_codes; ++j) {
        const int low = std::max(j * Bits, 32 * phase), high = std::min((j + 1) * Bits, 32 * phase + 32);
        if (low < high) list[static_cast<std::size_t>(count++)] = {low - 32 * phase, high - low, low - j * Bits, j};
    }
    return list;
}

/// The most pieces in a word (T), or with `top_start` the smallest start of a word's last piece (S).
template <int Bits>
constexpr int straddling_pieces_extreme(bool top_start) {
    int most = 0, smallest = 32;
    for (int phase = 0; phase < Bits / std::gcd(Bits, 32); ++phase) {
        int count = 0;
        const auto list = straddling_pieces<Bits>(phase, count);
        most = std::max(most, count);
        smallest = std::min(smallest, list[static_cast<std::size_t>(count - 1)].start);
    }
    return top_start ? smallest : most;
}

/// The per-lane tables of the straddling GEMV for Bits-bit codes and W lanes (see the top of this
/// file): for vector v of a chunk, code step t and lane i, the mask of the lane's piece, the chunk-local
/// code it belongs to (-1: none) and the power of two its x is scaled by; and each lane's group within
/// the chunk.
template <int Bits, int W>
struct StraddlingLayout {
    static_assert(32 % Bits != 0, "StraddlingLayout: codes of this width fill whole words");
    static constexpr int period_words = Bits / std::gcd(Bits, 32);  ///< P
    static constexpr int period_codes = period_words * 32 / Bits;
    static constexpr int chunk_words = period_words * W;
    static constexpr int chunk_codes = chunk_words * 32 / Bits;
    static constexpr int steps = straddling_pieces_extreme<Bits>(false);  ///< T: the last takes each word's top piece
    static constexpr int top_shift = straddling_pieces_extreme<Bits>(true);  ///< S

    struct Tables {
        alignas(64) std::uint32_t mask[period_words][steps][W]{};
        int code[period_words][steps][W]{};
        float factor[period_words][steps][W]{};                   ///< 2^(code bits below - the piece's place)
        alignas(64) std::uint32_t group_lane[period_words][W]{};  ///< the lane's group within the chunk
    };
    static constexpr Tables tables(int words_per_group) {
        Tables t{};
        for (int v = 0; v < period_words; ++v)
            for (int i = 0; i < W; ++i) {
                const int word = v * W + i, phase = word % period_words,
                          first_code = word / period_words * period_codes;
                t.group_lane[v][i] = static_cast<std::uint32_t>(word / words_per_group);
                int count = 0;
                const auto list = straddling_pieces<Bits>(phase, count);
                for (int step = 0; step < steps; ++step) t.code[v][step][i] = -1;
                for (int k = 0; k < count; ++k) {
                    const StraddlingPiece& piece = list[static_cast<std::size_t>(k)];
                    const bool top = k == count - 1;
                    const int step = top ? steps - 1 : k, shift = top ? top_shift : 0;
                    t.mask[v][step][i] = ((std::uint32_t{1} << piece.length) - 1u) << (piece.start - shift);
                    t.code[v][step][i] = first_code + piece.code;
                    float factor = 1.0f;  // exact powers of two
                    for (int e = piece.below - (piece.start - shift); e > 0; --e) factor *= 2.0f;
                    for (int e = piece.below - (piece.start - shift); e < 0; ++e) factor *= 0.5f;
                    t.factor[v][step][i] = factor;
                }
            }
        return t;
    }
};

/// The straddling GEMV's layout for Format (MLX affine, Bits in {3, 5, 6}) on Arch.
template <class Arch, class Format>
struct StraddlingGemv {
    static constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
    using layout = StraddlingLayout<Format::bits, W>;
    static constexpr int P = layout::period_words, T = layout::steps;
    /// Groups per chunk (0 when a chunk lies inside one group; a chunk then never spans two, both being
    /// whole numbers of periods times powers of two).
    static constexpr int groups_per_chunk = layout::chunk_words / Format::words_per_group;
    static constexpr auto tables = layout::tables(Format::words_per_group);

    static Index chunks(Index K) { return (K * Format::bits / 32 + layout::chunk_words - 1) / layout::chunk_words; }

    /// x_lanes[((c * P + v) * T + t) * W + i]: x of lane i's piece at step t of vector v of chunk c,
    /// times its power of two (exact unless x * 2^-31 is subnormal); 0 for no piece or a code past K.
    static void permute_x(const float* x, Index K, float* x_lanes) {
        for (Index c = 0; c < chunks(K); ++c)
            for (int v = 0; v < P; ++v)
                for (int t = 0; t < T; ++t)
                    for (int i = 0; i < W; ++i) {
                        const int local = tables.code[v][t][i];
                        const Index k = c * layout::chunk_codes + local;
                        x_lanes[((c * P + v) * T + t) * W + i] =
                            local >= 0 && k < K ? x[k] * tables.factor[v][t][i] : 0.0f;
                    }
    }
};

/// out[n] for n in [n_begin, n_end) (M = 1). x_lanes: StraddlingGemv::permute_x of the row x
/// (Arch::alignment()-aligned), x_sum: group_sums of x.
template <class Arch, class Format>
void qgemv_f32_straddling_rows(const QuantizedView<Format>& q, const float* x_lanes, const float* x_sum, Index n_begin,
                               Index n_end, float* out) {
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    using gemv = StraddlingGemv<Arch, Format>;
    using layout = typename gemv::layout;
    constexpr int W = gemv::W, P = gemv::P, T = gemv::T, GPC = gemv::groups_per_chunk;
    constexpr int chunk_words = layout::chunk_words;
    if (n_begin >= n_end) return;
    const Index row_words = q.cols() * Format::bits / 32, groups = q.groups_per_row();
    const Index whole_chunks = row_words / chunk_words, chunks = gemv::chunks(q.cols());
    const bool has_tail = whole_chunks < chunks;
    // The last chunk of a row reads past the row's words and the scale loads past its groups: the
    // following rows' (or row padding's), whose lanes meet x = 0 and take scale 0 (tail_lanes; a
    // finite code times 0 is 0, whatever scale that row has). Only rows near the end of the arrays,
    // where those reads would leave them, go through zero-padded copies instead.
    const std::uint32_t* codes_end = q.codes.data() + (q.rows() - 1) * q.codes.stride() + q.codes.cols();
    const float* scales_end = q.scales.data() + (q.rows() - 1) * q.scales.stride() + q.scales.cols();
    std::vector<float> padded_scales(static_cast<std::size_t>(chunks * std::max(GPC, 1) + W), 0.0f);
    alignas(64) std::uint32_t padded_words[chunk_words];
    xsimd::batch_bool<float, Arch> tail_lanes[P];  // the lanes of the last chunk that hold the row's words
    static_for<P>([&](auto v) LOWBIT_ALWAYS_INLINE {
        alignas(64) std::array<float, W> in_row{};
        for (int i = 0; i < W; ++i)
            in_row[static_cast<std::size_t>(i)] = whole_chunks * chunk_words + v * W + i < row_words ? 1.0f : 0.0f;
        tail_lanes[v] = fbatch::load_aligned(in_row.data()) != fbatch(0.0f);
    });
    // Codes are prefetched into L2 two rows ahead, as in the whole-word GEMV (f32_gemv.hpp).
    constexpr Index prefetch_rows = 2;

    for (Index n = n_begin; n < n_end; ++n) {
        const std::uint32_t* codes = &q.codes(n, 0);
        const float* scales = &q.scales(n, 0);
        if (scales + chunks * std::max(GPC, 1) + W > scales_end) {
            std::copy(scales, scales + groups, padded_scales.begin());
            scales = padded_scales.data();
        }
        const std::uint32_t* ahead = n + prefetch_rows < n_end ? &q.codes(n + prefetch_rows, 0) : nullptr;
        fbatch total[P];
        static_for<P>([&](auto v) LOWBIT_ALWAYS_INLINE { total[v] = fbatch(0.0f); });
        auto chunk = [&]<bool Tail>(std::bool_constant<Tail>, const std::uint32_t* words,
                                    Index c) LOWBIT_ALWAYS_INLINE {
            const float* lanes = x_lanes + c * P * T * W;
            fbatch chunk_scales;
            if constexpr (GPC > 0) chunk_scales = fbatch::load_unaligned(scales + c * GPC);
            static_for<P>([&](auto vector) LOWBIT_ALWAYS_INLINE {
                constexpr int v = decltype(vector)::value;
                if (ahead) __builtin_prefetch(ahead + c * chunk_words + v * W, 0, 2);
                const ubatch word = ubatch::load_unaligned(words + v * W);
                // Two accumulators (even and odd steps) to halve the fma chain.
                fbatch acc[2] = {fbatch(0.0f), fbatch(0.0f)};
                static_for<T>([&](auto step) LOWBIT_ALWAYS_INLINE {
                    constexpr int t = decltype(step)::value;
                    const ubatch mask = ubatch::load_aligned(gemv::tables.mask[v][t]);
                    const ubatch piece = t + 1 == T ? simd::shift_right<layout::top_shift>(word) & mask : word & mask;
                    const fbatch value = xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(piece));
                    acc[t % 2] = simd::fma(value, fbatch::load_aligned(lanes + (v * T + t) * W), acc[t % 2]);
                });
                fbatch scale;
                if constexpr (GPC > 0)
                    scale = simd::permute_lanes(chunk_scales, ubatch::load_aligned(gemv::tables.group_lane[v]));
                else
                    scale = fbatch(scales[c * chunk_words / Format::words_per_group]);
                if constexpr (Tail) scale = xsimd::select(tail_lanes[v], scale, fbatch(0.0f));
                total[v] = simd::fma(acc[0] + acc[1], scale, total[v]);
            });
        };
        for (Index c = 0; c < whole_chunks; ++c) chunk(std::false_type{}, codes + c * chunk_words, c);
        if (has_tail) {
            const std::uint32_t* words = codes + whole_chunks * chunk_words;
            if (words + chunk_words > codes_end) {
                std::fill(std::copy(words, codes + row_words, padded_words), padded_words + chunk_words, 0u);
                words = padded_words;
            }
            chunk(std::true_type{}, words, whole_chunks);
        }
        static_for<P - 1>([&](auto v) LOWBIT_ALWAYS_INLINE { total[0] += total[v + 1]; });
        out[n] = finish_row<Arch>(total[0], q, n, x_sum, static_cast<const GemvTail<Arch>*>(nullptr), nullptr);
    }
}

/// out[n] = x * dequantize(q)^T for one row x (contiguous, q.cols() floats), threads over output rows
/// (gemv_row_grain, as qgemv_f32).
template <class Arch, class Format>
void qgemv_f32_straddling(const float* x, const QuantizedView<Format>& q, float* out) {
    using gemv = StraddlingGemv<Arch, Format>;
    constexpr int GroupSize = Format::group_size;
    const Index K = q.cols(), N = q.rows();
    std::vector<float> x_sum(static_cast<std::size_t>(K / GroupSize));
    group_sums<Arch, GroupSize>(x, K, 1, K, x_sum.data());
    std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> x_lanes(
        static_cast<std::size_t>(std::max<Index>(gemv::chunks(K) * gemv::P * gemv::T * gemv::W, 1)));
    gemv::permute_x(x, K, x_lanes.data());
    parallel_for(static_cast<std::size_t>(N), gemv_row_grain<Format>(K), [&](std::size_t begin, std::size_t end) {
        qgemv_f32_straddling_rows<Arch, Format>(q, x_lanes.data(), x_sum.data(), static_cast<Index>(begin),
                                                static_cast<Index>(end), out);
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
