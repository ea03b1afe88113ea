// Group-wise quantized matmul: every path (xsimd qgemv, xsimd qgemm, scalar reference) against the
// float product x * dequantize(q)^T (evaluated in double), over every M 1..9, N 1..17, K of 1..4
// groups, a large K, a large N, more rows than one tile, and odd row strides for x and out.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/kernels/quantized_matmul.hpp>
#include <lowbit/detail/reference/quantized_matmul.hpp>
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

/// Weights with a random offset per row, so single-sign groups (positive and negative scales) occur.
RowMatrixXf random_weights(std::mt19937_64& rng, Index rows, Index cols) {
    std::uniform_real_distribution<float> offset(-1.5f, 1.5f), value(-1.0f, 1.0f);
    RowMatrixXf w(rows, cols);
    for (Index r = 0; r < rows; ++r) {
        const float shift = r % 3 == 0 ? 0.0f : offset(rng);
        for (Index c = 0; c < cols; ++c) w(r, c) = value(rng) + shift;
    }
    return w;
}

template <int GroupSize, int Bits>
class Problem {
public:
    Problem(std::mt19937_64& rng, Index M, Index N, Index K, Index x_padding, Index out_padding)
        : M_(M), N_(N), K_(K), x_stride_(K + x_padding), out_stride_(N + out_padding),
          q_(lowbit::quantize<GroupSize, Bits>(random_weights(rng, N, K))) {
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
        lowbit::detail::reference::quantized_matmul(x, xs, m, q, out, os);
    });
    if constexpr (simd::enabled) {
        problem.check("qgemm", [](const float* x, Index xs, Index m, const auto& q, float* out, Index os) {
            kernels::qgemm<simd::arch>(x, xs, m, q, out, os);
        });
        if constexpr (kernels::word_aligned_bits<Bits>) {
            if (M == 1)
                problem.check("qgemv", [](const float* x, Index, Index, const auto& q, float* out, Index) {
                    kernels::qgemv<simd::arch>(x, q, out);
                });
        }
    }
}

template <int GroupSize, int Bits>
void sweep(std::uint64_t salt) {
    auto rng = lowbit::test::make_rng(salt);
    // Every small shape: M 1..9, N 1..17, K of 1..4 groups, odd paddings that change with the shape.
    for (Index groups = 1; groups <= 4; ++groups)
        for (Index M = 1; M <= 9; ++M)
            for (Index N = 1; N <= 17; ++N)
                check_all_paths<GroupSize, Bits>(rng, M, N, groups * GroupSize, (M + N) % 2 == 0 ? 0 : 3, N % 3 == 0 ? 0 : 5);
    // Large K (deep accumulation), large N (more than one column tile and a tail), many rows (two row tiles).
    for (Index M : {1, 2, 9, 17}) check_all_paths<GroupSize, Bits>(rng, M, 37, 4096, 7, 1);
    for (Index M : {1, 5, 8}) check_all_paths<GroupSize, Bits>(rng, M, 301, 2 * GroupSize, 1, 3);
    check_all_paths<GroupSize, Bits>(rng, 300, 45, 2 * GroupSize, 1, 0);
}

template <int Bits>
void sweep_group_sizes(std::uint64_t salt) {
    sweep<32, Bits>(salt);
    sweep<64, Bits>(salt + 1);
    sweep<128, Bits>(salt + 2);
}

}  // namespace

TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T: 2-bit", "[quantized_matmul]") { sweep_group_sizes<2>(100); }
TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T: 3-bit", "[quantized_matmul]") { sweep_group_sizes<3>(110); }
TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T: 4-bit", "[quantized_matmul]") { sweep_group_sizes<4>(120); }
TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T: 5-bit", "[quantized_matmul]") { sweep_group_sizes<5>(130); }
TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T: 6-bit", "[quantized_matmul]") { sweep_group_sizes<6>(140); }
TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T: 8-bit", "[quantized_matmul]") { sweep_group_sizes<8>(150); }

TEST_CASE("the xsimd quantized matmul kernels are the ones this build runs", "[quantized_matmul]") {
#if defined(LOWBIT_FORCE_SCALAR)
    CHECK_FALSE(simd::enabled);
#elif defined(__x86_64__) || defined(__aarch64__)
    CHECK(simd::enabled);
#endif
    UNSCOPED_INFO("qgemm register block " << kernels::GemmBlocking<simd::arch>::MR << " x "
                                           << kernels::GemmBlocking<simd::arch>::NR);
    SUCCEED();
}
