// QatLinearOf<Format>: the training forward equals the deployed layer's bit for bit in every format,
// the backward's gradients are the straight-through ones with dx on the packed codes, and bad shapes
// are refused with the layer unchanged.
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/any_qat_linear.hpp>
#include <lowbit/qat_linear.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"

namespace {

using lowbit::RowMatrixXf;
using Index = Eigen::Index;

}  // namespace

TEMPLATE_LIST_TEST_CASE("QatLinear: forward equals deploy().forward bit for bit, with and without bias", "[qat_linear]",
                        lowbit::test::TestedFormats) {
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

TEMPLATE_LIST_TEST_CASE("QatLinear with int8 activations: forward is the deployed int8 forward bit for bit",
                        "[qat_linear]", lowbit::test::TestedFormats) {
    auto rng = lowbit::test::make_rng(3605);
    constexpr int G = TestType::group_size;
    // M = 1, 5 run the row-dot kernel, 17 the panel GEMM (N11); out = 33 crosses an AVX-512 panel of 32.
    for (const auto& [M, out, in] : {std::tuple<Index, int, int>{1, 3, G}, {5, 33, 2 * G}, {17, 7, 3 * G}}) {
        INFO(lowbit::test::format_text<TestType>() << ", M = " << M << ", out = " << out << ", in = " << in);
        lowbit::QatLinearOf<TestType> layer(in, out, true, 9);
        layer.weight() = lowbit::test::random_weights(rng, out, in);
        layer.bias() = Eigen::VectorXf::Random(out);
        layer.set_activations(lowbit::Activations::int8);
        CHECK(layer.activations() == lowbit::Activations::int8);
        const RowMatrixXf x = lowbit::test::random_weights(rng, M, in);
        const RowMatrixXf trained = layer.forward(x);
        const auto deployed = layer.deploy();
        CHECK(trained == deployed.forward(x, lowbit::Activations::int8));
        // Activation rounding moves the result by at most N11's bound: loosely, a few percent here.
        const RowMatrixXf exact = deployed.forward(x);
        CHECK((trained - exact).norm() <= 0.05f * exact.norm() + 1e-3f);
        // The backward's dx is on the same packed codes.
        const RowMatrixXf dy = lowbit::test::random_weights(rng, M, out);
        CHECK(layer.backward(x, dy).input == lowbit::quantized_matmul_dx(dy, deployed.weight()));
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
    const auto without_input = layer.backward(x, dy, false);
    CHECK(without_input.input.size() == 0);
    CHECK(without_input.weight == grads.weight);
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
    layer.set_activations(lowbit::Activations::int8);
    RowMatrixXf x = RowMatrixXf::Zero(2, 64);
    x(1, 5) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(layer.forward(x), Catch::Matchers::ContainsSubstring("x(1, 5) = nan"));
}

TEST_CASE("AnyQatLinear: the format chosen at run time trains and deploys as the typed layer", "[qat_linear]") {
    auto rng = lowbit::test::make_rng(3606);
    lowbit::Linear linear;
    linear.weight = lowbit::test::random_weights(rng, 6, 128);
    linear.bias = Eigen::VectorXf::Random(6);
    const RowMatrixXf x = lowbit::test::random_weights(rng, 3, 128);
    const RowMatrixXf dy = lowbit::test::random_weights(rng, 3, 6);
    auto check_format = [&]<class Format>(std::string_view mode, lowbit::Activations activations) {
        INFO(lowbit::test::format_text<Format>() << (activations == lowbit::Activations::int8 ? ", int8" : ", f32"));
        lowbit::AnyQatLinear any = lowbit::AnyQatLinear::from_linear(linear, Format::group_size, Format::bits, mode);
        lowbit::QatLinearOf<Format> typed(linear);
        any.set_activations(activations);
        typed.set_activations(activations);
        CHECK(std::string_view(any.mode()) == mode);
        CHECK(any.group_size() == Format::group_size);
        CHECK(any.bits() == Format::bits);
        CHECK(any.input_dims() == 128);
        CHECK(any.output_dims() == 6);
        CHECK(any.activations() == activations);
        const RowMatrixXf y = any.forward(x);
        CHECK(y == typed.forward(x));
        const auto any_grads = any.backward(x, dy);
        const auto typed_grads = typed.backward(x, dy);
        CHECK(any_grads.input == typed_grads.input);
        CHECK(any_grads.weight == typed_grads.weight);
        CHECK(*any_grads.bias == *typed_grads.bias);
        const lowbit::AnyQuantizedLinear deployed = any.deploy();
        CHECK(std::string_view(deployed.mode()) == mode);
        CHECK(deployed.forward(x, activations) == y);
        any.weight() *= 0.5f;  // the master weight is the layer's own
        CHECK(any.weight() == 0.5f * linear.weight);
        CHECK(std::get<lowbit::QatLinearOf<Format>>(any.variant()).weight() == any.weight());
    };
    for (const auto activations : {lowbit::Activations::f32, lowbit::Activations::int8}) {
        check_format.template operator()<lowbit::MlxAffine<64, 4>>("affine", activations);
        check_format.template operator()<lowbit::MlxAffine<32, 3>>("affine", activations);
        check_format.template operator()<lowbit::Mxfp4>("mxfp4", activations);
        check_format.template operator()<lowbit::Nvfp4>("nvfp4", activations);
    }
    CHECK_THROWS_WITH(lowbit::AnyQatLinear::from_linear(linear, 64, 7),
                      Catch::Matchers::ContainsSubstring("bits = 7 is not a supported format"));
    CHECK_THROWS_WITH(lowbit::AnyQatLinear::from_linear(linear, 256, 4),
                      Catch::Matchers::ContainsSubstring("group_size = 256"));
}
