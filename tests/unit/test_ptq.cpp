// Post-training quantizers (lowbit/ptq.hpp): each never worse than MLX's RTN on the error it minimises,
// on random and structured matrices and every format; GPTQ against a naive column-by-column OBQ update
// in double; bit allocation within its budget; bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/LU>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>
#include <lowbit/ptq.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"

namespace {

using lowbit::RowMatrixXf;
using Catch::Matchers::ContainsSubstring;

/// The test matrices: random (with single-sign rows), outliers, constant and all-zero groups, heavy tails.
std::vector<std::pair<std::string, RowMatrixXf>> test_matrices(std::uint64_t salt, Eigen::Index rows, Eigen::Index cols) {
    auto rng = lowbit::test::make_rng(salt);
    std::vector<std::pair<std::string, RowMatrixXf>> result;
    result.emplace_back("random", lowbit::test::random_weights(rng, rows, cols));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    RowMatrixXf outliers(rows, cols);
    for (auto& v : outliers.reshaped()) v = 0.02f * normal(rng);
    std::uniform_int_distribution<Eigen::Index> pick_row(0, rows - 1), pick_col(0, cols - 1);
    for (int i = 0; i < 3 * rows; ++i) outliers(pick_row(rng), pick_col(rng)) = (i % 2 ? 1.0f : -0.7f) * (1 + i % 5);
    result.emplace_back("outliers", outliers);
    RowMatrixXf constant = lowbit::test::random_weights(rng, rows, cols);
    for (Eigen::Index r = 0; r < rows; ++r) {
        constant.row(r).head(32).setConstant(r % 2 ? 0.25f : 0.0f);
        if (r % 3 == 0) constant.row(r).tail(32).setConstant(-1e-9f);
    }
    result.emplace_back("constant groups", constant);
    RowMatrixXf heavy(rows, cols);  // Student t with 2 degrees of freedom: N / sqrt(chi2_2 / 2)
    std::chi_squared_distribution<float> chi(2.0f);
    for (auto& v : heavy.reshaped()) v = 0.05f * normal(rng) / std::sqrt(std::max(chi(rng) / 2.0f, 1e-6f));
    result.emplace_back("heavy tails", heavy);
    return result;
}

/// Per group, sum_i c_i (w_i - w_hat_i)^2 (c empty: 1) of q against w, in double.
template <int G, int B>
std::vector<double> group_errors(const RowMatrixXf& w, const lowbit::QuantizedMatrix<G, B>& q, const Eigen::VectorXf& c,
                                 double p = 2.0) {
    const RowMatrixXf hat = lowbit::dequantize(q);
    std::vector<double> errors;
    for (Eigen::Index r = 0; r < w.rows(); ++r)
        for (Eigen::Index g = 0; g < w.cols() / G; ++g) {
            double total = 0;
            for (Eigen::Index k = g * G; k < (g + 1) * G; ++k) {
                const double e = std::abs(static_cast<double>(w(r, k)) - hat(r, k));
                total += (c.size() ? c(k) : 1.0) * std::pow(e, p);
            }
            errors.push_back(total);
        }
    return errors;
}

void check_not_worse(const std::vector<double>& method, const std::vector<double>& rtn, double relative) {
    REQUIRE(method.size() == rtn.size());
    double method_total = 0, rtn_total = 0;
    for (std::size_t i = 0; i < rtn.size(); ++i) {
        INFO("group " << i);
        CHECK(method[i] <= rtn[i] * (1 + relative) + 1e-30);
        method_total += method[i];
        rtn_total += rtn[i];
    }
    CHECK(method_total <= rtn_total);
}

template <int G, int B>
void check_valid(const lowbit::QuantizedMatrix<G, B>& q, Eigen::Index rows, Eigen::Index cols) {
    q.check_shapes("test");
    CHECK(q.rows() == rows);
    CHECK(q.cols() == cols);
    CHECK(lowbit::dequantize(q).allFinite());
}

/// Calibration inputs [samples, in] with correlated channels of different scales (as activations are).
RowMatrixXf calibration(std::uint64_t salt, Eigen::Index samples, Eigen::Index in) {
    auto rng = lowbit::test::make_rng(salt);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    RowMatrixXf base(samples, 8), mix(8, in), x(samples, in);
    for (auto& v : base.reshaped()) v = normal(rng);
    for (auto& v : mix.reshaped()) v = normal(rng);
    x = base * mix;
    for (Eigen::Index c = 0; c < in; ++c) {
        x.col(c) *= 0.2f + static_cast<float>(c % 7);
        for (Eigen::Index s = 0; s < samples; ++s) x(s, c) += 0.3f * normal(rng);
    }
    return x;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("clip_search is never worse than RTN on its (weighted) squared error", "[ptq]",
                        lowbit::test::PtqTestFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    const Eigen::Index cols = 256;
    const RowMatrixXf x = calibration(11, 64, cols);
    const Eigen::VectorXf channel = lowbit::channel_weights_from_calibration(x);
    for (const auto& [name, w] : test_matrices(12, 12, cols)) {
        INFO(name << ", G = " << G << ", B = " << B);
        const auto rtn = lowbit::quantize<G, B>(w);
        const auto plain = lowbit::clip_search<G, B>(w);
        check_valid(plain, w.rows(), cols);
        check_not_worse(group_errors(w, plain, {}), group_errors(w, rtn, {}), 1e-5);
        const auto weighted = lowbit::clip_search<G, B>(w, channel);
        check_valid(weighted, w.rows(), cols);
        check_not_worse(group_errors(w, weighted, channel), group_errors(w, rtn, channel), 1e-5);
    }
}

TEST_CASE("clip_search lowers the error of groups with outliers", "[ptq]") {
    const auto matrices = test_matrices(13, 16, 256);
    const RowMatrixXf& w = matrices[3].second;  // heavy tails
    const auto rtn = group_errors(w, lowbit::quantize<64, 3>(w), {});
    const auto clipped = group_errors(w, lowbit::clip_search<64, 3>(w), {});
    double rtn_total = 0, clipped_total = 0;
    for (std::size_t i = 0; i < rtn.size(); ++i) rtn_total += rtn[i], clipped_total += clipped[i];
    CHECK(clipped_total < 0.95 * rtn_total);
}

TEMPLATE_LIST_TEST_CASE("hqq is never worse than RTN on the lp error", "[ptq]", lowbit::test::PtqTestFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    lowbit::HqqOptions options;
    for (const auto& [name, w] : test_matrices(14, 12, 256)) {
        INFO(name << ", G = " << G << ", B = " << B);
        const auto q = lowbit::hqq<G, B>(w, options);
        check_valid(q, w.rows(), w.cols());
        // The method evaluates |x|^p by a polynomial (relative error < 1e-5): allow that much.
        check_not_worse(group_errors(w, q, {}, options.p), group_errors(w, lowbit::quantize<G, B>(w), {}, options.p), 1e-4);
        CHECK(lowbit::hqq<G, B>(w, options).codes == q.codes);  // deterministic
    }
}

TEST_CASE("abs_pow follows std::pow", "[ptq]") {
    for (float a : {0.7f, 0.3f, 0.5f})
        for (float x : {1e-29f, 3e-7f, 0.01f, -0.5f, 1.0f, 3.0f, -1234.5f, 1e20f}) {
            INFO("x = " << x << ", a = " << a);
            const double expected = std::pow(std::abs(static_cast<double>(x)), a);
            CHECK(std::abs(lowbit::detail::ptq::abs_pow(x, a) - expected) <= 6e-6 * expected);
        }
    CHECK(lowbit::detail::ptq::abs_pow(0.0f, 0.7f) <= 1e-26f);  // FLT_MIN^0.7
}

namespace {

/// Textbook GPTQ/OBQ in double, one column at a time with the full inverse Hessian downdated after each
/// column (Frantar et al., eq. 2-3), each group's MLX scale and bias taken when the group is entered.
/// Returns the dequantized weights.
template <int G, int B>
Eigen::MatrixXd naive_gptq(const RowMatrixXf& w, const RowMatrixXf& x, double damping) {
    const Eigen::Index rows = w.rows(), cols = w.cols();
    Eigen::MatrixXd h = 2.0 * x.cast<double>().transpose() * x.cast<double>() / static_cast<double>(x.rows());
    h.diagonal().array() += damping * h.diagonal().mean();
    Eigen::MatrixXd hinv = h.inverse();
    Eigen::MatrixXd work = w.cast<double>(), result(rows, cols);
    std::vector<float> scale(rows), bias(rows);
    for (Eigen::Index j = 0; j < cols; ++j) {
        if (j % G == 0)
            for (Eigen::Index r = 0; r < rows; ++r) {
                const float low = static_cast<float>(work.row(r).segment(j, G).minCoeff());
                const float high = static_cast<float>(work.row(r).segment(j, G).maxCoeff());
                std::tie(scale[r], bias[r]) = lowbit::detail::group_scale_bias<B>(low, high);
            }
        for (Eigen::Index r = 0; r < rows; ++r) {
            const float value = static_cast<float>(work(r, j));
            const float code = std::clamp(std::nearbyint((value - bias[r]) / scale[r]), 0.0f, float((1 << B) - 1));
            result(r, j) = static_cast<double>(scale[r] * code + bias[r]);
            const double error = (work(r, j) - result(r, j)) / hinv(j, j);
            for (Eigen::Index k = j + 1; k < cols; ++k) work(r, k) -= error * hinv(j, k);
        }
        // Remove column j from the problem: H^-1 <- H^-1 - H^-1[:, j] H^-1[j, :] / H^-1[j, j].
        const Eigen::VectorXd column = hinv.col(j);
        hinv -= column * column.transpose() / column(j);
        hinv(j, j) = 1.0;  // (never read again)
    }
    return result;
}

}  // namespace

TEST_CASE("gptq matches a naive column-by-column OBQ computation on a tiny layer", "[ptq]") {
    const RowMatrixXf x = calibration(21, 200, 64);
    auto rng = lowbit::test::make_rng(22);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 6, 64);
    lowbit::GptqOptions options;
    options.keep_better_of_rtn = false;
    for (int block : {1, 32, 128}) {
        INFO("block_size " << block);
        options.block_size = block;
        const Eigen::MatrixXd expected = naive_gptq<32, 3>(w, x, options.damping);
        const RowMatrixXf got = lowbit::dequantize(lowbit::gptq<32, 3>(w, x, options));
        // float against double: a rare code may flip at a rounding tie and change what follows, so most
        // values must match to rounding and the output errors must agree closely.
        Eigen::Index matching = 0;
        for (Eigen::Index i = 0; i < got.size(); ++i)
            matching += std::abs(got.reshaped()(i) - expected.reshaped()(i)) <= 1e-4 * (1 + std::abs(expected.reshaped()(i)));
        CHECK(matching >= got.size() * 97 / 100);
        const double expected_error = (x.cast<double>() * (w.cast<double>() - expected).transpose()).squaredNorm();
        const double got_error = (x.cast<double>() * (w - got).cast<double>().transpose()).squaredNorm();
        CHECK(std::abs(got_error - expected_error) <= 0.02 * expected_error);
    }
}

TEMPLATE_LIST_TEST_CASE("gptq is never worse than RTN on the calibration output error", "[ptq]",
                        lowbit::test::PtqTestFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    const RowMatrixXf x = calibration(31, 300, 256);
    for (const auto& [name, w] : test_matrices(32, 10, 256)) {
        INFO(name << ", G = " << G << ", B = " << B);
        lowbit::GptqReport report;
        const auto q = lowbit::gptq<G, B>(w, x, {}, &report);
        check_valid(q, w.rows(), w.cols());
        const RowMatrixXf diff_q = w - lowbit::dequantize(q);
        const RowMatrixXf diff_rtn = w - lowbit::dequantize(lowbit::quantize<G, B>(w));
        const Eigen::MatrixXd out_q = x.cast<double>() * diff_q.cast<double>().transpose();
        const Eigen::MatrixXd out_rtn = x.cast<double>() * diff_rtn.cast<double>().transpose();
        for (Eigen::Index r = 0; r < w.rows(); ++r) {
            INFO("row " << r);
            CHECK(out_q.col(r).squaredNorm() <= out_rtn.col(r).squaredNorm() * (1 + 1e-4));
        }
        CHECK(report.output_error <= report.rtn_output_error);
        if (B <= 4 && name == "random") CHECK(report.output_error < 0.9 * report.rtn_output_error);  // a clear gain
    }
}

TEST_CASE("gptq: dead inputs, clip groups and damping", "[ptq]") {
    RowMatrixXf x = calibration(41, 100, 128);
    x.col(5).setZero();
    x.col(77).setZero();
    x.col(9) = x.col(8);  // rank-deficient H
    auto rng = lowbit::test::make_rng(42);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 8, 128);
    lowbit::GptqOptions options;
    options.damping = 0.0f;
    lowbit::GptqReport report;
    const auto q = lowbit::gptq<64, 4>(w, x, options, &report);
    check_valid(q, 8, 128);
    CHECK(report.dead_inputs == 2);
    CHECK(report.damping >= 0.0f);
    options.damping = 0.01f;
    options.clip_groups = true;
    const auto clipped = lowbit::gptq<64, 4>(w, x, options, &report);
    check_valid(clipped, 8, 128);
    CHECK(report.output_error <= report.rtn_output_error);
}

