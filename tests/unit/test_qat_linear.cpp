// QatLinearOf<Format>: the training forward equals the deployed layer's bit for bit in every format,
// the backward's gradients are the straight-through ones with dx on the packed codes, and bad shapes
// are refused with the layer unchanged.
#include <optional>
#include <stdexcept>
#include <tuple>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/qat_linear.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"

namespace {

using lowbit::RowMatrixXf;
using Index = Eigen::Index;

}  // namespace

TEMPLATE_LIST_TEST_CASE("QatLinear: forward equals deploy().forward bit for bit, with and without bias", "[qat_linear]",
                        lowbit::QuantizedFormats) {
    auto rng = lowbit::test::make_rng(3601);
    constexpr int G = TestType::group_size;
    for (const bool with_bias : {true, false})
        for (const auto& [M, out, in] : {std::tuple<Index, int, int>{1, 3, G}, {5, 7, 2 * G}, {17, 2, 3 * G}}) {
            INFO(lowbit::test::format_text<TestType>()
                 << ", bias " << with_bias << ", M = " << M << ", out = " << out << ", in = " << in);
            lowbit::QatLinearOf<TestType> layer(in, out, with_bias, 7);
            layer.weight() = lowbit::test::random_weights(rng, out, in);
            if (with_bias) layer.bias() = Eigen::VectorXf::Random(out);
            const RowMatrixXf x = lowbit::test::random_weights(rng, M, in);
            const RowMatrixXf trained = layer.forward(x);
            const RowMatrixXf deployed = layer.deploy().forward(x);
            CHECK(trained == deployed);
        }
}

// The backward is format-generic glue over quantized_matmul_dx (tested for every format in
// tests/kernels/test_matmul_backward.cpp): one format of each kernel family.
TEMPLATE_TEST_CASE("QatLinear::backward: straight-through weight and bias gradients, dx on the packed codes",
                   "[qat_linear]", (lowbit::MlxAffine<64, 4>), (lowbit::MlxAffine<32, 3>), lowbit::Nvfp4,
                   lowbit::Mxfp8) {
    auto rng = lowbit::test::make_rng(3602);
    constexpr int G = TestType::group_size;
    lowbit::QatLinearOf<TestType> layer(2 * G, 5, true, 3);
    layer.weight() = lowbit::test::random_weights(rng, 5, 2 * G);
    const RowMatrixXf x = lowbit::test::random_weights(rng, 4, 2 * G);
    const RowMatrixXf dy = lowbit::test::random_weights(rng, 4, 5);
    const auto before_forward = layer.backward(x, dy);  // no forward yet: the weights quantized now
    layer.forward(x);
    const auto grads = layer.backward(x, dy);
    const auto q = lowbit::quantize<TestType>(layer.weight());
    CHECK(grads.input == lowbit::quantized_matmul_dx(dy, q));
    CHECK(before_forward.input == grads.input);
    const RowMatrixXf weight_grad = dy.transpose() * x;
    CHECK(grads.weight == weight_grad);
    REQUIRE(grads.bias.has_value());
    const Eigen::VectorXf bias_grad = dy.colwise().sum().transpose();
    CHECK(*grads.bias == bias_grad);
    lowbit::QatLinearOf<TestType> no_bias(G, 3, false);
    CHECK_FALSE(no_bias.backward(RowMatrixXf::Zero(2, G), RowMatrixXf::Zero(2, 3)).bias.has_value());
}

TEST_CASE("QatLinear: a few steps of training lower the loss, and the deployed layer computes what training did",
          "[qat_linear]") {
    // Fit y = x * t^T with t a fixed 4 x 64 matrix, through 4-bit g64 weights.
    auto rng = lowbit::test::make_rng(3603);
    const RowMatrixXf target = lowbit::test::random_weights(rng, 4, 64);
    const auto values = lowbit::test::uniform_floats(rng, 32 * 64, -1.0f, 1.0f);
    const RowMatrixXf x = Eigen::Map<const RowMatrixXf>(values.data(), 32, 64);
    const RowMatrixXf y = x * target.transpose();
    lowbit::QatLinear<64, 4> layer(64, 4, true, 11);
    auto loss = [&] { return (layer.forward(x) - y).squaredNorm() / static_cast<float>(y.size()); };
    const float first = loss();
    for (int step = 0; step < 200; ++step) {
        const RowMatrixXf out = layer.forward(x);
        const RowMatrixXf dy = 2.0f * (out - y) / static_cast<float>(y.size());
        const auto grads = layer.backward(x, dy);
        layer.weight() -= 0.5f * grads.weight;
        *layer.bias() -= 0.5f * *grads.bias;
    }
    const float last = loss();
    INFO("loss " << first << " -> " << last);
    CHECK(last < 0.1f * first);
    CHECK(layer.deploy().forward(x) == layer.forward(x));
}

TEST_CASE("QatLinear: bad sizes and shapes are refused, naming them, and change nothing", "[qat_linear]") {
    CHECK_THROWS_WITH((lowbit::QatLinear<64, 4>(100, 4)), Catch::Matchers::ContainsSubstring("in = 100"));
    CHECK_THROWS_WITH((lowbit::QatLinear<64, 4>(0, 4)), Catch::Matchers::ContainsSubstring("must be positive"));
    lowbit::Linear bad_bias;
    bad_bias.weight = RowMatrixXf::Zero(2, 64);
    bad_bias.bias = Eigen::VectorXf::Zero(3);
    CHECK_THROWS_WITH((lowbit::QatLinear<64, 4>(bad_bias)), Catch::Matchers::ContainsSubstring("bias has 3 values"));
    lowbit::QatLinear<64, 4> layer(64, 2, true, 5);
    const RowMatrixXf weight = layer.weight();
    CHECK_THROWS_AS(layer.forward(RowMatrixXf::Zero(1, 63)), std::invalid_argument);
    CHECK_THROWS_WITH(layer.backward(RowMatrixXf::Zero(3, 64), RowMatrixXf::Zero(3, 5)),
                      Catch::Matchers::ContainsSubstring("dy is 3x5"));
    CHECK_THROWS_AS(layer.backward(RowMatrixXf::Zero(3, 64), RowMatrixXf::Zero(2, 2)), std::invalid_argument);
    CHECK(layer.weight() == weight);
}
