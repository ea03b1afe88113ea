// The transposed product of the f32 matmul on packed codes: dx = dy * dequantize(q) for dy [M, N] and q
// [N, K], the gradient of x * dequantize(q)^T with respect to x (docs/numerics.md N20). For every
// element, per weight row n in order,
//
//   dx[m, k] = sum_n fl(dy[m, n] * s[n, g(k)]) * q[n, k]  +  sum_n dy[m, n] * b[n, g(k)]
//
// (f32 accumulation, each product fused into its add; at M > 1 the scale multiplies the code first;
// the second sum, formats with biases only, by Eigen's product, added last: add_dx_bias_sums). Kernels for
// formats whose codes fill whole words (F32Codes::step), in the GEMV's lane order (f32_gemv.hpp): lane i
// of code step t in chunk c of W words is input k = (c*W + i) * (32/Bits) + t.
//   qgemv_dx_f32 (M = 1): dx accumulates in that permuted order (dx_lanes), a pass of rows_per_pass
//     weight rows per chunk so that each dx_lanes vector is loaded and stored once per pass; threads
//     over chunks (each thread walks every weight row over its own inputs, so the order per element
//     does not depend on the thread count); then dx[k] = dx_lanes * x_lanes_scale(t) (exact: a power of
//     two).
//   qgemm_dx_f32 (M > 1): the forward's panel GEMM turned around: slices of weight rows dequantized as
//     fl(s * q) into panels of the permuted columns (build_dx_panel), dy's rows packed in register
//     blocks, and the forward's microkernel over plain depth (QgemmF32Ukernel::run_depth), n in order.
// Codes that straddle words (3, 5 and 6 bits) are dequantized, fl(s * q), a block of inputs at a time and
// multiplied by Eigen (dx_dequantized_columns, as the inputs after the last whole chunk are); builds
// without SIMD run the reference (matmul_reference.hpp).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../../matrix_types.hpp"
#include "../mlx_affine/packing.hpp"
#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "f32_codes.hpp"
#include "f32_gemv.hpp"
#include "f32_ukernel.hpp"
#include "matmul_reference.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// dx[m, k] += sum_n dy[m, n] * b[n, g(k)] (formats with biases): the sums as Eigen's float product of
/// dy [M, N] with the biases [N, groups], then added a group at a time.
template <class Format>
void add_dx_bias_sums(const float* dy, Index dy_stride, Index M, const QuantizedView<Format>& q, float* dx,
                      Index dx_stride) {
    using Stride = Eigen::OuterStride<>;
    const Index groups = q.groups_per_row();
    const Eigen::Map<const RowMatrixXf, 0, Stride> dy_map(dy, M, q.rows(), Stride(dy_stride));
    const Eigen::Map<const RowMatrixXf, 0, Stride> biases(q.biases.data(), q.rows(), groups, Stride(q.biases.stride()));
    const RowMatrixXf sums = dy_map * biases;
    for (Index m = 0; m < M; ++m)
        for (Index g = 0; g < groups; ++g) {
            float* group = dx + m * dx_stride + g * Format::group_size;
            const float sum = sums(m, g);
            for (Index k = 0; k < Format::group_size; ++k) group[k] += sum;
        }
}

/// The code of weight (n, k), for codes that fill whole words.
template <class Format>
std::uint32_t code_at(const QuantizedView<Format>& q, Index n, Index k) {
    constexpr int Bits = Format::bits, codes_per_word = 32 / Bits;
    return (q.codes(n, k / codes_per_word) >> ((k % codes_per_word) * Bits)) & ((std::uint32_t{1} << Bits) - 1);
}

/// dx[:, k_begin, k_end) = dy [M, N] * the weights of those inputs dequantized once, fl(s * q), by
/// Eigen's product, in blocks of up to 512 inputs (N x 512 floats at a time); the bias sums are the
/// caller's. k_begin * Bits must be a multiple of 32 (a word boundary); any bits.
template <class Format>
void dx_dequantized_columns(const float* dy, Index dy_stride, Index M, const QuantizedView<Format>& q, Index k_begin,
                            Index k_end, float* dx, Index dx_stride) {
    using Stride = Eigen::OuterStride<>;
    constexpr int Bits = Format::bits;
    constexpr Index block_columns = 512;
    const Index N = q.rows();
    const Eigen::Map<const RowMatrixXf, 0, Stride> dy_map(dy, M, N, Stride(dy_stride));
    RowMatrixXf weights;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(std::min(block_columns, k_end - k_begin)));
    for (Index k0 = k_begin; k0 < k_end; k0 += block_columns) {
        const Index columns = std::min(block_columns, k_end - k0);
        weights.resize(N, columns);
        for (Index n = 0; n < N; ++n) {
            unpack_codes<Bits>(&q.codes(n, k0 * Bits / 32), static_cast<std::size_t>(columns), codes.data());
            for (Index j = 0; j < columns; ++j)
                weights(n, j) = Format::group_scale(q.scales(n, (k0 + j) / Format::group_size)) *
                                Format::value(codes[static_cast<std::size_t>(j)]);
        }
        Eigen::Map<RowMatrixXf, 0, Stride>(dx + k0, M, columns, Stride(dx_stride)).noalias() = dy_map * weights;
    }
}

