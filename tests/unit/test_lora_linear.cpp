// LoraLinearOf<Format> (QLoRA): the forward and the gradients against a double-precision reference,
// merge and deploy, the base's scale and bias gradients, a short training run, and bad input refused
// with the layer unchanged.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lora_linear.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using lowbit::RowMatrixXf;
using Index = Eigen::Index;

/// Every element of computed within the dot bound of depth `depth` around exact, given the sums of
/// the absolute terms.
void check_close(const RowMatrixXf& computed, const Eigen::MatrixXd& exact, const Eigen::MatrixXd& abs_terms,
                 std::size_t depth) {
    REQUIRE(computed.rows() == exact.rows());
    REQUIRE(computed.cols() == exact.cols());
    for (Index r = 0; r < exact.rows(); ++r)
        for (Index c = 0; c < exact.cols(); ++c) {
            INFO("element (" << r << ", " << c << ")");
            CHECK(std::abs(computed(r, c) - exact(r, c)) <= lowbit::test::dot_tolerance(depth, abs_terms(r, c)));
        }
}

/// The base's weights s * q + b in double (exact), and |s * q| + |b| (the terms the kernels sum: the
/// factored product never forms s * q + b in float).
template <class Format>
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> exact_base(const lowbit::QuantizedMatrixOf<Format>& q) {
    Eigen::MatrixXd values(q.rows(), q.cols()), abs_values(q.rows(), q.cols());
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(q.cols()));
    for (Index n = 0; n < q.rows(); ++n) {
        lowbit::detail::kernels::unpack_codes<Format::bits>(&q.codes(n, 0), codes.size(), codes.data());
        for (Index k = 0; k < q.cols(); ++k) {
            const Index g = k / Format::group_size;
            const double scaled = static_cast<double>(Format::group_scale(q.scales(n, g))) *
                                  Format::value(codes[static_cast<std::size_t>(k)]);
            const double bias = lowbit::test::group_bias(q, n, g);
            values(n, k) = scaled + bias;
            abs_values(n, k) = std::abs(scaled) + std::abs(bias);
        }
    }
    return {values, abs_values};
}

/// [rows, cols] uniform in [-1, 1).
RowMatrixXf uniform_matrix(std::mt19937_64& rng, Index rows, Index cols) {
    const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(rows * cols), -1.0f, 1.0f);
    return Eigen::Map<const RowMatrixXf>(values.data(), rows, cols);
}

template <class Format>
lowbit::LoraLinearOf<Format> random_layer(std::mt19937_64& rng, int out, int in, int rank) {
    lowbit::QuantizedLinearOf<Format> base(lowbit::quantize<Format>(lowbit::test::random_weights(rng, out, in)),
                                           Eigen::VectorXf::Random(out));
    lowbit::LoraLinearOf<Format> layer(std::move(base), rank, 2.0f * static_cast<float>(rank), 5);
    layer.b() = lowbit::test::random_weights(rng, out, rank);
    return layer;
}

}  // namespace

// The base's product in both directions is quantized_matmul and quantized_matmul_dx, tested for every
// format in tests/kernels/: here one format of each kernel family.
TEMPLATE_TEST_CASE("LoraLinear: forward and gradients against double precision", "[lora]", (lowbit::MlxAffine<64, 4>),
                   (lowbit::MlxAffine<128, 2>), (lowbit::MlxAffine<32, 3>), lowbit::Nvfp4, lowbit::Mxfp4,
                   lowbit::Mxfp8) {
    auto rng = lowbit::test::make_rng(3701);
    constexpr int G = TestType::group_size;
    for (const auto& [M, out, in, rank] :
         {std::tuple<Index, int, int, int>{1, 4, G, 1}, {3, 9, 2 * G, 4}, {10, 6, 3 * G, 6}}) {
        INFO(lowbit::test::format_text<TestType>()
             << ", M = " << M << ", out = " << out << ", in = " << in << ", rank = " << rank);
        const auto layer = random_layer<TestType>(rng, out, in, rank);
        const RowMatrixXf x = lowbit::test::random_weights(rng, M, in);
        const RowMatrixXf dy = lowbit::test::random_weights(rng, M, out);
        const double c = layer.scale();
        const Eigen::MatrixXd xd = x.template cast<double>(), dyd = dy.template cast<double>();
        const Eigen::MatrixXd a = layer.a().template cast<double>(), b = layer.b().template cast<double>();
        const auto [base, abs_base] = exact_base(layer.base_weight());
        const Eigen::MatrixXd effective = base + c * b * a;
        const Eigen::MatrixXd abs_effective = abs_base + c * b.cwiseAbs() * a.cwiseAbs();
        const Eigen::VectorXd bias = layer.bias()->template cast<double>();
        const auto depth = static_cast<std::size_t>(in + rank);

        Eigen::MatrixXd y = xd * effective.transpose();
        y.rowwise() += bias.transpose();
        Eigen::MatrixXd y_abs = xd.cwiseAbs() * abs_effective.transpose();
        y_abs.rowwise() += bias.cwiseAbs().transpose();
        check_close(layer.forward(x), y, y_abs, depth);

        const auto grads = layer.backward(x, dy);
        CHECK_FALSE(grads.base.has_value());
        check_close(grads.input, dyd * effective, dyd.cwiseAbs() * abs_effective, static_cast<std::size_t>(out + rank));
        const Eigen::MatrixXd h = xd * a.transpose();
        check_close(grads.b, c * dyd.transpose() * h,
                    c * dyd.cwiseAbs().transpose() * (xd.cwiseAbs() * a.cwiseAbs().transpose()),
                    static_cast<std::size_t>(M + in));
        check_close(grads.a, c * (dyd * b).transpose() * xd,
                    c * (dyd.cwiseAbs() * b.cwiseAbs()).transpose() * xd.cwiseAbs(), static_cast<std::size_t>(M + out));
    }
}

