// The gradients through the quantized product (docs/numerics.md N20): quantized_matmul_dx against a
// double-precision dy * dequantize(q) over every format, shapes and tails, one thread and two; the
// scale and bias gradients against double-precision sums; both against MLX 0.32's vjp
// (tests/data/mlx_vjp_golden.hpp); bad shapes.
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/detail/gemm/f32_ukernel.hpp>
#include <lowbit/inference.hpp>
#include <lowbit/quantized_backward.hpp>

#include "data/mlx_vjp_golden.hpp"
#include "support/formats.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"
#include "support/tolerance.hpp"

namespace {

using lowbit::RowMatrixXf;
using Index = Eigen::Index;

/// dy [M, N] uniform in [-1, 1).
RowMatrixXf random_dy(std::mt19937_64& rng, Index M, Index N) {
    const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(M * N), -1.0f, 1.0f);
    return Eigen::Map<const RowMatrixXf>(values.data(), M, N);
}

/// The value of weight (n, k) as the kernels read it, s * q + b, in double (exact).
template <class Format>
double weight(const lowbit::QuantizedMatrixOf<Format>& q, const Eigen::MatrixXd& values, Index n, Index k) {
    const Index g = k / Format::group_size;
    return static_cast<double>(Format::group_scale(q.scales(n, g))) * values(n, k) + lowbit::test::group_bias(q, n, g);
}

/// The codes' values (Format::value) of q [N, K] in double.
template <class Format>
Eigen::MatrixXd code_values(const lowbit::QuantizedMatrixOf<Format>& q) {
    Eigen::MatrixXd values(q.rows(), q.cols());
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(q.cols()));
    for (Index n = 0; n < q.rows(); ++n) {
        lowbit::detail::kernels::unpack_codes<Format::bits>(&q.codes(n, 0), static_cast<std::size_t>(q.cols()),
                                                            codes.data());
        for (Index k = 0; k < q.cols(); ++k) values(n, k) = Format::value(codes[static_cast<std::size_t>(k)]);
    }
    return values;
}

