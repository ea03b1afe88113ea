// Scalar reference of the integer-activation matmul of every format (docs/numerics.md N11): the
// oracle the int8 kernels are tested against. Plain loops, literally the formula, never optimized.
// q is a code's value and s a group's scale by the format's rule (Format::value, an integer, and
// Format::group_scale; for MLX affine the code and the stored scale); a format without biases has no
// c_g term.
//
// Activation quantization, per input row m and weight group g (GroupSize inputs):
//   a[m,g]  = fl(max_{k in g} |x[m,k]| / 127)       (true division; 0 for an all-zero group)
//   xq[m,k] = clamp(RNE(fl(x[m,k] / a[m,g])), -127, 127)   (true division; 0 where a = 0)
// (the clamp only acts when a is subnormal and the division rounds past 127).
//
// Output, per row m, column n and group g:
//   isum[m,n,g] = sum_{k in g} q[n,k] * xq[m,k]          (int32, exact: |isum| <= 255*127*128 < 2^31,
//                                                          mxfp8 245760*127*32 < 2^31)
//   p_g = fl(fl(s[n,g] * a[m,g]) * float(isum))           (float(isum) is exact for |isum| < 2^24, so
//                                                          always but in mxfp8, where it rounds to even)
//   c_g = fl(b[n,g] * xsum[m,g]),  xsum[m,g] = fl(a[m,g] * float(sum_{k in g} xq[m,k]))
//                                                         (the dequantized activations' sum; the int
//                                                          sum is exact, so xsum is one rounding)
//   y[m,n] = ((((0 + p_0) + c_0) + p_1) + c_1) ... in group order.
// The kernels compute the same isum bit for bit and the same 2G terms, but may add them in another
// order (the row-dot kernel of int8_gemv.hpp: lane-wise over groups, then across lanes; the panel GEMM
// of int8_gemm.hpp: this group order) and may fuse a product into its add (the GEMM fuses both); they
// agree with this reference within
//   (4 G + 2 GroupSize) * u * sum_g ( |p_g| + |b[n,g]| * sum_{k in g} |x[m,k]| )
// (tests/support/tolerance.hpp int8_kernel_tolerance), and exactly when every sum is exact.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../mlx_affine/packing_reference.hpp"
#include "../quantized_view.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::reference {

/// One row x[0, K) to codes xq[0, K) and scales a[0, K / GroupSize) (N11). x must be finite.
template <int GroupSize>
void quantize_x_int8_groups(const float* x, Eigen::Index K, std::int8_t* xq, float* a) {
    for (Eigen::Index g = 0; g < K / GroupSize; ++g) {
        float largest = 0.0f;
        for (Eigen::Index k = g * GroupSize; k < (g + 1) * GroupSize; ++k) largest = std::max(largest, std::fabs(x[k]));
        const float scale = largest / 127.0f;
        a[g] = scale;
        for (Eigen::Index k = g * GroupSize; k < (g + 1) * GroupSize; ++k) {
            float code = 0.0f;
            if (scale > 0.0f) code = std::clamp(std::nearbyint(x[k] / scale), -127.0f, 127.0f);
            xq[k] = static_cast<std::int8_t>(code);
        }
    }
}

/// out[m * out_stride + n] for m < M, n < q.rows(); x[m * x_stride + k] for k < q.cols(), finite.
template <class Format>
void quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                           float* out, Eigen::Index out_stride) {
    constexpr int GroupSize = Format::group_size;
    const Eigen::Index N = q.rows(), K = q.cols(), groups = K / GroupSize;
    std::vector<std::int8_t> xq(static_cast<std::size_t>(M * K));
    std::vector<float> a(static_cast<std::size_t>(M * groups)), x_sum(static_cast<std::size_t>(M * groups));
    for (Eigen::Index m = 0; m < M; ++m) {
        quantize_x_int8_groups<GroupSize>(x + m * x_stride, K, xq.data() + m * K, a.data() + m * groups);
        for (Eigen::Index g = 0; g < groups; ++g) {
            std::int32_t sum = 0;
            for (Eigen::Index k = g * GroupSize; k < (g + 1) * GroupSize; ++k)
                sum += xq[static_cast<std::size_t>(m * K + k)];
            x_sum[static_cast<std::size_t>(m * groups + g)] =
                a[static_cast<std::size_t>(m * groups + g)] * static_cast<float>(sum);
        }
    }
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
    for (Eigen::Index n = 0; n < N; ++n) {
        unpack_codes<Format::bits>(&q.codes(n, 0), static_cast<std::size_t>(K), codes.data());
        for (Eigen::Index m = 0; m < M; ++m) {
            float total = 0.0f;
            for (Eigen::Index g = 0; g < groups; ++g) {
                std::int32_t isum = 0;
                for (Eigen::Index k = g * GroupSize; k < (g + 1) * GroupSize; ++k)
                    isum += static_cast<std::int32_t>(Format::value(codes[static_cast<std::size_t>(k)])) *
                            std::int32_t{xq[static_cast<std::size_t>(m * K + k)]};
                const float sa = Format::group_scale(q.scales(n, g)) * a[static_cast<std::size_t>(m * groups + g)];
                const float p = sa * static_cast<float>(isum);
                total += p;
                if constexpr (Format::has_biases) {
                    const float c = q.biases(n, g) * x_sum[static_cast<std::size_t>(m * groups + g)];
                    total += c;
                }
            }
            out[m * out_stride + n] = total;
        }
    }
}

}  // namespace detail::reference
LOWBIT_END_NAMESPACE
