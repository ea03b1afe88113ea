// qgemv_f32_batch_rows: out[r, n] = x_r * dequantize(q)^T for a few rows x_r at once (small batches,
// 2 <= M <= a few tens), f32 activations on the codes of any format whose codes fill whole words (as
// f32_gemv.hpp), any xsimd Arch.
// Kernel only; the threaded driver is qgemv_f32_batch in f32_driver.hpp.
//
// The GEMV's layout (f32_gemv.hpp): every x row is permuted into x_lanes and each chunk of W words is
// unpacked one code step at a time (F32Codes<Format>::step). Here each unpacked code vector is
// multiplied into Rows rows of x and each loaded x vector into Cols output columns (QgemvF32Batch), so
// the codes are streamed and unpacked once per Rows rows instead of being copied into a float panel,
// and the permuted x (read from L2 when it outgrows L1) once per Cols columns. Per output column n and
// x row r:
//   acc = sum over the chunk's steps of code * x_lane  (f32, the chunk's lanes each in one group),
//   total_r += acc * lane scales,   out[r, n] = reduce(total_r) + sum_g b[n, g] * x_sum[r, g],
// the factorisation and the error bound of docs/numerics.md N10 (a different summation order from the
// GEMV and the panel GEMM, within the same bound). Threads split output columns n, never a sum.
// Blocks of 3 to 8 rows (AVX-512) go through qgemv_f32_batch_rows_deep: the same operations per output,
// two columns per pass, the row in slices whose x stays in L1.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../unroll.hpp"
#include "f32_codes.hpp"
#include "f32_gemv.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// Tiles of the batch GEMV: Rows x rows times Cols output columns per pass, every accumulator in
/// registers (2 * Rows * Cols of the 32 AVX-512 or 16 AVX2 vector registers); each loaded x vector
/// feeds Cols fmas and each unpacked code vector Rows fmas.
template <class Arch>
struct QgemvF32Batch {
    static constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
    static constexpr int max_rows = 4;            ///< x rows per pass
    static constexpr int cols = W >= 16 ? 2 : 1;  ///< output columns (weight rows) per pass
    /// Blocks of deep_min_rows .. deep_rows x rows go through qgemv_f32_batch_rows_deep (deep_rows 0:
    /// none; 16 vector registers cannot hold 2 * 8 accumulators and the code and x vectors). From 3 rows
    /// on it beats the 2-column kernel, whose x rows outgrow L1; at 2 rows it does not (measured:
    /// benchmarks/README.md).
    static constexpr int deep_rows = W >= 16 ? 8 : 0;
    static constexpr int deep_min_rows = 3;
    /// Output columns per pass of the deep kernel: each x vector loaded from L1 feeds two fmas, where with
    /// one a load per fma bounded the kernel (benchmarks/README.md). 2 * 8 * 2 accumulators and totals
    /// exceed the register file; the totals spill, touched once a chunk.
    static constexpr int deep_cols = 2;
    /// Chunks (W words) per pass of the deep kernel for Bits-bit codes: deep_rows permuted x rows of the
    /// pass (32 KiB: 8 chunks of 4-bit codes on AVX-512, 4 of 2-bit, 16 of 8-bit) stay in L1 (measured:
    /// benchmarks/README.md).
    template <int Bits>
    static constexpr Eigen::Index deep_chunks = std::max(1, 32768 / (std::max(deep_rows, 1) * W * (32 / Bits) * 4));
    /// The largest M it is chosen for: above it the panel GEMM, which unpacks each code once for up to
    /// MC rows, is faster. The crossover depends on the core, between M = 16 and 32 on the hosts
    /// measured (benchmarks/README.md); 16 is the lower end.
    static constexpr Eigen::Index max_m = 16;
};

/// How a batch GEMV over rows of row_bytes bytes of codes and M rows of x (in blocks of block_rows) is
/// split: `tile` output columns whose codes (about 128 KiB) stay in L2 while the blocks of x rows pass
/// over them, and thread ranges (`grain` output columns at least) worth a worker: about 256 KiB of codes
/// times the blocks.
struct BatchGemvSplit {
    Index tile;
    std::size_t grain;
};
inline BatchGemvSplit batch_gemv_split(Index row_bytes, Index M, int block_rows) {
    const Index blocks = (M + block_rows - 1) / block_rows;
    return {std::max<Index>(1, (Index{1} << 17) / row_bytes),
            static_cast<std::size_t>(std::max<Index>(4, (Index{1} << 18) / (row_bytes * blocks)))};
}

