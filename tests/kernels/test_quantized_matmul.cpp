// Group-wise quantized matmul: every path (xsimd qgemv, xsimd qgemm, scalar reference) against the
// float product x * dequantize(q)^T (evaluated in double), for every supported format, over every M and N
// around the microkernel's register block (read from QgemmF32Ukernel, so each instruction set's tile is
// covered), K of 1..4 groups, a large K, more columns and rows than one tile, and odd row strides.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/dispatch/mlx_affine.hpp>
#include <lowbit/detail/mlx_affine/matmul_driver.hpp>
#include <lowbit/detail/mlx_affine/matmul_reference.hpp>
#include <lowbit/detail/simd.hpp>
#include <lowbit/quantized_matrix.hpp>

#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using Eigen::Index;
using lowbit::RowMatrixXf;
namespace simd = lowbit::detail::simd;
namespace kernels = lowbit::detail::kernels;

constexpr float sentinel = 12345.0f;  // written in the row padding of out; no path may touch it


template <int GroupSize, int Bits>
class Problem {
public:
    Problem(std::mt19937_64& rng, Index M, Index N, Index K, Index x_padding, Index out_padding)
        : M_(M), N_(N), K_(K), x_stride_(K + x_padding), out_stride_(N + out_padding),
          q_(lowbit::quantize<GroupSize, Bits>(lowbit::test::random_weights(rng, N, K))) {
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
                    const double b = q_.biases(n, k / GroupSize);
                    exact += x * double(w(n, k));
                    abs_sum += std::abs(x) * (std::abs(double(w(n, k)) - b) + std::abs(b));
                }
                expected_[static_cast<std::size_t>(m * N + n)] = exact;
                tolerance_[static_cast<std::size_t>(m * N + n)] =
                    lowbit::test::dot_tolerance(static_cast<std::size_t>(K), abs_sum);
            }
    }

    template <class Path>
    void check(const char* path_name, Path&& path) const {
        std::vector<float> out(static_cast<std::size_t>(M_ * out_stride_), sentinel);
        path(x_.data(), x_stride_, M_, q_, out.data(), out_stride_);
        for (Index m = 0; m < M_; ++m) {
            for (Index n = 0; n < N_; ++n) {
                const double got = out[static_cast<std::size_t>(m * out_stride_ + n)];
                const double want = expected_[static_cast<std::size_t>(m * N_ + n)];
                const double bound = tolerance_[static_cast<std::size_t>(m * N_ + n)];
                if (!(std::abs(got - want) <= bound)) {
                    INFO(path_name << ": GroupSize " << GroupSize << ", Bits " << Bits << ", M " << M_ << ", N " << N_
                                   << ", K " << K_ << ", out(" << m << ", " << n << ") = " << got << ", expected "
                                   << want << " +- " << bound);
                    CHECK(std::abs(got - want) <= bound);
                    return;
                }
            }
            for (Index n = N_; n < out_stride_; ++n)
                if (out[static_cast<std::size_t>(m * out_stride_ + n)] != sentinel) {
                    INFO(path_name << " wrote into the padding of out row " << m);
                    CHECK(false);
                    return;
                }
        }
    }

private:
    Index M_, N_, K_, x_stride_, out_stride_;
    lowbit::QuantizedMatrix<GroupSize, Bits> q_;
    std::vector<float> x_;
    std::vector<double> expected_, tolerance_;
};