TEST_CASE("LoraLinear: starts as its base, merges and deploys", "[lora]") {
    using Format = lowbit::MlxAffine<64, 2>;
    auto rng = lowbit::test::make_rng(3702);
    const lowbit::QuantizedLinearOf<Format> base(lowbit::quantize<Format>(lowbit::test::random_weights(rng, 24, 128)),
                                                 Eigen::VectorXf::Random(24));
    lowbit::LoraLinearOf<Format> layer(base, 8, 16.0f, 1);
    const RowMatrixXf x = lowbit::test::random_weights(rng, 5, 128);
    CHECK(layer.forward(x) == base.forward(x));  // B starts at zero
    CHECK(layer.b().isZero());
    CHECK(layer.rank() == 8);
    CHECK(layer.scale() == 2.0f);
    CHECK(layer.trainable_parameters() == 8 * 128 + 24 * 8);
    for (Index c = 0; c < layer.a().size(); ++c) CHECK(std::abs(layer.a().data()[c]) <= 1.0f / std::sqrt(128.0f));

    layer.b() = lowbit::test::random_weights(rng, 24, 8);
    const lowbit::Linear merged = layer.merge();
    const RowMatrixXf expected = lowbit::dequantize(base.weight()) + (layer.b() * layer.scale()) * layer.a();
    CHECK(merged.weight == expected);
    CHECK(*merged.bias == *base.bias());
    // The same product summed in another order, on weights rounded once more: within 1e-5 of the
    // magnitudes summed.
    const RowMatrixXf magnitudes = x.cwiseAbs() * expected.cwiseAbs().transpose();
    CHECK(((merged.forward(x) - layer.forward(x)).cwiseAbs().array() <= 1e-5f * magnitudes.array()).all());
    const auto deployed = layer.deploy();
    CHECK(deployed.weight().codes == lowbit::quantize<Format>(expected).codes);
    CHECK(deployed.weight().scales == lowbit::quantize<Format>(expected).scales);
}

TEST_CASE("LoraLinear: the base's scale and bias gradients where scales are floats (DWQ setting)", "[lora]") {
    using Format = lowbit::MlxAffine<32, 4>;
    auto rng = lowbit::test::make_rng(3703);
    auto layer = random_layer<Format>(rng, 6, 96, 3);
    const RowMatrixXf x = lowbit::test::random_weights(rng, 4, 96);
    const RowMatrixXf dy = lowbit::test::random_weights(rng, 4, 6);
    layer.train_base_parameters(true);
    CHECK(layer.trainable_parameters() == 3 * 96 + 6 * 3 + 2 * 6 * 3);
    const auto grads = layer.backward(x, dy);
    REQUIRE(grads.base.has_value());
    const auto expected = lowbit::quantized_matmul_parameter_grads(x, dy, layer.base_weight());
    CHECK(grads.base->scales == expected.scales);
    CHECK(grads.base->biases == expected.biases);
    const RowMatrixXf before = layer.forward(x);
    layer.base_scales()(0, 0) *= 2.0f;  // an optimizer's update reaches the forward
    CHECK(layer.forward(x) != before);

    auto rng2 = lowbit::test::make_rng(3704);
    auto byte_scales = random_layer<lowbit::Mxfp4>(rng2, 4, 64, 2);
    CHECK_THROWS_WITH(byte_scales.train_base_parameters(true),
                      Catch::Matchers::ContainsSubstring("group scales are bytes"));
    CHECK_NOTHROW(byte_scales.train_base_parameters(false));
}