template <class Format>
void check_dx(std::mt19937_64& rng, Index M, Index N, Index K) {
    INFO(lowbit::test::format_text<Format>() << ", M = " << M << ", N = " << N << ", K = " << K);
    const auto q = lowbit::quantize<Format>(lowbit::test::random_weights(rng, N, K));
    const RowMatrixXf dy = random_dy(rng, M, N);
    const Eigen::MatrixXd values = code_values(q);
    RowMatrixXf dx, dx_two_threads;
    {
        const lowbit::test::ThreadCountGuard one(1);
        dx = lowbit::quantized_matmul_dx(dy, q);
    }
    {
        const lowbit::test::ThreadCountGuard two(2);
        dx_two_threads = lowbit::quantized_matmul_dx(dy, q);
    }
    REQUIRE(dx.rows() == M);
    REQUIRE(dx.cols() == K);
    CHECK(dx == dx_two_threads);  // each element's order does not depend on the thread count
    RowMatrixXf reference(M, K);
    const auto view = q.view();
    lowbit::detail::reference::quantized_matmul_dx(dy.data(), N, M, view, reference.data(), K);
    for (Index m = 0; m < M; ++m)
        for (Index k = 0; k < K; ++k) {
            double exact = 0.0, abs_sum = 0.0;
            for (Index n = 0; n < N; ++n) {
                const double term = static_cast<double>(dy(m, n)) * weight(q, values, n, k);
                exact += term;
                abs_sum += std::abs(term) + std::abs(dy(m, n) * lowbit::test::group_bias(q, n, k / Format::group_size));
            }
            const double bound = lowbit::test::dot_tolerance(static_cast<std::size_t>(N), abs_sum);
            INFO("m = " << m << ", k = " << k);
            CHECK(std::abs(dx(m, k) - exact) <= bound);
            CHECK(std::abs(reference(m, k) - exact) <= bound);
        }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("quantized_matmul_dx is dy * dequantize(q) within the dot bound: every format, shapes, tails",
                        "[backward][N20]", lowbit::test::TestedFormats) {
    auto rng = lowbit::test::make_rng(2001);
    constexpr Index G = TestType::group_size;
    // K: one group, a few groups, past one and two AVX-512 chunks of 8-bit codes (64 inputs) and of
    // 2-bit codes (256), with a tail of words after the last whole chunk; N around the GEMV's pass of 4
    // rows; M around the panel GEMM's register block and tile (MR, MC), N past its slices of weight rows
    // (at most 256).
    using Ukernel = lowbit::detail::kernels::QgemmF32Ukernel<lowbit::detail::simd::arch>;
    constexpr Index MR = Ukernel::MR, MC = Ukernel::MC;
    UNSCOPED_INFO("register block " << MR << " rows, tile " << MC << " rows");
    for (const Index K : {G, 3 * G, 4 * G, 9 * G})
        for (const auto& [M, N] : {std::tuple<Index, Index>{1, 1},
                                   {1, 4},
                                   {1, 7},
                                   {1, 37},
                                   {2, 5},
                                   {5, 9},
                                   {3, 64},
                                   {MR, 3},
                                   {MR + 1, 37},
                                   {2 * MR + 3, 300}})
            check_dx<TestType>(rng, M, N, K);
    check_dx<TestType>(rng, MC + MR + 1, 3, 3 * G);
}

TEST_CASE("quantized_matmul_dx: an empty batch, a NaN in dy, and dy of the wrong width", "[backward][N20]") {
    auto rng = lowbit::test::make_rng(2002);
    const auto q = lowbit::quantize<lowbit::MlxAffine<64, 4>>(lowbit::test::random_weights(rng, 8, 128));
    CHECK(lowbit::quantized_matmul_dx(RowMatrixXf(0, 8), q).rows() == 0);
    CHECK(lowbit::quantized_matmul_dx(RowMatrixXf(0, 8), q).cols() == 128);
    for (const Index M : {1, 3}) {
        RowMatrixXf dy = random_dy(rng, M, 8);
        dy(M - 1, 5) = std::numeric_limits<float>::quiet_NaN();
        const RowMatrixXf dx = lowbit::quantized_matmul_dx(dy, q);
        for (Index k = 0; k < 128; ++k) CHECK(std::isnan(dx(M - 1, k)));  // propagated, as in the forward
    }
    CHECK_THROWS_WITH(
        lowbit::quantized_matmul_dx(RowMatrixXf::Zero(2, 7), q),
        Catch::Matchers::ContainsSubstring("dy is 2x7") && Catch::Matchers::ContainsSubstring("must be 8"));
}

TEMPLATE_LIST_TEST_CASE("quantized_matmul_parameter_grads: the scale and bias gradients within the dot bound",
                        "[backward][N20]", lowbit::test::TestedFormats) {
    auto rng = lowbit::test::make_rng(2003);
    constexpr Index G = TestType::group_size;
    for (const auto& [M, N, K] : {std::tuple<Index, Index, Index>{1, 3, G}, {4, 5, 3 * G}, {7, 2, 2 * G}}) {
        INFO(lowbit::test::format_text<TestType>() << ", M = " << M << ", N = " << N << ", K = " << K);
        const auto q = lowbit::quantize<TestType>(lowbit::test::random_weights(rng, N, K));
        const RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
        const RowMatrixXf dy = random_dy(rng, M, N);
        const Eigen::MatrixXd values = code_values(q);
        const auto grads = lowbit::quantized_matmul_parameter_grads(x, dy, q);
        REQUIRE(grads.scales.rows() == N);
        REQUIRE(grads.scales.cols() == K / G);
        REQUIRE(grads.biases.cols() == (TestType::has_biases ? K / G : 0));
        for (Index n = 0; n < N; ++n)
            for (Index g = 0; g < K / G; ++g) {
                double scale = 0.0, scale_abs = 0.0, bias = 0.0, bias_abs = 0.0;
                for (Index m = 0; m < M; ++m)
                    for (Index k = g * G; k < (g + 1) * G; ++k) {
                        const double d = dy(m, n), xk = x(m, k);
                        scale += d * xk * values(n, k);
                        scale_abs += std::abs(d * xk * values(n, k));
                        bias += d * xk;
                        bias_abs += std::abs(d * xk);
                    }
                INFO("n = " << n << ", g = " << g);
                const auto depth = static_cast<std::size_t>(M * G);
                CHECK(std::abs(grads.scales(n, g) - scale) <= lowbit::test::dot_tolerance(depth, scale_abs));
                if constexpr (TestType::has_biases)
                    CHECK(std::abs(grads.biases(n, g) - bias) <= lowbit::test::dot_tolerance(depth, bias_abs));
            }
    }
    const auto q = lowbit::quantize<TestType>(lowbit::test::random_weights(rng, 4, G));
    CHECK_THROWS_AS(lowbit::quantized_matmul_parameter_grads(RowMatrixXf::Zero(2, G), RowMatrixXf::Zero(3, 4), q),
                    std::invalid_argument);
    CHECK_THROWS_AS(lowbit::quantized_matmul_parameter_grads(RowMatrixXf::Zero(2, G + 1), RowMatrixXf::Zero(2, 4), q),
                    std::invalid_argument);
    CHECK_THROWS_AS(lowbit::quantized_matmul_parameter_grads(RowMatrixXf::Zero(2, G), RowMatrixXf::Zero(2, 5), q),
                    std::invalid_argument);
}

namespace {

namespace vjp = lowbit::test::mlx_vjp_golden;

/// A golden array of float bit patterns as a row-major [rows, cols] matrix.
RowMatrixXf golden_floats(const std::uint32_t* bits, Index rows, Index cols) {
    RowMatrixXf m(rows, cols);
    for (Index i = 0; i < rows * cols; ++i) m.data()[i] = std::bit_cast<float>(bits[i]);
    return m;
}

/// MLX's weight in Format: its codes and scales (and biases in affine mode) as MLX returned them.
template <class Format, class Scale>
lowbit::QuantizedMatrixOf<Format> golden_weight(const std::uint32_t* codes, const Scale* scales,
                                                const std::uint32_t* biases) {
    lowbit::QuantizedMatrixOf<Format> q;
    const Index words = vjp::K * Format::bits / 32, groups = vjp::K / Format::group_size;
    q.codes = Eigen::Map<const typename lowbit::QuantizedMatrixOf<Format>::CodeMatrix>(codes, vjp::N, words);
    q.scales.resize(vjp::N, groups);
    for (Index i = 0; i < q.scales.size(); ++i) {
        if constexpr (std::is_same_v<Scale, std::uint8_t>)
            q.scales.data()[i] = scales[i];
        else
            q.scales.data()[i] = std::bit_cast<float>(scales[i]);
    }
    if constexpr (Format::has_biases) q.biases = golden_floats(biases, vjp::N, groups);
    return q;
}

/// lowbit's dx (and, with biases, its scale and bias gradients) against MLX's vjp, within the dot bound
/// of the magnitudes (both sum in float, in different orders).
template <class Format>
void check_against_mlx_vjp(const lowbit::QuantizedMatrixOf<Format>& q, const std::uint32_t* x_bits,
                           const std::uint32_t* dy_bits, const std::uint32_t* dx_bits,
                           const std::uint32_t* dscales_bits, const std::uint32_t* dbiases_bits) {
    const RowMatrixXf x = golden_floats(x_bits, vjp::M, vjp::K), dy = golden_floats(dy_bits, vjp::M, vjp::N);
    const RowMatrixXf mlx_dx = golden_floats(dx_bits, vjp::M, vjp::K);
    const RowMatrixXf weights = lowbit::dequantize(q);
    // |s q| + |b| <= |w| + 2 |b|: the kernels sum the scaled codes and the biases apart.
    RowMatrixXf weight_magnitude = weights.cwiseAbs();
    if constexpr (Format::has_biases)
        for (Index n = 0; n < vjp::N; ++n)
            for (Index k = 0; k < vjp::K; ++k)
                weight_magnitude(n, k) += 2.0f * std::abs(q.biases(n, k / Format::group_size));
    const RowMatrixXf dx_magnitude = dy.cwiseAbs() * weight_magnitude;
    const RowMatrixXf dx = lowbit::quantized_matmul_dx(dy, q);
    for (Index i = 0; i < dx.size(); ++i) {
        INFO("dx element " << i);
        CHECK(std::abs(dx.data()[i] - mlx_dx.data()[i]) <=
              2.0 * lowbit::test::dot_tolerance(vjp::N, dx_magnitude.data()[i]));
    }
    if constexpr (Format::has_biases) {
        constexpr Index G = Format::group_size;
        const auto grads = lowbit::quantized_matmul_parameter_grads(x, dy, q);
        const RowMatrixXf mlx_dscales = golden_floats(dscales_bits, vjp::N, vjp::K / G);
        const RowMatrixXf mlx_dbiases = golden_floats(dbiases_bits, vjp::N, vjp::K / G);
        for (Index n = 0; n < vjp::N; ++n)
            for (Index g = 0; g < vjp::K / G; ++g) {
                // Magnitudes: sum_m |dy| sum_k |x| |q| (q = (w - b) / s, within the code range) and sum_m |dy| sum_k
                // |x|.
                double scale_magnitude = 0.0, bias_magnitude = 0.0;
                for (Index m = 0; m < vjp::M; ++m)
                    for (Index k = g * G; k < (g + 1) * G; ++k) {
                        const double code = (weights(n, k) - q.biases(n, g)) / q.scales(n, g);
                        scale_magnitude += std::abs(dy(m, n) * x(m, k) * code);
                        bias_magnitude += std::abs(dy(m, n) * x(m, k));
                    }
                INFO("row " << n << ", group " << g);
                const auto depth = static_cast<std::size_t>(vjp::M * G);
                CHECK(std::abs(grads.scales(n, g) - mlx_dscales(n, g)) <=
                      2.0 * lowbit::test::dot_tolerance(depth, scale_magnitude) + 1e-6 * scale_magnitude);
                CHECK(std::abs(grads.biases(n, g) - mlx_dbiases(n, g)) <=
                      2.0 * lowbit::test::dot_tolerance(depth, bias_magnitude));
            }
    }
}

}  // namespace

TEST_CASE("quantized_matmul_dx and the parameter gradients match MLX 0.32's vjp of quantized_matmul",
          "[backward][N20][mlx]") {
#define LOWBIT_AFFINE_VJP(G, B)                                                                               \
    check_against_mlx_vjp(                                                                                    \
        golden_weight<lowbit::MlxAffine<G, B>>(vjp::codes_affine_g##G##_b##B, vjp::scales_affine_g##G##_b##B, \
                                               vjp::biases_affine_g##G##_b##B),                               \
        vjp::x_affine_g##G##_b##B, vjp::dy_affine_g##G##_b##B, vjp::dx_affine_g##G##_b##B,                    \
        vjp::dscales_affine_g##G##_b##B, vjp::dbiases_affine_g##G##_b##B)
    LOWBIT_AFFINE_VJP(64, 4);
    LOWBIT_AFFINE_VJP(32, 2);
    LOWBIT_AFFINE_VJP(128, 8);
#undef LOWBIT_AFFINE_VJP
#define LOWBIT_FLOAT_VJP(Format, name)                                                                          \
    check_against_mlx_vjp(golden_weight<Format>(vjp::codes_##name, vjp::scales_##name, nullptr), vjp::x_##name, \
                          vjp::dy_##name, vjp::dx_##name, nullptr, nullptr)
    LOWBIT_FLOAT_VJP(lowbit::Mxfp4, mxfp4);
    LOWBIT_FLOAT_VJP(lowbit::Nvfp4, nvfp4);
    LOWBIT_FLOAT_VJP(lowbit::Mxfp8, mxfp8);
#undef LOWBIT_FLOAT_VJP
}
