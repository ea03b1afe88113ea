// distill_scales_biases (docs/numerics.md N13): the least-squares group scales and biases against a
// double-precision solve, the vanishing gradient there, a group with no input, and bad input.
#include <cmath>
#include <limits>

#include <Eigen/QR>

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/ptq/distill_scales_biases.hpp>
#include <lowbit/quantized_backward.hpp>

#include "support/random.hpp"
#include "support/threads.hpp"

TEST_CASE("distill_scales_biases: the least-squares scales and biases, where the gradient of the output error vanishes",
          "[ptq]") {
    auto rng = lowbit::test::make_rng(3701);
    constexpr int G = 64, B = 3;
    const lowbit::RowMatrixXf weight = lowbit::test::random_weights(rng, 6, 4 * G);
    lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, 300, 4 * G);
    x.col(7).array() += 2.0f;          // an input with a large mean, as BERT's hidden states have
    x.middleCols(2 * G, G).setZero();  // group 2 sees no input: its parameters must stay
    const auto q = lowbit::quantize<G, B>(weight);
    const lowbit::RowMatrixXf targets = x * weight.transpose();
    const auto fitted = lowbit::distill_scales_biases_to(q, weight, x);
    CHECK(fitted.codes == q.codes);
    auto output_error = [&](const lowbit::QuantizedMatrix<G, B>& m) {
        return (x * lowbit::dequantize(m).transpose() - targets).squaredNorm();
    };
    INFO("output error " << output_error(q) << " -> " << output_error(fitted));
    CHECK(output_error(fitted) < 0.8f * output_error(q));
    // The gradient of the squared output error with respect to the scales and biases vanishes at the fit.
    auto gradient_norm = [&](const lowbit::QuantizedMatrix<G, B>& m) {
        const lowbit::RowMatrixXf dy = 2.0f * (x * lowbit::dequantize(m).transpose() - targets);
        const auto g = lowbit::quantized_matmul_parameter_grads(x, dy, m);
        return std::sqrt(g.scales.squaredNorm() + g.biases.squaredNorm());
    };
    CHECK(gradient_norm(fitted) < 1e-3f * gradient_norm(q));
    // Row 0 against a least-squares solve in double of the same system (every group but the empty one).
    Eigen::MatrixXd a(x.rows(), 6);
    int column = 0;
    for (int g : {0, 1, 3}) {
        const auto xg = x.middleCols(g * G, G).cast<double>();
        Eigen::VectorXd codes(G);
        for (int k = 0; k < G; ++k)
            codes(k) = std::round((double(lowbit::dequantize(q)(0, g * G + k)) - q.biases(0, g)) / q.scales(0, g));
        a.col(column) = xg * codes;
        a.col(3 + column) = xg.rowwise().sum();
        ++column;
    }
    const Eigen::VectorXd solution = a.colPivHouseholderQr().solve(targets.col(0).cast<double>());
    column = 0;
    for (int g : {0, 1, 3}) {
        CHECK(std::abs(fitted.scales(0, g) - solution(column)) <= 1e-3 * std::abs(solution(column)) + 1e-6);
        CHECK(std::abs(fitted.biases(0, g) - solution(3 + column)) <= 1e-3 * std::abs(solution(3 + column)) + 1e-6);
        ++column;
    }
    for (Eigen::Index n = 0; n < q.rows(); ++n) {
        CHECK(fitted.scales(n, 2) == Catch::Approx(q.scales(n, 2)).epsilon(1e-5));
        CHECK(fitted.biases(n, 2) == Catch::Approx(q.biases(n, 2)).epsilon(1e-5).margin(1e-7));
    }
}

TEST_CASE("distill_scales_biases: bad input is refused with the value named", "[ptq]") {
    const lowbit::RowMatrixXf weight = lowbit::RowMatrixXf::Random(4, 64), x = lowbit::RowMatrixXf::Random(10, 64);
    const auto q = lowbit::quantize<64, 4>(weight);
    CHECK_THROWS_WITH(lowbit::distill_scales_biases(q, x, lowbit::RowMatrixXf::Zero(10, 3)),
                      Catch::Matchers::ContainsSubstring("targets are 10x3"));
    lowbit::RowMatrixXf targets = x * weight.transpose();
    targets(2, 1) = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(lowbit::distill_scales_biases(q, x, targets),
                      Catch::Matchers::ContainsSubstring("targets(2, 1) = inf"));
    CHECK_THROWS_WITH(lowbit::distill_scales_biases_to(q, weight, lowbit::RowMatrixXf::Zero(10, 32)),
                      Catch::Matchers::ContainsSubstring("calibration inputs are 10x32"));
    CHECK_THROWS_WITH(lowbit::distill_scales_biases_to(q, lowbit::RowMatrixXf::Zero(4, 128), x),
                      Catch::Matchers::ContainsSubstring("weight is 4x128"));
    lowbit::ScaleBiasDistillOptions options;
    options.ridge = -1;
    CHECK_THROWS_WITH(lowbit::distill_scales_biases_to(q, weight, x, options),
                      Catch::Matchers::ContainsSubstring("ridge"));
}

TEST_CASE("distill_scales_biases: row counts around the thread split give the one-thread result",
          "[ptq][threads]") {
    auto rng = lowbit::test::make_rng(3702);
    const lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, 40, 128);
    for (const Eigen::Index rows : {1, 2, 3, 7, 16}) {
        INFO("rows = " << rows);
        const lowbit::RowMatrixXf weight = lowbit::test::random_weights(rng, rows, 128);
        const auto q = lowbit::quantize<64, 4>(weight);
        lowbit::QuantizedMatrix<64, 4> one, two;
        {
            const lowbit::test::ThreadCountGuard threads(1);
            one = lowbit::distill_scales_biases_to(q, weight, x);
        }
        {
            const lowbit::test::ThreadCountGuard threads(2);
            two = lowbit::distill_scales_biases_to(q, weight, x);
        }
        CHECK(one.scales == two.scales);
        CHECK(one.biases == two.biases);
    }
}