/// The chunk loop both batch kernels share: for chunks [c_begin, c_end) of output columns n0 .. n0 +
/// Cols - 1 and Rows x rows,
///   total[r * Cols + j] += (sum over the chunk's code steps of code(n0 + j) * x_lane(r)) * lane scales,
/// in this order of operations, so a row walked in one call or in slices gives the same bits. With
/// ahead_rows > 0 the same chunks of weight rows n0 + j + ahead_rows (which must exist) are prefetched
/// into L2.
template <class Arch, class Format, int Rows, int Cols>
LOWBIT_ALWAYS_INLINE inline void accumulate_chunks(const QuantizedView<Format>& q, Index n0, const float* x_lanes,
                                                   Index lanes_stride, const ChunkScales<Arch, Format>& lane_scales,
                                                   Index c_begin, Index c_end,
                                                   std::array<xsimd::batch<float, Arch>, Rows * Cols>& total,
                                                   Index ahead_rows = 0) {
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int codes_per_word = 32 / Format::bits;
    for (Index c = c_begin; c < c_end; ++c) {
        std::array<ubatch, Cols> words;
        static_for<Cols>([&](auto j) {
            words[j] = ubatch::load_unaligned(&q.codes(n0 + j, c * W));
            if (ahead_rows > 0) __builtin_prefetch(&q.codes(n0 + j + ahead_rows, c * W), 0, 2);
        });
        std::array<fbatch, Rows * Cols> acc;
        static_for<codes_per_word>([&](auto step) LOWBIT_ALWAYS_INLINE {
            constexpr int t = decltype(step)::value;
            std::array<fbatch, Cols> value;
            static_for<Cols>([&](auto j) { value[j] = F32Codes<Format>::template step<Arch, t>(words[j]); });
            const float* lanes = x_lanes + (c * codes_per_word + t) * W;
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                const fbatch xv = fbatch::load_aligned(lanes + r * lanes_stride);
                static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
                    constexpr int a = decltype(r)::value * Cols + decltype(j)::value;
                    if constexpr (t == 0)
                        acc[a] = value[j] * xv;
                    else
                        acc[a] = simd::fma(value[j], xv, acc[a]);
                });
            });
        });
        static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
            const fbatch chunk_scales = lane_scales(&q.scales(n0 + j, 0), c);
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                constexpr int a = decltype(r)::value * Cols + decltype(j)::value;
                total[a] = simd::fma(acc[a], chunk_scales, total[a]);
            });
        });
    }
}

/// The outputs of columns n0 .. n0 + Cols - 1 and Rows x rows from their totals (finish_rows), with the
/// tail chunk after the row's `chunks` whole ones where the row has one (tail_lanes: the permuted x of
/// that chunk in the first row, lanes_stride floats apart).
template <class Arch, class Format, int Rows, int Cols>
LOWBIT_ALWAYS_INLINE inline void finish_columns(const std::array<xsimd::batch<float, Arch>, Rows * Cols>& total,
                                                const QuantizedView<Format>& q, Index n0, bool has_tail, Index chunks,
                                                const float* x_sum, const float* tail_lanes, Index lanes_stride,
                                                float* out, Index out_stride) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    std::array<GemvTail<Arch>, Cols> tail{};
    std::array<const GemvTail<Arch>*, Cols> tails{};
    std::array<Index, Cols> column;
    for (int j = 0; j < Cols; ++j) {
        column[static_cast<std::size_t>(j)] = n0 + j;
        if (has_tail) {
            tail[static_cast<std::size_t>(j)] = gemv_tail<Arch>(q, n0 + j, chunks * W);
            tails[static_cast<std::size_t>(j)] = &tail[static_cast<std::size_t>(j)];
        }
    }
    finish_rows<Arch, Format, Rows, Cols>(total, q, column, Cols, x_sum, tails, tail_lanes, lanes_stride, out,
                                          out_stride);
}

/// out[r * out_stride + n] for r < Rows and n in [n_begin, n_end). x_lanes: Rows permuted rows
/// (permute_x_for_gemv, Arch::alignment()-aligned) lanes_stride floats apart, each ending with the chunk
/// of the words after the last whole one (finish_row); x_sum: group_sums of the Rows rows.
template <class Arch, class Format, int Rows>
void qgemv_f32_batch_rows(const QuantizedView<Format>& q, const float* x_lanes, Index lanes_stride, const float* x_sum,
                          Index n_begin, Index n_end, float* out, Index out_stride) {
    static_assert(Format::codes_in_whole_words,
                  "qgemv_f32_batch_rows handles Bits in {2, 4, 8}; other widths go through qgemm");
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    const Index chunks = (q.cols() * Format::bits / 32) / W;
    constexpr Index tail_offset = Index{32 / Format::bits} * W;  // floats of permuted x per chunk
    const bool has_tail = gemv_has_tail<Arch, Format>(q.cols());
    const ChunkScales<Arch, Format> lane_scales;

    // Cols output columns n0 .. n0 + Cols - 1 over the whole row.
    auto pass = [&]<int Cols>(std::integral_constant<int, Cols>, Index n0) LOWBIT_ALWAYS_INLINE {
        std::array<fbatch, Rows * Cols> total;
        total.fill(fbatch(0.0f));
        accumulate_chunks<Arch, Format, Rows, Cols>(q, n0, x_lanes, lanes_stride, lane_scales, 0, chunks, total);
        finish_columns<Arch, Format, Rows, Cols>(total, q, n0, has_tail, chunks, x_sum, x_lanes + chunks * tail_offset,
                                                 lanes_stride, out, out_stride);
    };
    constexpr int Cols = QgemvF32Batch<Arch>::cols;
    Index n = n_begin;
    for (; n + Cols <= n_end; n += Cols) pass(std::integral_constant<int, Cols>{}, n);
    for (; n < n_end; ++n) pass(std::integral_constant<int, 1>{}, n);
}