/// The inputs after the last whole chunk of W words (fewer than W words of each row), in scalar code:
/// dx[k] = sum_n fl(dy[n] * s) * q in n order (the bias sums are added by the caller).
template <class Format>
void dx_tail(const float* dy, const QuantizedView<Format>& q, Index tail_word, float* dx) {
    constexpr int Bits = Format::bits, codes_per_word = 32 / Bits;
    const Index row_words = q.cols() * Bits / 32;
    for (Index word = tail_word; word < row_words; ++word)
        for (int t = 0; t < codes_per_word; ++t) {
            const Index k = word * codes_per_word + t;
            float total = 0.0f;
            for (Index n = 0; n < q.rows(); ++n) {
                total += (dy[n] * Format::group_scale(q.scales(n, k / Format::group_size))) *
                         Format::value(code_at(q, n, k));
            }
            dx[k] = total;
        }
}

/// dx_lanes chunks [c_begin, c_end) of one row dy (see the top of this file), rows_per_pass weight rows
/// per pass; dx_lanes holds (32/Bits) * W floats per chunk, Arch::alignment()-aligned.
template <class Arch, class Format>
void qgemv_dx_f32_chunks(const float* dy, const QuantizedView<Format>& q, Index c_begin, Index c_end, float* dx_lanes) {
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int codes_per_word = 32 / Format::bits;
    constexpr int rows_per_pass = 4;
    const ChunkScales<Arch, Format> lane_scales;
    std::fill(dx_lanes + c_begin * codes_per_word * W, dx_lanes + c_end * codes_per_word * W, 0.0f);
    auto pass = [&]<int Rows>(std::integral_constant<int, Rows>, Index n0) LOWBIT_ALWAYS_INLINE {
        for (Index c = c_begin; c < c_end; ++c) {
            std::array<ubatch, Rows> words;
            std::array<fbatch, Rows> coefficient;  // fl(dy[n] * s) per lane
            static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                words[r] = ubatch::load_unaligned(&q.codes(n0 + r, c * W));
                coefficient[r] = fbatch(dy[n0 + r]) * lane_scales(&q.scales(n0 + r, 0), c);
            });
            static_for<codes_per_word>([&](auto step) LOWBIT_ALWAYS_INLINE {
                constexpr int t = decltype(step)::value;
                float* lanes = dx_lanes + (c * codes_per_word + t) * W;
                fbatch total = fbatch::load_aligned(lanes);
                static_for<Rows>([&](auto r) LOWBIT_ALWAYS_INLINE {
                    total = simd::fma(F32Codes<Format>::template step<Arch, t>(words[r]), coefficient[r], total);
                });
                total.store_aligned(lanes);
            });
        }
    };
    const Index N = q.rows();
    Index n = 0;
    for (; n + rows_per_pass <= N; n += rows_per_pass) pass(std::integral_constant<int, rows_per_pass>{}, n);
    for (; n < N; ++n) pass(std::integral_constant<int, 1>{}, n);
}

/// dx (K floats) = dy * dequantize(q) for one row dy (N floats), threads over chunks.
template <class Arch, class Format>
void qgemv_dx_f32(const float* dy, const QuantizedView<Format>& q, float* dx) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    constexpr int codes_per_word = 32 / Format::bits;
    const Index K = q.cols();
    const Index chunks = (K / codes_per_word) / W;
    std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> dx_lanes(
        static_cast<std::size_t>(std::max<Index>(chunks * codes_per_word * W, 1)));
    // About 64 KiB of codes per range (chunks of every row), so a range is worth a worker.
    const Index column_bytes = q.rows() * W * 4;
    const std::size_t grain = static_cast<std::size_t>(std::max<Index>(1, (Index{1} << 16) / column_bytes));
    parallel_for(static_cast<std::size_t>(chunks), grain, [&](std::size_t begin, std::size_t end) {
        qgemv_dx_f32_chunks<Arch, Format>(dy, q, static_cast<Index>(begin), static_cast<Index>(end), dx_lanes.data());
    });
    for (Index c = 0; c < chunks; ++c)
        for (int t = 0; t < codes_per_word; ++t) {
            const float unscale = F32Codes<Format>::x_lanes_scale(t);
            for (Index i = 0; i < W; ++i)
                dx[(c * W + i) * codes_per_word + t] =
                    dx_lanes[static_cast<std::size_t>((c * codes_per_word + t) * W + i)] * unscale;
        }
    dx_tail(dy, q, chunks * W, dx);
}

