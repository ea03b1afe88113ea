// The f32 GEMV (M = 1) and batch GEMV (small M) on MLX affine codes that straddle words (3, 5 and 6
// bits): out[m, n] = x_m * dequantize(q)^T, f32 activations on the packed codes, any xsimd Arch (W float
// lanes). Kernels and threaded drivers; the whole-word widths have gemm/f32_gemv.hpp and
// gemm/f32_gemv_batch.hpp.
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
//
// The batch form shares each unpacked code vector between several rows of x and each loaded x vector
// between two weight rows (AVX-512), as the whole-word batch GEMV: accumulate_straddling_chunk is the
// one chunk loop of both forms.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../gemm/f32_gemv.hpp"
#include "../gemm/f32_gemv_batch.hpp"
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
    /// Floats of permute_x for rows of K codes.
    static Index lanes(Index K) { return chunks(K) * P * T * W; }

    /// The batch form's tile: batch_rows x rows times batch_cols weight rows per pass (on AVX-512 16
    /// accumulators, each loaded x vector feeding two fmas; 16 registers hold 4), the row walked
    /// slice_chunks chunks at a time so that batch_rows rows of its permuted x (about 32 KiB at most)
    /// stay in L1.
    static constexpr int batch_rows = W >= 16 ? 8 : 4;
    static constexpr int batch_cols = W >= 16 ? 2 : 1;
    static constexpr Index slice_chunks = std::max(1, 32768 / (batch_rows * P * T * W * 4));
    /// The largest M the batch form is chosen for: from M = 8 on the panel GEMM, which unpacks each code
    /// once for up to MC rows instead of once per batch_rows, is as fast (a straddling code costs the
    /// batch form more code steps than a whole-word one; benchmarks/README.md).
    static constexpr Index batch_max_m = 7;

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

/// Where the straddling kernels read weight row n: its own codes and scales, except for rows near the
/// end of q's arrays, where the last chunk's reads past the row (the next rows' words and scales, or
/// the row padding's) would leave them: zero-padded copies there, in one of Slots buffers (one per
/// weight row a kernel holds at once). Lanes of the last chunk past the row meet x = 0 (permute_x) and
/// take scale 0 (row_lanes): a finite code times 0 is 0, whatever scale the next row has.
template <class Arch, class Format, int Slots>
class StraddlingRowReader {
public:
    using gemv = StraddlingGemv<Arch, Format>;
    static constexpr int W = gemv::W, P = gemv::P, chunk_words = gemv::layout::chunk_words;

    explicit StraddlingRowReader(const QuantizedView<Format>& q)
        : q_(q),
          row_words_(q.cols() * Format::bits / 32),
          whole_chunks_(row_words_ / chunk_words),
          chunks_(gemv::chunks(q.cols())),
          codes_end_(q.codes.data() + (q.rows() - 1) * q.codes.stride() + q.codes.cols()),
          scales_end_(q.scales.data() + (q.rows() - 1) * q.scales.stride() + q.scales.cols()) {
        for (auto& padded : padded_scales_)
            padded.assign(static_cast<std::size_t>(chunks_ * std::max(gemv::groups_per_chunk, 1) + W), 0.0f);
        static_for<P>([&](auto v) LOWBIT_ALWAYS_INLINE {
            alignas(64) std::array<float, W> in_row{};
            for (int i = 0; i < W; ++i)
                in_row[static_cast<std::size_t>(i)] =
                    whole_chunks_ * chunk_words + v * W + i < row_words_ ? 1.0f : 0.0f;
            tail_lanes_[v] = xsimd::batch<float, Arch>::load_aligned(in_row.data()) != xsimd::batch<float, Arch>(0.0f);
            all_lanes_[v] = xsimd::batch<float, Arch>(0.0f) == xsimd::batch<float, Arch>(0.0f);
        });
    }

    Index chunks() const { return chunks_; }
    /// The lanes of chunk c's P vectors that hold the row's words: all of them but in a partial last chunk.
    const xsimd::batch_bool<float, Arch>* row_lanes(Index c) const {
        return c < whole_chunks_ ? all_lanes_.data() : tail_lanes_.data();
    }

    /// Row n's scales, readable for every chunk's W-lane load.
    const float* scales(Index n, int slot) {
        const float* scales = &q_.scales(n, 0);
        if (scales + chunks_ * std::max(gemv::groups_per_chunk, 1) + W <= scales_end_) return scales;
        auto& padded = padded_scales_[static_cast<std::size_t>(slot)];
        std::copy(scales, scales + q_.groups_per_row(), padded.begin());
        return padded.data();
    }

