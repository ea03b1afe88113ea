// Linear, QuantizedLinear and quantized_matmul through the public header: shapes, layouts, tensors,
// construction like MLX, thread-count independence and bad input.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include <unsupported/Eigen/CXX11/Tensor>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/any_quantized_linear.hpp>
#include <lowbit/lowbit.hpp>

#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using Eigen::Index;
using lowbit::RowMatrixXf;

RowMatrixXf random_matrix(std::mt19937_64& rng, Index rows, Index cols) {
    const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(rows * cols), -1.0f, 1.0f);
    return Eigen::Map<const RowMatrixXf>(values.data(), rows, cols);
}

/// |got - x * w^T - bias| within dot_tolerance, with terms |x| (|w - b| + |b|) bounded by |x| * 3 max|w|.
void check_close(const RowMatrixXf& got, const RowMatrixXf& x, const RowMatrixXf& w,
                 const std::optional<Eigen::VectorXf>& bias) {
    REQUIRE(got.rows() == x.rows());
    REQUIRE(got.cols() == w.rows());
    const Eigen::MatrixXd exact = x.cast<double>() * w.cast<double>().transpose();
    const double w_max = w.cwiseAbs().maxCoeff();
    for (Index m = 0; m < got.rows(); ++m)
        for (Index n = 0; n < got.cols(); ++n) {
            const double abs_sum = 3.0 * w_max * x.row(m).cwiseAbs().cast<double>().sum();
            const double want = exact(m, n) + (bias ? double((*bias)(n)) : 0.0);
            INFO("out(" << m << ", " << n << ")");
            CHECK(std::abs(got(m, n) - want) <= lowbit::test::dot_tolerance(static_cast<std::size_t>(x.cols()), abs_sum) +
                                                     (bias ? lowbit::test::float_unit_roundoff * std::abs(want) : 0.0));
        }
}

}  // namespace

TEST_CASE("QuantizedLinear is constructed like MLX's", "[quantized_linear]") {
    const lowbit::QuantizedLinear<64, 4> layer(128, 10, true, 7);
    CHECK(layer.input_dims() == 128);
    CHECK(layer.output_dims() == 10);
    CHECK(lowbit::QuantizedLinear<64, 4>::group_size == 64);
    CHECK(lowbit::QuantizedLinear<32, 8>::bits == 8);
    REQUIRE(layer.bias().has_value());
    CHECK((layer.bias()->array() == 0.0f).all());
    CHECK(layer.weight().codes.rows() == 10);
    CHECK(layer.weight().codes.cols() == 128 * 4 / 32);
    CHECK(layer.weight().scales.cols() == 2);
    // U(-1/sqrt(in), 1/sqrt(in)): the quantized weights stay within one step of that range.
    const RowMatrixXf w = layer.dequantize();
    const float limit = 1.0f / std::sqrt(128.0f);
    const float step = layer.weight().scales.cwiseAbs().maxCoeff();
    CHECK(w.cwiseAbs().maxCoeff() <= limit + step);
    CHECK(w.cwiseAbs().maxCoeff() > 0.5f * limit);
    // Same seed, same layer; another seed, another layer; no bias on request.
    const lowbit::QuantizedLinear<64, 4> same(128, 10, true, 7), other(128, 10, false, 8);
    CHECK(same.weight().codes == layer.weight().codes);
    CHECK(other.weight().codes != layer.weight().codes);
    CHECK_FALSE(other.bias().has_value());
    const lowbit::QuantizedLinear<> defaults(64, 3);
    CHECK(defaults.group_size == 64);
    CHECK(defaults.bits == 4);
}

TEST_CASE("QuantizedLinear::from_linear quantizes the weight and keeps the bias in float", "[quantized_linear]") {
    auto rng = lowbit::test::make_rng(41);
    lowbit::Linear linear{random_matrix(rng, 9, 256), Eigen::VectorXf::LinSpaced(9, -1.0f, 1.0f)};
    const auto layer = lowbit::QuantizedLinear<128, 8>::from_linear(linear);
    const auto q = lowbit::quantize<128, 8>(linear.weight);
    CHECK(layer.weight().codes == q.codes);
    CHECK(layer.weight().scales == q.scales);
    CHECK(layer.weight().biases == q.biases);
    CHECK(*layer.bias() == *linear.bias);
    const RowMatrixXf x = random_matrix(rng, 4, 256);
    check_close(layer.forward(x), x, layer.dequantize(), linear.bias);
    check_close(linear.forward(x), x, linear.weight, linear.bias);
}