TEST_CASE("LoraLinear: gradient steps fit a 2-bit base to its float teacher", "[lora]") {
    // The teacher is a float layer; the base its 2-bit RTN quantization. Plain gradient descent on the
    // mean squared error over fixed inputs trains the adapter (rank 16, 200 steps of 0.5): the error
    // must fall below a fifth.
    using Format = lowbit::MlxAffine<64, 2>;
    auto rng = lowbit::test::make_rng(3705);
    const lowbit::Linear teacher{lowbit::test::random_weights(rng, 16, 128) / std::sqrt(128.0f), std::nullopt};
    lowbit::LoraLinearOf<Format> layer(lowbit::QuantizedLinearOf<Format>::from_linear(teacher), 16, 16.0f, 2);
    const RowMatrixXf x = uniform_matrix(rng, 256, 128);
    const RowMatrixXf target = teacher.forward(x);
    auto loss = [&] { return (layer.forward(x) - target).squaredNorm() / static_cast<float>(x.rows()); };
    const float initial = loss();
    for (int step = 0; step < 200; ++step) {
        const RowMatrixXf dy = 2.0f * (layer.forward(x) - target) / static_cast<float>(x.rows());
        const auto grads = layer.backward(x, dy);
        layer.a() -= 0.5f * grads.a;
        layer.b() -= 0.5f * grads.b;
    }
    INFO("mean squared error " << initial << " -> " << loss());
    CHECK(loss() < 0.2f * initial);
}

TEST_CASE("LoraLinear: bad rank, alpha, shapes and adapters are refused, the layer unchanged", "[lora]") {
    using Format = lowbit::MlxAffine<64, 4>;
    auto rng = lowbit::test::make_rng(3706);
    const lowbit::QuantizedLinearOf<Format> base(lowbit::quantize<Format>(lowbit::test::random_weights(rng, 8, 128)));
    using Catch::Matchers::ContainsSubstring;
    CHECK_THROWS_WITH((lowbit::LoraLinearOf<Format>(base, 0, 1.0f)), ContainsSubstring("rank = 0"));
    CHECK_THROWS_WITH((lowbit::LoraLinearOf<Format>(base, 9, 1.0f)),
                      ContainsSubstring("rank = 9") && ContainsSubstring("min(in, out) = 8"));
    CHECK_THROWS_AS((lowbit::LoraLinearOf<Format>(base, 2, std::numeric_limits<float>::quiet_NaN())),
                    std::invalid_argument);
    CHECK_NOTHROW(lowbit::LoraLinearOf<Format>(base, 8, 1.0f));

    lowbit::LoraLinearOf<Format> layer(base, 4, 4.0f);
    layer.b() = lowbit::test::random_weights(rng, 8, 4);
    const RowMatrixXf a = layer.a(), b = layer.b();
    CHECK_THROWS_WITH(layer.set_adapter(RowMatrixXf::Zero(4, 127), RowMatrixXf::Zero(8, 4)),
                      ContainsSubstring("A 4x127") && ContainsSubstring("B 8x4"));
    CHECK_THROWS_AS(layer.set_adapter(RowMatrixXf::Zero(4, 128), RowMatrixXf::Zero(8, 3)), std::invalid_argument);
    CHECK_THROWS_AS(layer.set_adapter(RowMatrixXf::Zero(0, 128), RowMatrixXf::Zero(8, 0)), std::invalid_argument);
    CHECK(layer.a() == a);
    CHECK(layer.b() == b);
    layer.set_adapter(RowMatrixXf::Ones(2, 128), RowMatrixXf::Ones(8, 2));
    CHECK(layer.rank() == 2);

    const RowMatrixXf x = lowbit::test::random_weights(rng, 3, 128);
    CHECK_THROWS_WITH(layer.backward(x, RowMatrixXf::Zero(3, 7)), ContainsSubstring("dy is 3x7"));
    CHECK_THROWS_AS(layer.backward(RowMatrixXf::Zero(2, 128), RowMatrixXf::Zero(3, 8)), std::invalid_argument);
    CHECK_THROWS_AS(layer.forward(RowMatrixXf::Zero(3, 64)), std::invalid_argument);
    layer.a().resize(2, 64);  // an optimizer that broke the shape
    CHECK_THROWS_WITH(layer.forward(x), ContainsSubstring("A 2x64"));
    CHECK_THROWS_AS(layer.merge(), std::invalid_argument);

    lowbit::LoraLinearOf<Format> fresh(base, 4, 4.0f);
    RowMatrixXf dy = RowMatrixXf::Zero(3, 8);
    dy(1, 2) = std::numeric_limits<float>::quiet_NaN();
    const auto grads = fresh.backward(x, dy);  // propagated, as in the forward
    CHECK(grads.input.row(1).array().isNaN().all());
    CHECK(grads.b.row(2).array().isNaN().all());
    CHECK_FALSE(grads.input.row(0).array().isNaN().any());
}