    /// The words of row n's chunk c (chunk_words readable).
    const std::uint32_t* chunk_words_of(Index n, Index c, int slot) {
        const std::uint32_t* words = &q_.codes(n, 0) + c * chunk_words;
        if (c < whole_chunks_ || words + chunk_words <= codes_end_) return words;
        std::uint32_t* padded = padded_words_[static_cast<std::size_t>(slot)].data();
        std::fill(std::copy(words, &q_.codes(n, 0) + row_words_, padded), padded + chunk_words, 0u);
        return padded;
    }

private:
    const QuantizedView<Format>& q_;
    Index row_words_, whole_chunks_, chunks_;
    const std::uint32_t* codes_end_;
    const float* scales_end_;
    std::array<std::vector<float>, Slots> padded_scales_;
    std::array<std::array<std::uint32_t, chunk_words>, Slots> padded_words_{};
    std::array<xsimd::batch_bool<float, Arch>, P> tail_lanes_{}, all_lanes_{};
};

/// One chunk c (P vectors of W words) of Cols weight rows against Rows permuted x rows (lanes_stride
/// floats apart):
///   total[r * Cols + j] += sum over vectors v of (sum over steps t of piece(v, t) * x_lane(r, v, t)) * lane scales(v)
/// words[j]: the chunk's words of weight row j; scales[j]: that row's scales (StraddlingRowReader); ahead[j]: a row
/// whose chunk c is prefetched into L2 (nullptr: none); row_lanes: StraddlingRowReader::row_lanes(c), lanes past
/// the row (in a partial last chunk) scaled by 0 (one select per vector, where a separate instance for the last
/// chunk would double the compile time of this fully unrolled loop). Each code vector feeds Rows fmas and each x
/// vector Cols; one output (Rows = Cols = 1) alternates two accumulators to halve the fma chain.
template <class Arch, class Format, int Rows, int Cols>
LOWBIT_ALWAYS_INLINE inline void accumulate_straddling_chunk(
    const std::array<const std::uint32_t*, Cols>& words, const std::array<const float*, Cols>& scales,
    const std::array<const std::uint32_t*, Cols>& ahead, Index c, const float* x_lanes, Index lanes_stride,
    const xsimd::batch_bool<float, Arch>* row_lanes, std::array<xsimd::batch<float, Arch>, Rows * Cols>& total) {
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    using gemv = StraddlingGemv<Arch, Format>;
    using layout = typename gemv::layout;
    constexpr int W = gemv::W, P = gemv::P, T = gemv::T, GPC = gemv::groups_per_chunk;
    constexpr int A = Rows * Cols == 1 ? 2 : 1;  // accumulators per output
    const float* lanes = x_lanes + c * P * T * W;
    std::array<fbatch, Cols> chunk_scales;
    if constexpr (GPC > 0)
        static_for<Cols>([&](auto j) { chunk_scales[j] = fbatch::load_unaligned(scales[j] + c * GPC); });
    static_for<P>([&](auto vector) LOWBIT_ALWAYS_INLINE {
        constexpr int v = decltype(vector)::value;
        std::array<ubatch, Cols> word;
        static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
            if (ahead[j]) __builtin_prefetch(ahead[j] + c * layout::chunk_words + v * W, 0, 2);
            word[j] = ubatch::load_unaligned(words[j] + v * W);
        });
        std::array<fbatch, Rows * Cols * A> acc;
        static_for<T>([&](auto step) LOWBIT_ALWAYS_INLINE {
            constexpr int t = decltype(step)::value;
            const ubatch mask = ubatch::load_aligned(gemv::tables.mask[v][t]);
            std::array<fbatch, Cols> value;
            static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
                const ubatch piece = t + 1 == T ? simd::shift_right<layout::top_shift>(word[j]) & mask : word[j] & mask;
                value[j] = xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(piece));
            });
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                const fbatch xv = fbatch::load_aligned(lanes + r * lanes_stride + (v * T + t) * W);
                static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
                    constexpr int a = (decltype(r)::value * Cols + decltype(j)::value) * A + t % A;
                    if constexpr (t < A)
                        acc[a] = value[j] * xv;
                    else
                        acc[a] = simd::fma(value[j], xv, acc[a]);
                });
            });
        });
        static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
            fbatch scale;
            if constexpr (GPC > 0)
                scale = simd::permute_lanes(chunk_scales[j], ubatch::load_aligned(gemv::tables.group_lane[v]));
            else
                scale = fbatch(scales[j][c * layout::chunk_words / Format::words_per_group]);
            scale = xsimd::select(row_lanes[v], scale, fbatch(0.0f));
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                constexpr int i = decltype(r)::value * Cols + decltype(j)::value;
                fbatch sum = acc[i * A];
                if constexpr (A == 2) sum += acc[i * A + 1];
                total[i] = simd::fma(sum, scale, total[i]);
            });
        });
    });
}

