// GroupFakeQuantize: training sees exactly the weights QuantizedLinear deploys.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using Eigen::Index;
using lowbit::RowMatrixXf;

template <int G, int B>
struct Format {
    static constexpr int group_size = G;
    static constexpr int bits = B;
};

/// Rows of mixed magnitude and sign, plus an all-zero group, a constant group and a one-sign group.
RowMatrixXf training_weights(std::mt19937_64& rng, Index rows, Index cols, int group_size) {
    const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(rows * cols), -1.0f, 1.0f);
    RowMatrixXf w = Eigen::Map<const RowMatrixXf>(values.data(), rows, cols);
    for (Index r = 0; r < rows; ++r) w.row(r) *= std::ldexp(1.0f, static_cast<int>(r % 7) - 3);
    w.block(0, 0, 1, group_size).setZero();
    w.block(1, 0, 1, group_size).setConstant(0.375f);
    w.block(2, 0, 1, group_size) = w.block(2, 0, 1, group_size).cwiseAbs();
    return w;
}

bool bit_equal(const RowMatrixXf& a, const RowMatrixXf& b) {
    return a.rows() == b.rows() && a.cols() == b.cols() &&
           std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.size())) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("GroupFakeQuantize forward is dequantize(quantize(w)) bit for bit", "[group_fake_quantize]",
                   (Format<32, 2>), (Format<32, 3>), (Format<32, 4>), (Format<32, 5>), (Format<32, 6>),
                   (Format<32, 8>), (Format<64, 2>), (Format<64, 3>), (Format<64, 4>), (Format<64, 5>),
                   (Format<64, 6>), (Format<64, 8>), (Format<128, 2>), (Format<128, 3>), (Format<128, 4>),
                   (Format<128, 5>), (Format<128, 6>), (Format<128, 8>)) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(500 + 10 * G + B);
    const lowbit::GroupFakeQuantize<G, B> weight_quantizer;
    for (Index rows : {3, 9}) {
        const RowMatrixXf w = training_weights(rng, rows, 3 * G, G);
        const RowMatrixXf fake = weight_quantizer.forward(w);
        CHECK(bit_equal(fake, lowbit::dequantize(lowbit::quantize<G, B>(w))));
        // A column-major copy of the same weights gives the same result.
        const Eigen::MatrixXf column_major = w;
        CHECK(bit_equal(weight_quantizer.forward(column_major), fake));
    }
}

TEMPLATE_TEST_CASE("a deployed QuantizedLinear computes what the fake-quantized training layer computed",
                   "[group_fake_quantize]", (Format<64, 2>), (Format<64, 4>), (Format<32, 3>), (Format<128, 8>),
                   (Format<64, 5>), (Format<32, 6>)) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(600 + 10 * G + B);
    const Index in = 4 * G, out = 13;
    const RowMatrixXf w = training_weights(rng, out, in, G);
    const auto bias_values = lowbit::test::uniform_floats(rng, out, -0.5f, 0.5f);
    const Eigen::VectorXf bias = Eigen::Map<const Eigen::VectorXf>(bias_values.data(), out);
    const auto x_values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(5 * in), -2.0f, 2.0f);
    const RowMatrixXf x = Eigen::Map<const RowMatrixXf>(x_values.data(), 5, in);

    // Training: x * fake(w)^T + bias in float. Deployment: the same weights through QuantizedLinear.
    const RowMatrixXf fake = lowbit::GroupFakeQuantize<G, B>().forward(w);
    RowMatrixXf trained = x * fake.transpose();
    trained.rowwise() += bias.transpose();
    const auto deployed_layer = lowbit::QuantizedLinear<G, B>::from_linear(lowbit::Linear{w, bias});
    const RowMatrixXf deployed = deployed_layer.forward(x);

    REQUIRE(bit_equal(deployed_layer.dequantize(), fake));
    for (Index m = 0; m < x.rows(); ++m)
        for (Index n = 0; n < out; ++n) {
            // Both sums carry rounding error; the deployed one factors s * sum(x q) + b * sum(x), whose
            // terms are bounded by |x| (|w_fq - b| + |b|) <= |x| * 3 max |w_fq|.
            const double abs_sum = 3.0 * fake.row(n).cwiseAbs().maxCoeff() * x.row(m).cwiseAbs().cast<double>().sum();
            const double tolerance = 2.0 * lowbit::test::dot_tolerance(static_cast<std::size_t>(in), abs_sum) +
                                     lowbit::test::float_unit_roundoff * std::abs(trained(m, n));
            INFO("out(" << m << ", " << n << ")");
            CHECK(std::abs(deployed(m, n) - trained(m, n)) <= tolerance);
        }
}