template <int G, int B>
void check_same_quantization(const lowbit::QuantizedMatrix<G, B>& a, const lowbit::QuantizedMatrix<G, B>& b) {
    CHECK(a.codes == b.codes);
    CHECK(a.scales == b.scales);
    CHECK(a.biases == b.biases);
}

template <int G, int B>
void check_ptq_quantize_equals_each_method(std::uint64_t salt) {
    auto rng = lowbit::test::make_rng(salt);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 12, 2 * G);
    const RowMatrixXf x = calibration(salt + 1, 40, 2 * G);
    lowbit::PtqOptions options;
    options.clip.grid = 6;
    options.hqq.iterations = 7;
    options.gptq.clip_groups = true;
    options.method = lowbit::PtqMethod::rtn;
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, x, options), lowbit::quantize<G, B>(w));
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, options), lowbit::quantize<G, B>(w));
    options.method = lowbit::PtqMethod::clip_search;
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, x, options),
                            lowbit::clip_search<G, B>(w, lowbit::channel_weights_from_calibration(x), options.clip));
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, options), lowbit::clip_search<G, B>(w, options.clip));
    options.method = lowbit::PtqMethod::hqq;
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, x, options), lowbit::hqq<G, B>(w, options.hqq));
    options.method = lowbit::PtqMethod::gptq;
    lowbit::GptqReport report, direct_report;
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, x, options, &report),
                            lowbit::gptq<G, B>(w, x, options.gptq, &direct_report));
    CHECK(report.output_error == direct_report.output_error);
    CHECK_THROWS_AS((lowbit::ptq::quantize<G, B>(w, options)), std::invalid_argument);  // GPTQ needs inputs
    CHECK_THROWS_AS((lowbit::ptq::quantize<G, B>(w, RowMatrixXf(4, G), options)), std::invalid_argument);
    options.method = lowbit::PtqMethod::rtn;  // reads no inputs, so any x is accepted
    check_same_quantization(lowbit::ptq::quantize<G, B>(w, RowMatrixXf(4, G), options), lowbit::quantize<G, B>(w));
}

