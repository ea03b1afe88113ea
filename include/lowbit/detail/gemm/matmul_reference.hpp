// Scalar reference for the group-wise quantized matmul of every format (docs/numerics.md N10): the
// oracle the kernels are tested against. Plain loops, obviously correct, never optimized.
//
//   out[m, n] = sum over groups g of  s[n,g] * sum_{k in g} x[m,k] * q[n,k]  +  b[n,g] * sum_{k in g} x[m,k]
//
// with q a code's value and s a group's scale by the format's rule (Format::value, Format::group_scale;
// for MLX affine the code and the stored scale) and no b term in a format without biases; it equals
// x * dequantize(q)^T in exact arithmetic. Accumulation is f32, in k order.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../mlx_affine/packing_reference.hpp"
#include "../quantized_view.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::reference {

/// out[m * out_stride + n] for m < M, n < q.rows(); x[m * x_stride + k] for k < q.cols().
template <class Format>
void quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q, float* out,
                      Eigen::Index out_stride) {
    constexpr int GroupSize = Format::group_size;
    const Eigen::Index N = q.rows(), K = q.cols(), groups = K / GroupSize;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
    for (Eigen::Index n = 0; n < N; ++n) {
        unpack_codes<Format::bits>(&q.codes(n, 0), static_cast<std::size_t>(K), codes.data());
        for (Eigen::Index m = 0; m < M; ++m) {
            const float* x_row = x + m * x_stride;
            float total = 0.0f;
            for (Eigen::Index g = 0; g < groups; ++g) {
                float x_dot_q = 0.0f, x_sum = 0.0f;
                for (Eigen::Index k = g * GroupSize; k < (g + 1) * GroupSize; ++k) {
                    x_dot_q += x_row[k] * Format::value(codes[static_cast<std::size_t>(k)]);
                    x_sum += x_row[k];
                }
                if constexpr (Format::has_biases)
                    total += Format::group_scale(q.scales(n, g)) * x_dot_q + q.biases(n, g) * x_sum;
                else
                    total += Format::group_scale(q.scales(n, g)) * x_dot_q;
            }
            out[m * out_stride + n] = total;
        }
    }
}

/// dx[m * dx_stride + k] = (dy * dequantize(q))[m, k] for m < M, k < q.cols(); dy[m * dy_stride + n] for
/// n < q.rows(): per element sum_n fl(dy * s) * q in n order, plus sum_n dy * b in n order (N20).
template <class Format>
void quantized_matmul_dx(const float* dy, Eigen::Index dy_stride, Eigen::Index M, const QuantizedView<Format>& q,
                         float* dx, Eigen::Index dx_stride) {
    constexpr int GroupSize = Format::group_size;
    const Eigen::Index N = q.rows(), K = q.cols();
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
    std::vector<float> scaled(static_cast<std::size_t>(K)), biased(static_cast<std::size_t>(K));
    for (Eigen::Index m = 0; m < M; ++m) {
        std::fill(scaled.begin(), scaled.end(), 0.0f);
        std::fill(biased.begin(), biased.end(), 0.0f);
        for (Eigen::Index n = 0; n < N; ++n) {
            unpack_codes<Format::bits>(&q.codes(n, 0), static_cast<std::size_t>(K), codes.data());
            const float d = dy[m * dy_stride + n];
            for (Eigen::Index k = 0; k < K; ++k) {
                const Eigen::Index g = k / GroupSize;
                scaled[static_cast<std::size_t>(k)] +=
                    (d * Format::group_scale(q.scales(n, g))) * Format::value(codes[static_cast<std::size_t>(k)]);
                if constexpr (Format::has_biases) biased[static_cast<std::size_t>(k)] += d * q.biases(n, g);
            }
        }
        for (Eigen::Index k = 0; k < K; ++k)
            dx[m * dx_stride + k] = scaled[static_cast<std::size_t>(k)] + biased[static_cast<std::size_t>(k)];
    }
}

}  // namespace detail::reference
LOWBIT_END_NAMESPACE
