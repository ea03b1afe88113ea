// BitLinear (training) and its deployment to TernaryLinear (docs/numerics.md N8, N14): the forward against
// the float computation of the quantized operands, deployed output equal to the training output bit for
// bit (both formats, both scale modes, shapes around the kernels' blocks and chunk tails, with and
// without bias), the STE gradients, a few SGD steps that learn, and the errors for bad input.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/compare.hpp"
#include "support/random.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using Eigen::Index;
using lowbit::BitLinear;
using lowbit::RowMatrixXf;
using lowbit::TernaryFormat;
using lowbit::TernaryScales;

}  // namespace

TEST_CASE("BitLinear forward: the quantized operands' product, scaled", "[bit_linear][N14]") {
    auto rng = lowbit::test::make_rng(1550);
    for (const TernaryScales mode : {TernaryScales::per_tensor, TernaryScales::per_group}) {
        const Index M = 5, N = 9, K = 192;
        const BitLinear layer(lowbit::test::random_weights(rng, N, K), Eigen::VectorXf::Random(N), mode);
        const RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
        const RowMatrixXf y = layer.forward(x);
        const RowMatrixXf w_hat = layer.ternary_weights().dequantize();
        const RowMatrixXf x_hat = lowbit::fake_quantize_activations_int8(x);
        const Eigen::MatrixXd expected = (x_hat.cast<double>() * w_hat.cast<double>().transpose()).rowwise() +
                                         layer.bias()->cast<double>().transpose();
        const Eigen::MatrixXd magnitude = x_hat.cast<double>().cwiseAbs() * w_hat.cast<double>().cwiseAbs().transpose();
        for (Index m = 0; m < M; ++m)
            for (Index n = 0; n < N; ++n)
                CHECK(std::fabs(y(m, n) - expected(m, n)) <=
                      1e-6 * (magnitude(m, n) + std::fabs(expected(m, n))) + 1e-30);
    }
}

TEST_CASE("BitLinear deploy: TernaryLinear's output equals the training output bit for bit", "[bit_linear][N14]") {
    auto rng = lowbit::test::make_rng(1560);
    for (const TernaryScales mode : {TernaryScales::per_tensor, TernaryScales::per_group})
        for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1})
            for (const Index K : {Index{64}, Index{128}, Index{320}, Index{384}, Index{800}, Index{1088}}) {
                if (mode == TernaryScales::per_group && K % 64 != 0) continue;
                for (const Index M : {Index{1}, Index{3}, Index{4}, Index{6}, Index{13}})
                    for (const Index N : {Index{1}, Index{10}, Index{37}})
                        for (const bool with_bias : {false, true}) {
                            INFO("mode " << (mode == TernaryScales::per_tensor ? "tensor" : "group") << ", format "
                                         << lowbit::ternary_format_name(format) << ", M " << M << ", N " << N << ", K "
                                         << K << ", bias " << with_bias);
                            std::optional<Eigen::VectorXf> bias;
                            if (with_bias) bias = Eigen::VectorXf::Random(N);
                            const BitLinear layer(lowbit::test::random_weights(rng, N, K), bias, mode);
                            const lowbit::TernaryLinear deployed = layer.deploy(format);
                            const RowMatrixXf x = lowbit::test::random_weights(rng, M, K) * 3.0f;
                            CHECK(lowbit::test::first_matrix_difference(deployed.forward(x), layer.forward(x)) == -1);
                            CHECK(deployed.ternary_weights().codes == layer.ternary_weights().codes);
                        }
            }
    // Odd K per tensor (chunk tails of both formats), one shape each.
    for (const Index K : {Index{1}, Index{7}, Index{255}, Index{257}, Index{319}, Index{321}, Index{784}})
        for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1}) {
            const BitLinear layer(lowbit::test::random_weights(rng, 11, K), Eigen::VectorXf::Random(11));
            const RowMatrixXf x = lowbit::test::random_weights(rng, 6, K);
            INFO("K " << K << ", format " << lowbit::ternary_format_name(format));
            CHECK(lowbit::test::first_matrix_difference(layer.deploy(format).forward(x), layer.forward(x)) == -1);
        }
}

TEST_CASE("BitLinear backward: straight-through gradients of the quantized product", "[bit_linear]") {
    auto rng = lowbit::test::make_rng(1570);
    const Index M = 4, N = 6, K = 128;
    for (const bool with_bias : {false, true}) {
        std::optional<Eigen::VectorXf> bias;
        if (with_bias) bias = Eigen::VectorXf::Random(N);
        const BitLinear layer(lowbit::test::random_weights(rng, N, K), bias);
        const RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
        const RowMatrixXf grad = lowbit::test::random_weights(rng, M, N);
        const lowbit::BitLinearGradients g = layer.backward(x, grad);
        const RowMatrixXf w_hat = layer.ternary_weights().dequantize();
        const RowMatrixXf x_hat = lowbit::fake_quantize_activations_int8(x);
        CHECK(g.input.isApprox(grad * w_hat, 1e-6f));
        CHECK(g.weight.isApprox(grad.transpose() * x_hat, 1e-6f));
        if (with_bias)
            CHECK(g.bias.isApprox(grad.colwise().sum().transpose(), 1e-6f));
        else
            CHECK(g.bias.size() == 0);
        CHECK(g.input.rows() == M);
        CHECK(g.weight.rows() == N);
        CHECK(g.weight.cols() == K);
    }
}