TEST_CASE("forward accepts any layout and matches x * dequantize^T + bias", "[quantized_linear]") {
    auto rng = lowbit::test::make_rng(42);
    lowbit::Linear linear{random_matrix(rng, 19, 192), Eigen::VectorXf::Constant(19, 0.25f)};
    const auto layer = lowbit::QuantizedLinear<64, 4>::from_linear(linear);
    const RowMatrixXf w = layer.dequantize();
    const RowMatrixXf x = random_matrix(rng, 6, 192);
    const RowMatrixXf y = layer.forward(x);
    check_close(y, x, w, layer.bias());
    SECTION("column-major and expressions give the same result") {
        const Eigen::MatrixXf col_major = x;
        CHECK(layer.forward(col_major) == y);
        CHECK(layer.forward(x.topRows(3)) == y.topRows(3));
        // One row runs the GEMV kernel: same value within the bound, not necessarily the same bits.
        check_close(layer.forward(x.row(4)), x.row(4), w, layer.bias());
    }
    SECTION("a row-major block with an odd outer stride") {
        RowMatrixXf wide = random_matrix(rng, 6, 197);
        wide.leftCols(192) = x;
        CHECK(layer.forward(wide.leftCols(192)) == y);
    }
    SECTION("tensors [..., in] give [..., out] in their own layout") {
        Eigen::Tensor<float, 3> t(2, 3, 192);  // column-major
        for (Index a = 0; a < 2; ++a)
            for (Index b = 0; b < 3; ++b)
                for (Index k = 0; k < 192; ++k) t(a, b, k) = x(a * 3 + b, k);
        const Eigen::Tensor<float, 3> out = layer.forward(t);
        REQUIRE(out.dimension(0) == 2);
        REQUIRE(out.dimension(1) == 3);
        REQUIRE(out.dimension(2) == 19);
        Eigen::Tensor<float, 2, Eigen::RowMajor> r(6, 192);
        for (Index m = 0; m < 6; ++m)
            for (Index k = 0; k < 192; ++k) r(m, k) = x(m, k);
        const auto out_r = layer.forward(r);
        Eigen::Tensor<float, 1> single(192);
        for (Index k = 0; k < 192; ++k) single(k) = x(2, k);
        const auto out_single = layer.forward(single);
        REQUIRE(out_single.dimension(0) == 19);
        for (Index m = 0; m < 6; ++m)
            for (Index n = 0; n < 19; ++n) {
                CHECK(out(m / 3, m % 3, n) == y(m, n));
                CHECK(out_r(m, n) == out(m / 3, m % 3, n));
            }
        for (Index n = 0; n < 19; ++n) CHECK(out_single(n) == layer.forward(x.row(2))(0, n));
    }
}

TEST_CASE("quantized_matmul gives the same result at every thread count", "[quantized_linear][threads]") {
    auto rng = lowbit::test::make_rng(43);
    const auto q = lowbit::quantize<64, 4>(random_matrix(rng, 1000, 512));
    const auto q8 = lowbit::quantize<64, 8>(random_matrix(rng, 600, 512));
    const RowMatrixXf x = random_matrix(rng, 40, 512);
    lowbit::set_num_threads(1);
    const RowMatrixXf one = lowbit::quantized_matmul(x, q), one_row = lowbit::quantized_matmul(x.row(0), q);
    const RowMatrixXf one8 = lowbit::quantized_matmul(x, q8);
    lowbit::set_num_threads(3);
    CHECK(lowbit::quantized_matmul(x, q) == one);
    CHECK(lowbit::quantized_matmul(x.row(0), q) == one_row);
    CHECK(lowbit::quantized_matmul(x, q8) == one8);
    lowbit::set_num_threads(0);
    check_close(one, x, lowbit::dequantize(q), std::nullopt);
}