TEST_CASE("ptq::quantize gives each method's own result bit for bit", "[ptq]") {
    check_ptq_quantize_equals_each_method<64, 4>(90);
    check_ptq_quantize_equals_each_method<32, 3>(92);
}

TEST_CASE("allocate_bits meets its budget and beats a uniform format of the same cost", "[ptq]") {
    std::vector<lowbit::CalibratedLayer> layers;
    for (int l = 0; l < 3; ++l) {
        auto rng = lowbit::test::make_rng(50 + l);
        RowMatrixXf w = lowbit::test::random_weights(rng, 16 + 8 * l, 128);
        if (l == 1) w *= 10.0f;  // a layer whose error dominates
        layers.push_back({"layer" + std::to_string(l), {w, std::nullopt}, calibration(60 + l, 80, 128)});
    }
    for (auto method : {lowbit::PtqMethod::rtn, lowbit::PtqMethod::clip_search, lowbit::PtqMethod::hqq,
                        lowbit::PtqMethod::gptq}) {
        INFO("method " << static_cast<int>(method));
        lowbit::BitAllocationOptions options;
        options.method = method;
        options.target_bits_per_weight = 3.5;  // = 3-bit g64 with f16 scales and biases
        const auto allocation = lowbit::allocate_bits(layers, options);
        REQUIRE(allocation.layers.size() == 3);
        CHECK(allocation.bits_per_weight <= 3.5 + 1e-9);
        double uniform = 0, total_weights = 0, used = 0;
        for (std::size_t l = 0; l < 3; ++l) {
            const auto& choice = allocation.choices[l];
            CHECK(choice.name == layers[l].name);
            CHECK(allocation.layers[l].bits() == choice.bits);
            CHECK(allocation.layers[l].group_size() == choice.group_size);
            const double n = static_cast<double>(layers[l].linear.weight.size());
            total_weights += n;
            used += n * choice.bits_per_weight;
            const RowMatrixXf diff = layers[l].inputs * (layers[l].linear.weight - allocation.layers[l].dequantize()).transpose();
            CHECK(std::abs(diff.cast<double>().squaredNorm() / 80.0 - choice.output_error) <= 1e-3 * choice.output_error + 1e-12);
            lowbit::BitAllocationOptions one = options;
            one.bits = {3};
            one.group_sizes = {64};
            uniform += lowbit::allocate_bits({layers[l]}, one).output_error;
        }
        CHECK(std::abs(used / total_weights - allocation.bits_per_weight) < 1e-9);
        CHECK(allocation.output_error <= uniform * (1 + 1e-9));
    }
}