/// out[n] for n in [n_begin, n_end) (M = 1). x_lanes: StraddlingGemv::permute_x of the row x
/// (Arch::alignment()-aligned), x_sum: group_sums of x.
template <class Arch, class Format>
void qgemv_f32_straddling_rows(const QuantizedView<Format>& q, const float* x_lanes, const float* x_sum, Index n_begin,
                               Index n_end, float* out) {
    using fbatch = xsimd::batch<float, Arch>;
    if (n_begin >= n_end) return;
    StraddlingRowReader<Arch, Format, 1> rows(q);
    // Codes are prefetched into L2 two rows ahead, as in the whole-word GEMV (f32_gemv.hpp).
    constexpr Index prefetch_rows = 2;
    for (Index n = n_begin; n < n_end; ++n) {
        const std::array<const float*, 1> scales{rows.scales(n, 0)};
        const std::array<const std::uint32_t*, 1> ahead{n + prefetch_rows < n_end ? &q.codes(n + prefetch_rows, 0)
                                                                                  : nullptr};
        std::array<fbatch, 1> total{fbatch(0.0f)};
        for (Index c = 0; c < rows.chunks(); ++c)
            accumulate_straddling_chunk<Arch, Format, 1, 1>({rows.chunk_words_of(n, c, 0)}, scales, ahead, c, x_lanes,
                                                            0, rows.row_lanes(c), total);
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
        static_cast<std::size_t>(std::max<Index>(gemv::lanes(K), 1)));
    gemv::permute_x(x, K, x_lanes.data());
    parallel_for(static_cast<std::size_t>(N), gemv_row_grain<Format>(K), [&](std::size_t begin, std::size_t end) {
        qgemv_f32_straddling_rows<Arch, Format>(q, x_lanes.data(), x_sum.data(), static_cast<Index>(begin),
                                                static_cast<Index>(end), out);
    });
}

/// The batch form (2 <= M <= batch_max_m) for Rows rows of x (lanes_stride floats apart, each
/// permuted as by permute_x; x_sum: their group_sums, groups apart) and output columns [n_begin,
/// n_end): batch_cols columns per pass, the row walked slice_chunks chunks at a time (every column takes
/// the first chunks, then every column the next), so the slice's permuted x stays in L1 while the columns
/// pass, as in the whole-word deep kernel (gemm/f32_gemv_batch.hpp). Between slices each column's Rows
/// totals wait in `totals` (Rows * W floats per column, aligned). The codes of the columns as many on
/// (the driver's next tile), up to prefetch_end, are prefetched into L2 meanwhile.
template <class Arch, class Format, int Rows>
void qgemv_f32_straddling_batch_rows(
    const QuantizedView<Format>& q, const float* x_lanes, Index lanes_stride, const float* x_sum, Index n_begin,
    Index n_end, Index prefetch_end, float* out, Index out_stride, float* totals,
    StraddlingRowReader<Arch, Format, StraddlingGemv<Arch, Format>::batch_cols>& rows) {
    using fbatch = xsimd::batch<float, Arch>;
    using gemv = StraddlingGemv<Arch, Format>;
    constexpr int W = gemv::W;
    const Index chunks = rows.chunks();
    // batch_cols columns n .. n + batch_cols - 1 over chunks [c0, c1), of which the first `valid` exist: a
    // last odd column is walked as a pair with itself (its copy's results dropped), so the unrolled loop
    // has one instance per Rows. Totals from `totals` (or zero at the first chunk) and back, or the outputs
    // at the last chunk.
    constexpr int Cols = gemv::batch_cols;
    auto pass = [&](Index n, int valid, Index c0, Index c1) LOWBIT_ALWAYS_INLINE {
        std::array<fbatch, Rows * Cols> total;
        std::array<const float*, Cols> scales;
        std::array<const std::uint32_t*, Cols> ahead;
        std::array<Index, Cols> column;
        const Index ahead_rows = n + (n_end - n_begin) + Cols - 1 < prefetch_end ? n_end - n_begin : 0;
        static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
            constexpr int col = decltype(j)::value;
            column[j] = col < valid ? n + col : n;
            scales[j] = rows.scales(column[j], col);
            ahead[j] = ahead_rows > 0 && col < valid ? &q.codes(column[j] + ahead_rows, 0) : nullptr;
            const float* waiting = totals + (column[j] - n_begin) * Rows * W;
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                total[decltype(r)::value * Cols + col] =
                    c0 == 0 ? fbatch(0.0f) : fbatch::load_aligned(waiting + decltype(r)::value * W);
            });
        });
        for (Index c = c0; c < c1; ++c) {
            std::array<const std::uint32_t*, Cols> words;
            static_for<Cols>([&](auto j) { words[j] = rows.chunk_words_of(column[j], c, decltype(j)::value); });
            accumulate_straddling_chunk<Arch, Format, Rows, Cols>(words, scales, ahead, c, x_lanes, lanes_stride,
                                                                  rows.row_lanes(c), total);
        }
        if (c1 < chunks) {
            static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
                constexpr int col = decltype(j)::value;
                if (col >= valid) return;
                static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                    constexpr int row = decltype(r)::value;
                    total[row * Cols + col].store_aligned(totals + (n + col - n_begin) * Rows * W + row * W);
                });
            });
        } else {
            finish_rows<Arch, Format, Rows, Cols>(total, q, column, valid, x_sum, {}, nullptr, 0, out, out_stride);
        }
    };
    Index c0 = 0;
    do {
        const Index c1 = std::min(chunks, c0 + gemv::slice_chunks);
        for (Index n = n_begin; n < n_end; n += Cols)
            pass(n, static_cast<int>(std::min<Index>(Cols, n_end - n)), c0, c1);
        c0 = c1;
    } while (c0 < chunks);
}