/// The dx panel of one chunk c of W words over weight rows [n0, n0 + depth): the chunk's (32/Bits) * W
/// permuted columns as (32/Bits) / 2 panel blocks of NR = 2W columns (code steps 2b and 2b + 1), each
/// depth rows of NR floats fl(s * q) (x_lanes_scale folded into the scale: exact, a power of two):
///
///   panel[(b * depth + r) * NR + h * W + i] = fl(s[n0 + r, g] * q[n0 + r, (c * W + i) * (32/Bits) + 2b + h])
template <class Arch, class Format>
void build_dx_panel(const QuantizedView<Format>& q, Index n0, Index depth, Index c, float* panel) {
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int codes_per_word = 32 / Format::bits;
    const ChunkScales<Arch, Format> lane_scales;
    // One line per row, rows a row of codes apart: the hardware prefetcher does not run ahead of that,
    // so the rows prefetch_rows on are asked for (benchmarks/README.md).
    constexpr Index prefetch_rows = 16;
    for (Index r = 0; r < depth; ++r) {
        if (n0 + r + prefetch_rows < q.rows()) __builtin_prefetch(&q.codes(n0 + r + prefetch_rows, c * W), 0, 2);
        const ubatch words = ubatch::load_unaligned(&q.codes(n0 + r, c * W));
        const fbatch scales = lane_scales(&q.scales(n0 + r, 0), c);
        static_for<codes_per_word>([&](auto step) LOWBIT_ALWAYS_INLINE {
            constexpr int t = decltype(step)::value;
            const fbatch unscaled =
                F32Codes<Format>::template step<Arch, t>(words) * fbatch(F32Codes<Format>::x_lanes_scale(t));
            (unscaled * scales).store_aligned(panel + ((t / 2) * depth + r) * (2 * W) + (t % 2) * W);
        });
    }
}

/// dy packed for QgemmF32Ukernel::run_depth, its rows in register blocks as qgemm_dx_f32 walks them (per
/// tile of MC rows, blocks of MR rows, the tile's last one of the rest): the block of `rows` rows from row
/// m at m * N floats, element (n, r) at m * N + n * rows + r.
template <class Arch>
std::vector<float> pack_dy_blocks(const float* dy, Index dy_stride, Index M, Index N) {
    using blocking = QgemmF32Ukernel<Arch>;
    std::vector<float> packed(static_cast<std::size_t>(M * N));
    for (Index m0 = 0; m0 < M; m0 += blocking::MC)
        for (Index m = m0; m < std::min(M, m0 + blocking::MC); m += blocking::MR) {
            const Index rows = std::min<Index>(blocking::MR, std::min(M, m0 + blocking::MC) - m);
            float* block = packed.data() + m * N;
            for (Index n = 0; n < N; ++n)
                for (Index r = 0; r < rows; ++r) block[n * rows + r] = dy[(m + r) * dy_stride + n];
        }
    return packed;
}