TEST_CASE("QuantizedLinear and quantized_matmul reject bad input", "[quantized_linear][errors]") {
    const lowbit::QuantizedLinear<64, 4> layer(128, 5);
    SECTION("input width") {
        CHECK_THROWS_WITH(layer.forward(RowMatrixXf::Zero(2, 64)),
                          StartsWith("lowbit::QuantizedLinear::forward: ") && ContainsSubstring("2x64") &&
                              ContainsSubstring("128"));
        Eigen::Tensor<float, 2> t(3, 100);
        t.setZero();
        CHECK_THROWS_WITH(layer.forward(t), ContainsSubstring("100") && ContainsSubstring("128"));
    }
    SECTION("construction") {
        CHECK_THROWS_WITH((lowbit::QuantizedLinear<64, 4>(100, 5)), ContainsSubstring("100") && ContainsSubstring("64"));
        CHECK_THROWS_AS((lowbit::QuantizedLinear<64, 4>(0, 5)), std::invalid_argument);
        lowbit::Linear bad_bias{RowMatrixXf::Ones(5, 128), Eigen::VectorXf::Zero(4)};
        CHECK_THROWS_AS((lowbit::QuantizedLinear<64, 4>::from_linear(bad_bias)), std::invalid_argument);
        auto q = layer.weight();
        q.biases.resize(5, 1);
        CHECK_THROWS_AS((lowbit::QuantizedLinear<64, 4>(q)), std::invalid_argument);
        CHECK_THROWS_AS((lowbit::quantized_matmul(RowMatrixXf::Zero(1, 128), q)), std::invalid_argument);
        CHECK_THROWS_AS((lowbit::QuantizedLinear<64, 4>(layer.weight(), Eigen::VectorXf::Zero(3))), std::invalid_argument);
    }
    SECTION("Linear") {
        lowbit::Linear linear{RowMatrixXf::Ones(5, 128), std::nullopt};
        CHECK_THROWS_AS(linear.forward(RowMatrixXf::Zero(2, 127)), std::invalid_argument);
    }
}

TEST_CASE("every layer maps an empty batch to an empty result and still checks its width", "[quantized_linear]") {
    // One rule for every layer's forward (as Eigen, PyTorch and MLX): x [0, in] gives [0, out].
    auto rng = lowbit::test::make_rng(151);
    const RowMatrixXf weight = lowbit::test::random_weights(rng, 5, 128);
    const lowbit::Linear linear{weight, Eigen::VectorXf::Ones(5)};
    const RowMatrixXf empty(0, 128), wrong(0, 64);
    const auto check_empty = [](const RowMatrixXf& y) {
        CHECK(y.rows() == 0);
        CHECK(y.cols() == 5);
    };
    check_empty(linear.forward(empty));
    CHECK_THROWS_AS(linear.forward(wrong), std::invalid_argument);

    const auto layer = lowbit::QuantizedLinear<64, 4>::from_linear(linear);
    check_empty(layer.forward(empty));
    check_empty(layer.forward(empty, lowbit::Activations::int8));
    check_empty(lowbit::quantized_matmul(empty, layer.weight()));
    check_empty(lowbit::quantized_matmul(Eigen::MatrixXf(0, 128), layer.weight(), lowbit::Activations::int8));
    CHECK_THROWS_AS(layer.forward(wrong), std::invalid_argument);
    CHECK_THROWS_AS(layer.forward(wrong, lowbit::Activations::int8), std::invalid_argument);
    Eigen::Tensor<float, 3> tensor(2, 0, 128);
    const Eigen::Tensor<float, 3> y_tensor = layer.forward(tensor);
    CHECK(y_tensor.dimension(0) == 2);
    CHECK(y_tensor.dimension(1) == 0);
    CHECK(y_tensor.dimension(2) == 5);

    const lowbit::AnyQuantizedLinear any = lowbit::AnyQuantizedLinear::from_linear(linear, 32, 3);
    check_empty(any.forward(empty));
    check_empty(any.forward(empty, lowbit::Activations::int8));
    CHECK_THROWS_AS(any.forward(wrong), std::invalid_argument);

    for (const auto scales : {lowbit::TernaryScales::per_tensor, lowbit::TernaryScales::per_group}) {
        const lowbit::BitLinear bit_linear(weight, Eigen::VectorXf::Ones(5), scales);
        check_empty(bit_linear.forward(empty));
        CHECK_THROWS_AS(bit_linear.forward(wrong), std::invalid_argument);
        for (const auto format : {lowbit::TernaryFormat::i2, lowbit::TernaryFormat::tq1}) {
            const lowbit::TernaryLinear ternary = bit_linear.deploy(format);
            check_empty(ternary.forward(empty));
            CHECK_THROWS_AS(ternary.forward(wrong), std::invalid_argument);
        }
    }
}