/// qgemv_f32_batch_rows for deep_min_rows .. deep_rows rows (QgemvF32Batch<Arch>), deep_cols output columns per pass
/// and the row walked deep_chunks chunks at a time: every column of [n_begin, n_end) takes the first chunks, then every
/// column the next ones, so the permuted x of those chunks stays in L1 while the columns pass. Between passes each
/// column's Rows totals wait in `totals` (Rows * W floats per column, Arch::alignment()-aligned, (n_end - n_begin)
/// columns), so every output is the same sequence of operations as in qgemv_f32_batch_rows, and the same bits. The
/// codes of the next columns as many on (the driver's next tile), up to prefetch_end, are prefetched into L2 while
/// these are walked: the walk reads short runs of rows far apart, which the hardware prefetcher does not fetch ahead.
template <class Arch, class Format, int Rows>
void qgemv_f32_batch_rows_deep(const QuantizedView<Format>& q, const float* x_lanes, Index lanes_stride,
                               const float* x_sum, Index n_begin, Index n_end, Index prefetch_end, float* out,
                               Index out_stride, float* totals) {
    static_assert(Format::codes_in_whole_words,
                  "qgemv_f32_batch_rows_deep handles Bits in {2, 4, 8}; other widths go through qgemm");
    using fbatch = xsimd::batch<float, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    const Index chunks = (q.cols() * Format::bits / 32) / W;
    constexpr Index tail_offset = Index{32 / Format::bits} * W;  // floats of permuted x per chunk
    const bool has_tail = gemv_has_tail<Arch, Format>(q.cols());
    const ChunkScales<Arch, Format> lane_scales;
    // Cols output columns n .. n + Cols - 1 over chunks [c0, c1): their totals from `totals` (or zero at
    // the first chunk) and back, or their outputs at the last chunk.
    auto pass = [&]<int Cols>(std::integral_constant<int, Cols>, Index n, Index c0, Index c1) LOWBIT_ALWAYS_INLINE {
        std::array<fbatch, Rows * Cols> total;
        static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
            const float* waiting = totals + (n + decltype(j)::value - n_begin) * Rows * W;
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                total[decltype(r)::value * Cols + decltype(j)::value] =
                    c0 == 0 ? fbatch(0.0f) : fbatch::load_aligned(waiting + decltype(r)::value * W);
            });
        });
        const Index ahead = n + (n_end - n_begin) + Cols - 1 < prefetch_end ? n_end - n_begin : 0;
        accumulate_chunks<Arch, Format, Rows, Cols>(q, n, x_lanes, lanes_stride, lane_scales, c0, c1, total, ahead);
        if (c1 < chunks) {
            static_for<Cols>([&](auto j) LOWBIT_ALWAYS_INLINE {
                float* waiting = totals + (n + decltype(j)::value - n_begin) * Rows * W;
                static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                    total[decltype(r)::value * Cols + decltype(j)::value].store_aligned(waiting +
                                                                                        decltype(r)::value * W);
                });
            });
        } else {
            finish_columns<Arch, Format, Rows, Cols>(total, q, n, has_tail, chunks, x_sum,
                                                     x_lanes + chunks * tail_offset, lanes_stride, out, out_stride);
        }
    };
    constexpr int Cols = QgemvF32Batch<Arch>::deep_cols;
    Index c0 = 0;
    do {
        const Index c1 = std::min(chunks, c0 + QgemvF32Batch<Arch>::template deep_chunks<Format::bits>);
        Index n = n_begin;
        for (; n + Cols <= n_end; n += Cols) pass(std::integral_constant<int, Cols>{}, n, c0, c1);
        for (; n < n_end; ++n) pass(std::integral_constant<int, 1>{}, n, c0, c1);
        c0 = c1;
    } while (c0 < chunks);
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