/// dx [M, K] (row stride dx_stride) = dy [M, N] (row stride dy_stride) * dequantize(q) for M > 1, the
/// forward's panel GEMM turned around: tiles of MC rows x one chunk of W words ((32/Bits) * W permuted
/// columns) over threads; per tile, slices of `depth` weight rows (a dx panel of about 64 KiB,
/// build_dx_panel), each NR-column block of it passed over by every register block of the tile's rows
/// (QgemmF32Ukernel::run_depth), so each element sums its weight rows in n order. Then dx put back in
/// input order; the inputs after the last whole chunk by Eigen's product with their dequantized weights
/// (the bias sums are the caller's).
template <class Arch, class Format>
void qgemm_dx_f32(const float* dy, Index dy_stride, Index M, const QuantizedView<Format>& q, float* dx,
                  Index dx_stride) {
    using blocking = QgemmF32Ukernel<Arch>;
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    constexpr int MR = blocking::MR, NR = blocking::NR;
    constexpr int codes_per_word = 32 / Format::bits;
    static_assert(NR == 2 * W && codes_per_word % 2 == 0, "qgemm_dx_f32: a panel block is two code steps");
    const Index N = q.rows(), K = q.cols();
    const Index chunks = (K / codes_per_word) / W;
    const Index chunk_columns = codes_per_word * W, permuted = chunks * chunk_columns;
    const Index slice_rows = std::clamp<Index>((Index{1} << 15) / chunk_columns, 1, 256);
    RowMatrixXf dx_permuted(M, permuted);
    if (N == 0) dx_permuted.setZero();
    const std::vector<float> dy_packed = pack_dy_blocks<Arch>(dy, dy_stride, M, N);

    const Index m_blocks = (M + blocking::MC - 1) / blocking::MC;
    // Tiny problems stay on one thread: a tile must be worth handing to a worker (about 2 MFLOP).
    const double tile_flops = 2.0 * double(std::min(M, blocking::MC)) * double(chunk_columns) * double(N);
    const std::size_t grain = tile_flops >= 2e6 ? 1 : static_cast<std::size_t>(std::max<Index>(chunks * m_blocks, 1));
    // Task mb * chunks + c: chunk c of the tile of rows from mb * MC, so that a thread's range walks
    // consecutive chunks of a tile, slices outside: a slice's codes are read a row at a time, one line
    // per chunk.
    parallel_for(static_cast<std::size_t>(chunks * m_blocks), grain, [&](std::size_t begin, std::size_t end) {
        std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>> panel(
            static_cast<std::size_t>(slice_rows * chunk_columns));
        for (auto task = static_cast<Index>(begin); task < static_cast<Index>(end);) {
            const Index mb = task / chunks, c_begin = task % chunks;
            const Index c_end = std::min(chunks, c_begin + static_cast<Index>(end) - task);
            task += c_end - c_begin;
            const Index m0 = mb * blocking::MC, m1 = std::min(M, m0 + blocking::MC);
            for (Index n0 = 0; n0 < N; n0 += slice_rows) {
                const Index depth = std::min(slice_rows, N - n0);
                for (Index c = c_begin; c < c_end; ++c) {
                    build_dx_panel<Arch>(q, n0, depth, c, panel.data());
                    for (Index b = 0; b < codes_per_word / 2; ++b) {
                        const float* panel_block = panel.data() + b * depth * NR;
                        float* out = dx_permuted.data() + c * chunk_columns + b * NR;
                        auto block = [&]<int Rows>(std::integral_constant<int, Rows>, Index m) {
                            blocking::template run_depth<Rows>(panel_block, depth, dy_packed.data() + m * N + n0 * Rows,
                                                               out + m * permuted, permuted, NR, n0 == 0);
                        };
                        Index m = m0;
                        for (; m + MR <= m1; m += MR) block(std::integral_constant<int, MR>{}, m);
                        static_for<MR>([&](auto rows) {
                            if constexpr (decltype(rows)::value > 0)
                                if (m1 - m == decltype(rows)::value) block(rows, m);
                        });
                    }
                }
            }
        }
    });
    for (Index m = 0; m < M; ++m) {
        float* dx_row = dx + m * dx_stride;
        for (Index c = 0; c < chunks; ++c)
            for (int t = 0; t < codes_per_word; ++t)
                for (Index i = 0; i < W; ++i)
                    dx_row[(c * W + i) * codes_per_word + t] = dx_permuted(m, (c * codes_per_word + t) * W + i);
    }
    // The inputs after the last whole chunk (per row of dy, dx_tail would decode every code again).
    const Index tail_begin = chunks * W * codes_per_word;
    if (tail_begin < K) dx_dequantized_columns(dy, dy_stride, M, q, tail_begin, K, dx, dx_stride);
}

}  // namespace detail::kernels

namespace detail {

/// dx [M, K] (row stride dx_stride) = dy [M, N] (row stride dy_stride) * dequantize(q), M >= 1: the
/// kernels above where the build has SIMD (codes that straddle words: their weights dequantized, by
/// Eigen's product), else the reference; then the bias sums added (the top of this file).
template <class Format>
void quantized_matmul_dx(const float* dy, Eigen::Index dy_stride, Eigen::Index M, const QuantizedView<Format>& q,
                         float* dx, Eigen::Index dx_stride) {
    if constexpr (simd::enabled) {
        if constexpr (!Format::codes_in_whole_words)
            kernels::dx_dequantized_columns(dy, dy_stride, M, q, 0, q.cols(), dx, dx_stride);
        else if (M == 1)
            kernels::qgemv_dx_f32<simd::arch>(dy, q, dx);
        else
            kernels::qgemm_dx_f32<simd::arch>(dy, dy_stride, M, q, dx, dx_stride);
        if constexpr (Format::has_biases) kernels::add_dx_bias_sums(dy, dy_stride, M, q, dx, dx_stride);
    } else {
        reference::quantized_matmul_dx(dy, dy_stride, M, q, dx, dx_stride);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