TEST_CASE("GroupFakeQuantize backward is the straight-through gradient", "[group_fake_quantize]") {
    auto rng = lowbit::test::make_rng(700);
    const RowMatrixXf w = training_weights(rng, 4, 128, 64);
    const auto grad_values = lowbit::test::uniform_floats(rng, 4 * 128, -1.0f, 1.0f);
    const RowMatrixXf grad = Eigen::Map<const RowMatrixXf>(grad_values.data(), 4, 128);
    const lowbit::GroupFakeQuantize<64, 4> weight_quantizer;
    CHECK(bit_equal(weight_quantizer.backward(grad, w), grad));
}

TEST_CASE("GroupFakeQuantize returns its input's matrix type, with the same values in either layout",
          "[group_fake_quantize]") {
    auto rng = lowbit::test::make_rng(701);
    const RowMatrixXf w = training_weights(rng, 3, 128, 64);
    const Eigen::MatrixXf w_columns = w;  // column-major, as Eigen's default MatrixXf
    const lowbit::GroupFakeQuantize<64, 4> weight_quantizer;
    const auto fake_rows = weight_quantizer.forward(w);
    const auto fake_columns = weight_quantizer.forward(w_columns);
    STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(fake_rows)>, RowMatrixXf>);
    STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(fake_columns)>, Eigen::MatrixXf>);
    CHECK(bit_equal(RowMatrixXf(fake_columns), fake_rows));
    const auto grad_columns = weight_quantizer.backward(w_columns, w_columns);
    STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(grad_columns)>, Eigen::MatrixXf>);
    CHECK(bit_equal(RowMatrixXf(grad_columns), w));
}

TEST_CASE("GroupFakeQuantize rejects bad input with the sizes named", "[group_fake_quantize]") {
    using Catch::Matchers::ContainsSubstring;
    const lowbit::GroupFakeQuantize<64, 4> weight_quantizer;
    CHECK_THROWS_AS(weight_quantizer.forward(RowMatrixXf::Ones(2, 100)), std::invalid_argument);
    CHECK_THROWS_WITH(weight_quantizer.forward(RowMatrixXf::Ones(2, 100)), ContainsSubstring("100"));
    CHECK_THROWS_AS(weight_quantizer.forward(RowMatrixXf(0, 64)), std::invalid_argument);
    RowMatrixXf with_nan = RowMatrixXf::Ones(2, 64);
    with_nan(1, 5) = std::nanf("");
    CHECK_THROWS_WITH(weight_quantizer.forward(with_nan), ContainsSubstring("row 1") && ContainsSubstring("column 5"));
    CHECK_THROWS_WITH(weight_quantizer.backward(RowMatrixXf::Ones(2, 64), RowMatrixXf::Ones(2, 128)),
                      ContainsSubstring("2x64") && ContainsSubstring("2x128"));
}

TEMPLATE_TEST_CASE("GroupFakeQuantizeOf a float mode is its deployed layer's weights bit for bit, and so its forward",
                   "[group_fake_quantize][mxfp4][nvfp4][mxfp8]", lowbit::Mxfp4, lowbit::Nvfp4, lowbit::Mxfp8,
                   (lowbit::MlxAffine<64, 1>)) {
    constexpr int G = TestType::group_size;
    auto rng = lowbit::test::make_rng(700 + G + TestType::bits);
    const Index in = 4 * G, out = 11;
    const RowMatrixXf w = training_weights(rng, out, in, G);
    const lowbit::GroupFakeQuantizeOf<TestType> weight_quantizer;
    const RowMatrixXf fake = weight_quantizer.forward(w);
    CHECK(bit_equal(fake, lowbit::dequantize(lowbit::quantize<TestType>(w))));
    const Eigen::MatrixXf column_major = w;
    CHECK(bit_equal(weight_quantizer.forward(column_major), fake));
    CHECK(bit_equal(weight_quantizer.backward(fake, w), fake));

    const auto x_values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(3 * in), -2.0f, 2.0f);
    const RowMatrixXf x = Eigen::Map<const RowMatrixXf>(x_values.data(), 3, in);
    const RowMatrixXf trained = x * fake.transpose();
    const auto deployed_layer =
        lowbit::QuantizedLinearOf<TestType>::from_linear(lowbit::Linear{w, Eigen::VectorXf::Zero(out)});
    REQUIRE(bit_equal(deployed_layer.dequantize(), fake));
    const RowMatrixXf deployed = deployed_layer.forward(x);
    for (Index m = 0; m < x.rows(); ++m)
        for (Index n = 0; n < out; ++n) {
            const double abs_sum = 3.0 * fake.row(n).cwiseAbs().maxCoeff() * x.row(m).cwiseAbs().cast<double>().sum();
            INFO(TestType::mode << " out(" << m << ", " << n << ")");
            CHECK(std::abs(deployed(m, n) - trained(m, n)) <=
                  2.0 * lowbit::test::dot_tolerance(static_cast<std::size_t>(in), abs_sum));
        }
}