template <int GroupSize, int Bits>
void check_all_paths(std::mt19937_64& rng, Index M, Index N, Index K, Index x_padding, Index out_padding) {
    const Problem<GroupSize, Bits> problem(rng, M, N, K, x_padding, out_padding);
    problem.check("reference", [](const float* x, Index xs, Index m, const auto& q, float* out, Index os) {
        lowbit::detail::reference::quantized_matmul(x, xs, m, q.view(), out, os);
    });
    if constexpr (simd::enabled) {
        problem.check("qgemm", [](const float* x, Index xs, Index m, const auto& q, float* out, Index os) {
            lowbit::detail::quantized_matmul(x, xs, m, q.view(), out, os, lowbit::detail::MatmulKernel::gemm);
        });
        if constexpr (lowbit::MlxAffine<GroupSize, Bits>::codes_in_whole_words) {
            if (M == 1)
                problem.check("qgemv", [](const float* x, Index, Index, const auto& q, float* out, Index) {
                    lowbit::detail::quantized_matmul(x, 0, 1, q.view(), out, 0, lowbit::detail::MatmulKernel::gemv);
                });
            problem.check("qgemv_batch", [](const float* x, Index xs, Index m, const auto& q, float* out, Index os) {
                lowbit::detail::quantized_matmul(x, xs, m, q.view(), out, os, lowbit::detail::MatmulKernel::batch);
            });
        }
    }
}

/// Register block of the qgemm microkernel this build runs (the reference's shapes where SIMD is off).
using Ukernel = kernels::QgemmF32Ukernel<simd::arch>;

template <int GroupSize, int Bits>
void sweep(std::uint64_t salt) {
    auto rng = lowbit::test::make_rng(salt);
    // Every small shape, derived from the microkernel's tile: M 1..MR+1 (every row tail of a register
    // block, and one more block), N 1..NR+1 (every column tail), K of 1..4 groups, odd paddings.
    for (Index groups = 1; groups <= 4; ++groups)
        for (Index M = 1; M <= Ukernel::MR + 1; ++M)
            for (Index N = 1; N <= Ukernel::NR + 1; ++N)
                check_all_paths<GroupSize, Bits>(rng, M, N, groups * GroupSize, (M + N) % 2 == 0 ? 0 : 3, N % 3 == 0 ? 0 : 5);
    // Large K (deep accumulation), more than one column tile with a tail, two row tiles.
    for (Index M : {Index{1}, Index{2}, Index{Ukernel::MR + 1}, Index{2 * Ukernel::MR + 1}})
        check_all_paths<GroupSize, Bits>(rng, M, 37, 4096, 7, 1);
    // The batch GEMV's blocks of 8 rows (AVX-512: 3..8 rows walk the row in slices of 8 chunks),
    // with a partial last slice (K = 2688: 21, 10 or 42 chunks for 4, 2 or 8 bits), and over more than
    // two of the driver's column tiles (128 KiB of codes each: 97 columns of 4-bit K = 2688), where the
    // next tile's codes are prefetched.
    for (Index M : {Index{3}, Index{6}, Index{8}, Index{13}}) check_all_paths<GroupSize, Bits>(rng, M, 19, 2688, 3, 2);
    for (Index M : {Index{4}, Index{11}}) check_all_paths<GroupSize, Bits>(rng, M, 401, 2688, 0, 0);
    for (Index M : {Index{1}, Index{5}, Index{Ukernel::MR}})
        check_all_paths<GroupSize, Bits>(rng, M, Ukernel::NC + Ukernel::NR + 13, 2 * GroupSize, 1, 3);
    check_all_paths<GroupSize, Bits>(rng, Ukernel::MC + Ukernel::MR + 3, 45, 2 * GroupSize, 1, 0);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T", "[quantized_matmul]",
                        lowbit::MlxAffineFormats) {
    sweep<TestType::group_size, TestType::bits>(100 + 10 * TestType::bits + TestType::group_size / 32);
}

TEST_CASE("the xsimd quantized matmul kernels are the ones this build runs", "[quantized_matmul]") {
#if defined(LOWBIT_FORCE_SCALAR)
    CHECK_FALSE(simd::enabled);
#elif defined(__x86_64__) || defined(__aarch64__)
    CHECK(simd::enabled);
#endif
    UNSCOPED_INFO("qgemm register block " << kernels::QgemmF32Ukernel<simd::arch>::MR << " x "
                                           << kernels::QgemmF32Ukernel<simd::arch>::NR);
    SUCCEED();
}
