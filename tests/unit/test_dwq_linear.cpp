// DwqLinearOf<Format>: the scale and bias gradients are quantized_matmul_parameter_grads' (tested against
// double precision in tests/kernels/test_matmul_backward.cpp), deploy is bit-exact, distillation steps
// bring a 3-bit layer closer to its float teacher, and bad shapes are refused.
#include <stdexcept>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/dwq_linear.hpp>

#include "support/random.hpp"

using lowbit::RowMatrixXf;

TEST_CASE("DwqLinear: gradients, bit-exact deploy, and bad shapes", "[dwq]") {
    using Format = lowbit::MlxAffine<32, 4>;
    auto rng = lowbit::test::make_rng(3801);
    const lowbit::QuantizedLinearOf<Format> base(lowbit::quantize<Format>(lowbit::test::random_weights(rng, 7, 96)),
                                                 Eigen::VectorXf::Random(7));
    lowbit::DwqLinearOf<Format> layer(base);
    const RowMatrixXf x = lowbit::test::random_weights(rng, 5, 96);
    const RowMatrixXf dy = lowbit::test::random_weights(rng, 5, 7);
    CHECK(layer.forward(x) == base.forward(x));
    const auto grads = layer.backward(x, dy);
    const auto expected = lowbit::quantized_matmul_parameter_grads(x, dy, base.weight());
    CHECK(grads.scales == expected.scales);
    CHECK(grads.biases == expected.biases);
    CHECK(grads.input == lowbit::quantized_matmul_dx(dy, base.weight()));

    layer.scales() -= 0.01f * grads.scales;
    layer.biases() -= 0.01f * grads.biases;
    CHECK(layer.deploy().forward(x) == layer.forward(x));
    CHECK(layer.deploy().weight().codes == base.weight().codes);

    using Catch::Matchers::ContainsSubstring;
    CHECK_THROWS_WITH(layer.backward(x, RowMatrixXf::Zero(5, 6)), ContainsSubstring("dy is 5x6"));
    CHECK_THROWS_AS(layer.backward(RowMatrixXf::Zero(4, 96), dy), std::invalid_argument);
    CHECK_THROWS_AS(layer.forward(RowMatrixXf::Zero(2, 95)), std::invalid_argument);
    layer.scales().resize(7, 2);
    CHECK_THROWS_AS(layer.forward(x), std::invalid_argument);
}

TEST_CASE("DwqLinear: distillation steps bring a 3-bit layer closer to its float teacher", "[dwq]") {
    // Plain gradient descent on the mean squared error to the float teacher over fixed inputs, 100
    // steps of 0.001 (larger steps diverge: the scale gradients carry the codes' values, up to 7).
    using Format = lowbit::MlxAffine<64, 3>;
    auto rng = lowbit::test::make_rng(3802);
    const lowbit::Linear teacher{lowbit::test::random_weights(rng, 16, 256) / 16.0f, std::nullopt};
    lowbit::DwqLinearOf<Format> layer(lowbit::QuantizedLinearOf<Format>::from_linear(teacher));
    const auto values = lowbit::test::uniform_floats(rng, 512 * 256, -1.0f, 1.0f);
    const RowMatrixXf x = Eigen::Map<const RowMatrixXf>(values.data(), 512, 256);
    const RowMatrixXf target = teacher.forward(x);
    auto loss = [&] { return (layer.forward(x) - target).squaredNorm() / static_cast<float>(x.rows()); };
    const float initial = loss();
    for (int step = 0; step < 100; ++step) {
        const RowMatrixXf dy = 2.0f * (layer.forward(x) - target) / static_cast<float>(x.rows());
        const auto grads = layer.backward(x, dy);
        layer.scales() -= 0.001f * grads.scales;
        layer.biases() -= 0.001f * grads.biases;
    }
    INFO("mean squared error " << initial << " -> " << loss());
    CHECK(loss() < 0.97f * initial);
}
