// The transposed product of the f32 matmul on packed codes: dx = dy * dequantize(q) for dy [M, N] and q
// [N, K], the gradient of x * dequantize(q)^T with respect to x (docs/numerics.md N20). For every
// element, per weight row n in order,
//
//   dx[m, k] = sum_n fl(dy[m, n] * s[n, g(k)]) * q[n, k]  +  sum_n dy[m, n] * b[n, g(k)]
//
// (the second sum over biases only; f32 accumulation, each product fused into its add). Kernels for
// formats whose codes fill whole words (F32Codes::step), in the GEMV's lane order (f32_gemv.hpp): lane i
// of code step t in chunk c of W words is input k = (c*W + i) * (32/Bits) + t.
//   qgemv_dx_f32 (M = 1): dx accumulates in that permuted order (dx_lanes), a pass of rows_per_pass
//     weight rows per chunk so that each dx_lanes vector is loaded and stored once per pass; threads
//     over chunks (each thread walks every weight row over its own inputs, so the order per element
//     does not depend on the thread count); then dx[k] = dx_lanes * x_lanes_scale(t) (exact: a power of
//     two) plus the bias sums.
//   qgemm_dx_f32 (M > 1): blocks of weight rows dequantized as fl(s * q) in the permuted order, and
//     Eigen's float GEMM of dy's columns with them, in block order.
// Codes that straddle words, and builds without SIMD, run the reference (matmul_reference.hpp).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../../matrix_types.hpp"
#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "f32_codes.hpp"
#include "f32_gemv.hpp"
#include "matmul_reference.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// bias_sums[m * groups + g] = sum_n dy[m, n] * b[n, g] in n order (formats with biases).
template <class Format>
void dx_bias_sums(const float* dy, Index dy_stride, Index M, const QuantizedView<Format>& q, float* bias_sums) {
    const Index groups = q.groups_per_row();
    for (Index m = 0; m < M; ++m) {
        float* sums = bias_sums + m * groups;
        std::fill(sums, sums + groups, 0.0f);
        for (Index n = 0; n < q.rows(); ++n) {
            const float d = dy[m * dy_stride + n];
            const float* b = &q.biases(n, 0);
            for (Index g = 0; g < groups; ++g) sums[g] += d * b[g];
        }
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
                const std::uint32_t code = (q.codes(n, word) >> (t * Bits)) & ((std::uint32_t{1} << Bits) - 1);
                total += (dy[n] * Format::group_scale(q.scales(n, k / Format::group_size))) * Format::value(code);
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

/// Rows [n0, n0 + rows) of q as fl(s * q) in the permuted order of the whole chunks (row r at
/// out + r * out_stride: chunks * (32/Bits) * W floats; the tail inputs are not written).
template <class Arch, class Format>
void dequantize_rows_permuted(const QuantizedView<Format>& q, Index n0, Index rows, float* out, Index out_stride) {
    using fbatch = xsimd::batch<float, Arch>;
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr int W = static_cast<int>(fbatch::size);
    constexpr int codes_per_word = 32 / Format::bits;
    const Index chunks = (q.cols() / codes_per_word) / W;
    const ChunkScales<Arch, Format> lane_scales;
    for (Index r = 0; r < rows; ++r) {
        float* row = out + r * out_stride;
        for (Index c = 0; c < chunks; ++c) {
            const ubatch words = ubatch::load_unaligned(&q.codes(n0 + r, c * W));
            // x_lanes_scale folded into the scale (exact: a power of two), so the GEMM's result needs none.
            const fbatch scales = lane_scales(&q.scales(n0 + r, 0), c);
            static_for<codes_per_word>([&](auto step) LOWBIT_ALWAYS_INLINE {
                constexpr int t = decltype(step)::value;
                const fbatch unscaled =
                    F32Codes<Format>::template step<Arch, t>(words) * fbatch(F32Codes<Format>::x_lanes_scale(t));
                (unscaled * scales).store_unaligned(row + (c * codes_per_word + t) * W);
            });
        }
    }
}

/// dx [M, K] (row stride dx_stride) = dy [M, N] (row stride dy_stride) * dequantize(q) for M > 1: per
/// block of weight rows, the block dequantized (permuted) and multiplied into dx by Eigen, in block
/// order; then dx put back in input order, the tail inputs and the bias sums added.
template <class Arch, class Format>
void qgemm_dx_f32(const float* dy, Index dy_stride, Index M, const QuantizedView<Format>& q, float* dx,
                  Index dx_stride) {
    constexpr Index W = static_cast<Index>(xsimd::batch<float, Arch>::size);
    constexpr int codes_per_word = 32 / Format::bits;
    const Index N = q.rows(), K = q.cols();
    const Index chunks = (K / codes_per_word) / W;
    const Index permuted = chunks * codes_per_word * W;
    // Blocks of about 256 KiB of dequantized weights.
    const Index block_rows = std::max<Index>(1, (Index{1} << 16) / std::max<Index>(permuted, 1));
    RowMatrixXf block(std::min(block_rows, N), permuted);
    RowMatrixXf dx_permuted = RowMatrixXf::Zero(M, permuted);
    const Eigen::Map<const RowMatrixXf, 0, Eigen::OuterStride<>> dy_map(dy, M, N, Eigen::OuterStride<>(dy_stride));
    for (Index n0 = 0; n0 < N; n0 += block_rows) {
        const Index rows = std::min(block_rows, N - n0);
        dequantize_rows_permuted<Arch>(q, n0, rows, block.data(), permuted);
        dx_permuted.noalias() += dy_map.middleCols(n0, rows) * block.topRows(rows);
    }
    for (Index m = 0; m < M; ++m) {
        float* dx_row = dx + m * dx_stride;
        for (Index c = 0; c < chunks; ++c)
            for (int t = 0; t < codes_per_word; ++t)
                for (Index i = 0; i < W; ++i)
                    dx_row[(c * W + i) * codes_per_word + t] = dx_permuted(m, (c * codes_per_word + t) * W + i);
        dx_tail(dy + m * dy_stride, q, chunks * W, dx_row);
    }
}

}  // namespace detail::kernels

namespace detail {

/// dx [M, K] (row stride dx_stride) = dy [M, N] (row stride dy_stride) * dequantize(q), M >= 1: the
/// kernels above where the codes fill whole words and the build has SIMD, else the reference; then the
/// bias sums added (the top of this file).
template <class Format>
void quantized_matmul_dx(const float* dy, Eigen::Index dy_stride, Eigen::Index M, const QuantizedView<Format>& q,
                         float* dx, Eigen::Index dx_stride) {
    if constexpr (simd::enabled && Format::codes_in_whole_words) {
        if (M == 1)
            kernels::qgemv_dx_f32<simd::arch>(dy, q, dx);
        else
            kernels::qgemm_dx_f32<simd::arch>(dy, dy_stride, M, q, dx, dx_stride);
        if constexpr (Format::has_biases) {
            const Eigen::Index groups = q.groups_per_row();
            std::vector<float> bias_sums(static_cast<std::size_t>(M * groups));
            kernels::dx_bias_sums(dy, dy_stride, M, q, bias_sums.data());
            for (Eigen::Index m = 0; m < M; ++m)
                for (Eigen::Index k = 0; k < q.cols(); ++k)
                    dx[m * dx_stride + k] += bias_sums[static_cast<std::size_t>(m * groups + k / Format::group_size)];
        }
    } else {
        reference::quantized_matmul_dx(dy, dy_stride, M, q, dx, dx_stride);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