TEST_CASE("ptq: bad input is refused with the value named", "[ptq]") {
    auto rng = lowbit::test::make_rng(70);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 4, 64);
    RowMatrixXf x = calibration(71, 20, 64);
    RowMatrixXf bad = x;
    bad(3, 7) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH((lowbit::gptq<64, 4>(w, bad)), ContainsSubstring("row 3, column 7 is nan"));
    bad(3, 7) = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH((lowbit::channel_weights_from_calibration(bad)), ContainsSubstring("is inf"));
    CHECK_THROWS_WITH((lowbit::gptq<64, 4>(w, RowMatrixXf(x.leftCols(32)))), ContainsSubstring("in = 64"));
    CHECK_THROWS_WITH((lowbit::gptq<64, 4>(w, RowMatrixXf(0, 64))), ContainsSubstring("0 calibration rows"));
    CHECK_THROWS_WITH((lowbit::gptq<64, 4>(RowMatrixXf(w.leftCols(48)), x)), ContainsSubstring("GroupSize = 64"));
    RowMatrixXf nan_w = w;
    nan_w(1, 2) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH((lowbit::clip_search<64, 4>(nan_w)), ContainsSubstring("row 1, column 2"));
    CHECK_THROWS_WITH((lowbit::hqq<64, 4>(nan_w)), ContainsSubstring("lowbit::hqq"));
    CHECK_THROWS_WITH((lowbit::clip_search<64, 4>(w, Eigen::VectorXf::Ones(63))), ContainsSubstring("63 values"));
    CHECK_THROWS_WITH((lowbit::clip_search<64, 4>(w, Eigen::VectorXf::Constant(64, -1.0f))), ContainsSubstring("= -1"));
    lowbit::ClipSearchOptions clip;
    clip.max_shrink = 0.8f;
    CHECK_THROWS_WITH((lowbit::clip_search<64, 4>(w, clip)), ContainsSubstring("max_shrink = 0.800000012"));
    lowbit::HqqOptions hqq;
    hqq.p = 1.5f;
    CHECK_THROWS_WITH((lowbit::hqq<64, 4>(w, hqq)), ContainsSubstring("p = 1.5"));
    lowbit::GptqOptions gptq;
    gptq.damping = -1.0f;
    CHECK_THROWS_WITH((lowbit::gptq<64, 4>(w, x, gptq)), ContainsSubstring("damping = -1"));
    std::vector<lowbit::CalibratedLayer> layers{{"l", {w, std::nullopt}, x}};
    lowbit::BitAllocationOptions allocation;
    allocation.target_bits_per_weight = 1.5;
    CHECK_THROWS_WITH((lowbit::allocate_bits(layers, allocation)), ContainsSubstring("target_bits_per_weight = 1.5"));
    allocation.target_bits_per_weight = 12;
    CHECK_THROWS_WITH((lowbit::allocate_bits(layers, allocation)), ContainsSubstring("outside [2.5"));
    allocation.target_bits_per_weight = 4;
    allocation.bits = {7};
    CHECK_THROWS_WITH((lowbit::allocate_bits(layers, allocation)), ContainsSubstring("bits = 7"));
    allocation.bits = {4};
    allocation.scale_bits = 8;
    CHECK_THROWS_WITH((lowbit::allocate_bits(layers, allocation)), ContainsSubstring("scale_bits = 8"));
    CHECK_THROWS_WITH((lowbit::allocate_bits({}, {})), ContainsSubstring("no layers"));
}

