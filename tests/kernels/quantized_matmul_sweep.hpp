// The sweep of tests/kernels/test_quantized_matmul.cpp (every kernel of a format's compiled entry
// against x * dequantize(q)^T over every small shape and tail), shared by the two units that run it:
// test_quantized_matmul.cpp (the affine formats of 1 to 4 bits) and test_quantized_matmul_wide.cpp (the
// wider affine formats and the floating-point ones), halves a parallel build compiles side by side.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/dispatch/formats.hpp>
#include <lowbit/detail/gemm/f32_driver.hpp>
#include <lowbit/detail/simd.hpp>
#include <lowbit/formats/formats.hpp>
#include <lowbit/quantized_matrix.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace lowbit::test::quantized_matmul {

using Eigen::Index;
using lowbit::RowMatrixXf;
namespace simd = lowbit::detail::simd;
namespace kernels = lowbit::detail::kernels;

constexpr float sentinel = 12345.0f;  // written in the row padding of out; no path may touch it

template <class Format>
class Problem {
public:
    Problem(std::mt19937_64& rng, Index M, Index N, Index K, Index x_padding, Index out_padding)
        : M_(M),
          N_(N),
          K_(K),
          x_stride_(K + x_padding),
          out_stride_(N + out_padding),
          q_(lowbit::quantize<Format>(lowbit::test::random_weights(rng, N, K))) {
        const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(M * x_stride_), -1.0f, 1.0f);
        x_ = values;
        const RowMatrixXf w = lowbit::dequantize(q_);
        expected_.assign(static_cast<std::size_t>(M * N), 0.0);
        tolerance_.assign(static_cast<std::size_t>(M * N), 0.0);
        for (Index m = 0; m < M; ++m)
            for (Index n = 0; n < N; ++n) {
                // The kernels sum s*q and b separately, so the terms are |x| (|s q| + |b|), not |x w|.
                double exact = 0.0, abs_sum = 0.0;
                for (Index k = 0; k < K; ++k) {
                    const double x = x_[static_cast<std::size_t>(m * x_stride_ + k)];
                    const double b = lowbit::test::group_bias(q_, n, k / Format::group_size);
                    exact += x * double(w(n, k));
                    abs_sum += std::abs(x) * (std::abs(double(w(n, k)) - b) + std::abs(b));
                }
                expected_[static_cast<std::size_t>(m * N + n)] = exact;
                tolerance_[static_cast<std::size_t>(m * N + n)] =
                    lowbit::test::dot_tolerance(static_cast<std::size_t>(K), abs_sum);
            }
    }

    /// Runs `kernel` through the format's compiled entry (the GEMV on row 0 only, with no strides) and
    /// checks every output and the padding. Returns what ran.
    lowbit::detail::KernelRun check(lowbit::detail::MatmulKernel kernel) const {
        const bool gemv = kernel == lowbit::detail::MatmulKernel::gemv;
        const Index M = gemv ? 1 : M_, x_stride = gemv ? 0 : x_stride_, out_stride = gemv ? 0 : out_stride_;
        std::vector<float> out(static_cast<std::size_t>(M * out_stride_), sentinel);
        const lowbit::detail::KernelRun run = lowbit::detail::FormatKernels<Format>::matmul(
            x_.data(), x_stride, M, q_.view(), out.data(), out_stride, kernel);
        check_outputs(int(kernel), M, out);
        return run;
    }