TEST_CASE("BitLinear: SGD through the STE fits a linear map", "[bit_linear]") {
    auto rng = lowbit::test::make_rng(1580);
    const Index M = 64, N = 4, K = 64;
    const RowMatrixXf target_w = lowbit::test::random_weights(rng, N, K);
    BitLinear layer(lowbit::test::random_weights(rng, N, K) * 0.1f, Eigen::VectorXf::Zero(N));
    const RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
    const RowMatrixXf y = x * lowbit::fake_quantize_ternary_per_tensor(target_w).transpose();
    auto loss = [&] { return (layer.forward(x) - y).squaredNorm() / static_cast<float>(M); };
    const float before = loss();
    for (int step = 0; step < 200; ++step) {
        const RowMatrixXf grad = 2.0f * (layer.forward(x) - y) / static_cast<float>(M);
        const lowbit::BitLinearGradients g = layer.backward(x, grad);
        layer.weight() -= 0.01f * g.weight;
        *layer.bias() -= 0.01f * g.bias;
    }
    CHECK(loss() < 0.5f * before);
}

TEST_CASE("BitLinear and TernaryLinear: bad input is refused with a message naming it", "[bit_linear]") {
    auto rng = lowbit::test::make_rng(1590);
    RowMatrixXf w = lowbit::test::random_weights(rng, 3, 64);
    const BitLinear layer(w, Eigen::VectorXf::Zero(3));
    RowMatrixXf x = lowbit::test::random_weights(rng, 2, 64);
    x(1, 5) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(layer.forward(x), ContainsSubstring("nan"));
    CHECK_THROWS_WITH(layer.deploy().forward(x), ContainsSubstring("x(1, 5) = nan"));
    CHECK_THROWS_WITH(layer.forward(RowMatrixXf::Zero(2, 63)), ContainsSubstring("2x63"));
    CHECK_THROWS_WITH(layer.deploy().forward(RowMatrixXf::Zero(2, 65)), ContainsSubstring("2x65"));
    CHECK_THROWS_WITH(layer.backward(RowMatrixXf::Zero(2, 64), RowMatrixXf::Zero(2, 4)), ContainsSubstring("2x4"));
    w(2, 7) = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(BitLinear(w).forward(x.topRows(1)), ContainsSubstring("inf"));
    CHECK_THROWS_WITH(BitLinear(w).deploy(), ContainsSubstring("inf"));
    CHECK_THROWS_WITH(BitLinear(RowMatrixXf::Zero(3, 100), std::nullopt, TernaryScales::per_group),
                      ContainsSubstring("100"));
    CHECK_THROWS_WITH(BitLinear(RowMatrixXf::Zero(3, 64), Eigen::VectorXf::Zero(4)), ContainsSubstring("4"));
    Eigen::VectorXf nan_bias = Eigen::VectorXf::Zero(3);
    nan_bias(1) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(BitLinear(RowMatrixXf::Ones(3, 64), nan_bias).deploy(), ContainsSubstring("nan"));

    lowbit::TernaryWeights codes = lowbit::quantize_ternary_per_tensor(RowMatrixXf::Ones(2, 64));
    codes.codes(1, 3) = 2;
    CHECK_THROWS_WITH(lowbit::TernaryLinear(codes), ContainsSubstring("code 2 at (1, 3)"));
    codes.codes(1, 3) = 1;
    codes.scales(0, 0) = -1.0f;
    CHECK_THROWS_WITH(lowbit::TernaryLinear(codes), ContainsSubstring("scale -1"));
    const lowbit::TernaryWeights grouped = lowbit::quantize_ternary(RowMatrixXf::Ones(2, 64), 32);
    CHECK_THROWS_WITH(lowbit::TernaryLinear(grouped), ContainsSubstring("group_size = 32"));

    // The unused fourth value in packed bytes.
    std::vector<std::uint8_t> i2(2 * 64, 0x55);  // digits 1: all zero weights
    i2[64 + 9] = 0x57;                           // field 0 = 3
    CHECK_THROWS_WITH(lowbit::TernaryLinear::from_packed(TernaryFormat::i2, 2, 64, true, i2, RowMatrixXf::Ones(1, 1)),
                      ContainsSubstring("row 1, byte 9") && ContainsSubstring("code 3"));
    std::vector<std::uint8_t> tq1(2 * 64, 121);  // 11111 in base 3: all zero weights
    tq1[3] = 243;
    CHECK_THROWS_WITH(lowbit::TernaryLinear::from_packed(TernaryFormat::tq1, 2, 64, true, tq1, RowMatrixXf::Ones(1, 1)),
                      ContainsSubstring("TQ1 byte 243 in row 0, byte 3"));
    tq1[3] = 242;
    const lowbit::TernaryLinear ok =
        lowbit::TernaryLinear::from_packed(TernaryFormat::tq1, 2, 64, true, tq1, RowMatrixXf::Ones(1, 1));
    CHECK(ok.file_bytes() == tq1);
    CHECK(ok.ternary_weights().codes(0, 3) == 1);  // 242 = 22222 in base 3: digit 0 of byte 3 is weight 3
}