/// out[m * out_stride + n] = (x * dequantize(q)^T)[m, n] for small M (the batch form of
/// qgemv_f32_straddling): threads over output columns; within a thread, tiles of output columns whose
/// codes stay in L2 while every block of batch_rows x rows passes over them (batch_gemv_split, as the
/// whole-word batch GEMV).
template <class Arch, class Format>
void qgemv_f32_straddling_batch(const float* x, Index x_stride, Index M, const QuantizedView<Format>& q, float* out,
                                Index out_stride) {
    using gemv = StraddlingGemv<Arch, Format>;
    constexpr int GroupSize = Format::group_size, W = gemv::W, block_rows = gemv::batch_rows;
    const Index K = q.cols(), N = q.rows(), groups = K / GroupSize;
    std::vector<float> x_sum(static_cast<std::size_t>(M * groups));
    group_sums<Arch, GroupSize>(x, x_stride, M, K, x_sum.data());
    // Each permuted row padded to a whole number of cache lines, so every row starts aligned.
    const Index lanes_stride = (std::max<Index>(gemv::lanes(K), 1) + 15) / 16 * 16;
    std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> x_lanes(
        static_cast<std::size_t>(M * lanes_stride));
    for (Index m = 0; m < M; ++m) gemv::permute_x(x + m * x_stride, K, x_lanes.data() + m * lanes_stride);
    const BatchGemvSplit split = batch_gemv_split(K * Format::bits / 8, M, block_rows);
    parallel_for(static_cast<std::size_t>(N), split.grain, [&](std::size_t begin, std::size_t end) {
        StraddlingRowReader<Arch, Format, gemv::batch_cols> rows(q);
        std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> totals(
            static_cast<std::size_t>(split.tile * block_rows * W));
        for (auto n0 = static_cast<Index>(begin); n0 < static_cast<Index>(end); n0 += split.tile) {
            const Index n1 = std::min<Index>(n0 + split.tile, static_cast<Index>(end));
            for (Index m = 0; m < M; m += block_rows) {
                static_for<block_rows + 1>([&](auto count) {
                    constexpr int Rows = decltype(count)::value;
                    if constexpr (Rows > 0)
                        if (std::min<Index>(block_rows, M - m) == Rows)
                            qgemv_f32_straddling_batch_rows<Arch, Format, Rows>(
                                q, x_lanes.data() + m * lanes_stride, lanes_stride, x_sum.data() + m * groups, n0, n1,
                                static_cast<Index>(end), out + m * out_stride, out_stride, totals.data(), rows);
                });
            }
        }
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