TEST_CASE("ptq: a block wider than the layer is the layer's width, never a buffer sized by the option", "[ptq]") {
    auto rng = lowbit::test::make_rng(72);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 16, 128);
    const RowMatrixXf x = calibration(73, 40, 128);
    lowbit::GptqOptions whole;
    whole.block_size = 128;
    const auto expected = lowbit::gptq<64, 4>(w, x, whole);
    for (const int block_size : {129, 1 << 20, 1 << 30, std::numeric_limits<int>::max()}) {
        INFO("block_size = " << block_size);
        lowbit::GptqOptions huge = whole;
        huge.block_size = block_size;
        const auto q = lowbit::gptq<64, 4>(w, x, huge);
        CHECK(q.codes == expected.codes);
        CHECK(q.scales == expected.scales);
        CHECK(q.biases == expected.biases);
    }
}

TEST_CASE("ptq: calibration inputs anywhere in float's range give the result of the same inputs near 1", "[ptq]") {
    // GPTQ and the channel weights are invariant under a common power-of-two scale of the inputs; without
    // the rescaling (detail/ptq/calibration.hpp) inputs near 1e20 would overflow H and inputs near 1e-25
    // would underflow it to zero (every input "dead").
    auto rng = lowbit::test::make_rng(74);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 8, 128);
    const RowMatrixXf x = calibration(75, 30, 128);
    lowbit::GptqReport base_report;
    const auto expected = lowbit::gptq<64, 4>(w, x, {}, &base_report);
    const Eigen::VectorXf expected_weights = lowbit::channel_weights_from_calibration(x);
    REQUIRE(base_report.dead_inputs == 0);
    for (const int exponent : {-100, -80, 40, 66, 100, 120}) {
        INFO("x * 2^" << exponent);
        // |x| lies in [2^-26, 2^7): the scaled inputs are normal floats, exactly x times 2^exponent.
        const RowMatrixXf scaled = (x.cast<double>() * std::ldexp(1.0, exponent)).cast<float>();
        REQUIRE(scaled.allFinite());
        REQUIRE((scaled.cast<double>() * std::ldexp(1.0, -exponent)).cast<float>() == x);
        lowbit::GptqReport report;
        const auto q = lowbit::gptq<64, 4>(w, scaled, {}, &report);
        CHECK(q.codes == expected.codes);
        CHECK(q.scales == expected.scales);
        CHECK(q.biases == expected.biases);
        CHECK(report.dead_inputs == 0);
        CHECK(report.damping == base_report.damping);
        CHECK(report.output_error == base_report.output_error * std::ldexp(1.0, 2 * exponent));
        // Channel weights of the rescaled inputs (largest |x| in [1, 2)): x's own times one power of two,
        // so clip search ranks every candidate as it does with x's weights.
        const Eigen::VectorXf weights = lowbit::channel_weights_from_calibration(scaled);
        REQUIRE(weights.allFinite());
        const float ratio = weights(0) / expected_weights(0);
        CHECK(ratio == std::exp2(std::round(std::log2(ratio))));
        CHECK(weights == expected_weights * ratio);
        CHECK(lowbit::clip_search<64, 4>(w, weights).scales == lowbit::clip_search<64, 4>(w, expected_weights).scales);
    }
    // Subnormal inputs (bits lost, so not the same codes): still no input taken for dead.
    lowbit::GptqReport subnormal_report;
    const auto subnormal = lowbit::gptq<64, 4>(w, RowMatrixXf(x * 0x1p-140f), {}, &subnormal_report);
    CHECK(subnormal_report.dead_inputs == 0);
    CHECK(lowbit::dequantize(subnormal).allFinite());
    // |x| around 1e30: mean squares around 1e60, beyond float.
    const RowMatrixXf huge = x * 1e30f;
    const Eigen::VectorXf weights = lowbit::channel_weights_from_calibration(huge);
    CHECK(weights.allFinite());
    CHECK((weights.array() > 0.0f).all());
    const auto clipped = lowbit::clip_search<64, 4>(w, weights);
    CHECK(lowbit::dequantize(clipped).allFinite());
}