private:
    void check_outputs(int kernel, Index M, const std::vector<float>& out) const {
        for (Index m = 0; m < M; ++m) {
            for (Index n = 0; n < N_; ++n) {
                const double got = out[static_cast<std::size_t>(m * out_stride_ + n)];
                const double want = expected_[static_cast<std::size_t>(m * N_ + n)];
                const double bound = tolerance_[static_cast<std::size_t>(m * N_ + n)];
                if (!(std::abs(got - want) <= bound)) {
                    INFO("kernel " << kernel << ": " << lowbit::test::format_text<Format>() << ", M " << M << ", N "
                                   << N_ << ", K " << K_ << ", out(" << m << ", " << n << ") = " << got << ", expected "
                                   << want << " +- " << bound);
                    CHECK(std::abs(got - want) <= bound);
                    return;
                }
            }
            for (Index n = N_; n < out_stride_; ++n)
                if (out[static_cast<std::size_t>(m * out_stride_ + n)] != sentinel) {
                    INFO("kernel " << kernel << " wrote into the padding of out row " << m);
                    CHECK(false);
                    return;
                }
        }
    }

    Index M_, N_, K_, x_stride_, out_stride_;
    lowbit::QuantizedMatrixOf<Format> q_;
    std::vector<float> x_;
    std::vector<double> expected_, tolerance_;
};

template <class Format>
void check_all_paths(std::mt19937_64& rng, Index M, Index N, Index K, Index x_padding, Index out_padding) {
    using lowbit::detail::MatmulKernel;
    const Problem<Format> problem(rng, M, N, K, x_padding, out_padding);
    CHECK(problem.check(MatmulKernel::reference).path == lowbit::detail::KernelPath::reference);
    if constexpr (simd::enabled) {
        CHECK(problem.check(MatmulKernel::gemm).path == lowbit::detail::KernelPath::simd);
        // The GEMVs where the format has them (the entry says what ran; the reference is checked above).
        if (M == 1) problem.check(MatmulKernel::gemv);
        problem.check(MatmulKernel::batch);
    }
}

/// Register block of the qgemm microkernel this build runs (the reference's shapes where SIMD is off).
using Ukernel = kernels::QgemmF32Ukernel<simd::arch>;

/// The sweep of one format, from its own fixed seed.
template <class Format>
void sweep() {
    constexpr Index GroupSize = Format::group_size;
    auto rng = lowbit::test::make_rng(100 + 10 * Format::bits + GroupSize / 32);
    // Every small shape, derived from the microkernel's tile: M 1..MR+1 (every row tail of a register
    // block, and one more block), N 1..NR+1 (every column tail), K of 1..4 groups, odd paddings.
    for (Index groups = 1; groups <= 4; ++groups)
        for (Index M = 1; M <= Ukernel::MR + 1; ++M)
            for (Index N = 1; N <= Ukernel::NR + 1; ++N)
                check_all_paths<Format>(rng, M, N, groups * GroupSize, (M + N) % 2 == 0 ? 0 : 3, N % 3 == 0 ? 0 : 5);
    // Large K (deep accumulation), more than one column tile with a tail, two row tiles.
    for (Index M : {Index{1}, Index{2}, Index{Ukernel::MR + 1}, Index{2 * Ukernel::MR + 1}})
        check_all_paths<Format>(rng, M, 37, 4096, 7, 1);
    // The batch GEMV's blocks of 8 rows (AVX-512: 3..8 rows walk the row in slices of 32 KiB of x: 8, 4
    // or 16 chunks for 4, 2 or 8 bits), with a partial last slice (K = 2688: 21, 10 or 42 chunks; codes
    // that straddle words: slices of 1 to 3 chunks, 5.25 to 10.5 chunks with a partial last one), and over more than
    // two of the driver's column tiles (128 KiB of codes each: 97 columns of 4-bit K = 2688), where the
    // next tile's codes are prefetched.
    for (Index M : {Index{3}, Index{6}, Index{8}, Index{13}}) check_all_paths<Format>(rng, M, 19, 2688, 3, 2);
    for (Index M : {Index{4}, Index{11}}) check_all_paths<Format>(rng, M, 401, 2688, 0, 0);
    for (Index M : {Index{1}, Index{5}, Index{Ukernel::MR}})
        check_all_paths<Format>(rng, M, Ukernel::NC + Ukernel::NR + 13, 2 * GroupSize, 1, 3);
    check_all_paths<Format>(rng, Ukernel::MC + Ukernel::MR + 3, 45, 2 * GroupSize, 1, 0);
}

}  // namespace lowbit::test::quantized_matmul
