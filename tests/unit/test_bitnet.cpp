// BitNet b1.58 quantizers (docs/numerics.md N8) and its worked examples N8.a-N8.c.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/random.hpp"

namespace {
using lowbit::Rounding;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

std::vector<int> codes_of(const lowbit::RowMatrixXi8& codes) {
    std::vector<int> result;
    for (Eigen::Index i = 0; i < codes.size(); ++i) result.push_back(codes.data()[i]);
    return result;
}
}  // namespace

TEST_CASE("N8.a: absmean, one group of 8", "[bitnet][worked][N8]") {
    const std::vector<float> w{0.8f, -0.3f, 0.05f, -1.2f, 0.4f, 0.0f, -0.45f, 0.6f};
    const float gamma = lowbit::absmean_scale(w);
    CHECK(gamma == 0.47500002f);
    for (Rounding rounding : {Rounding::half_away_from_zero, Rounding::half_to_even}) {
        const lowbit::TernaryWeights t = lowbit::quantize_ternary(w, 1, 8, 8, rounding);
        CHECK(codes_of(t.codes) == std::vector<int>{1, -1, 0, -1, 1, 0, -1, 1});
        CHECK(t.scales.rows() == 1);
        CHECK(t.scales.cols() == 1);
        CHECK(t.scales(0, 0) == 0.47500002f);
        const auto dequantized = t.dequantize();
        CHECK(dequantized(0, 0) == 0.47500002f);
        CHECK(dequantized(0, 1) == -0.47500002f);
        CHECK(dequantized(0, 2) == 0.0f);
    }
}

TEST_CASE("N8.b: tie case, one group of 4", "[bitnet][worked][N8]") {
    const std::vector<float> w{0.5f, -0.5f, 1.5f, -1.5f};
    CHECK(lowbit::absmean_scale(w) == 1.0f);
    CHECK(codes_of(lowbit::quantize_ternary(w, 1, 4, 4).codes) == std::vector<int>{1, -1, 1, -1});
    CHECK(codes_of(lowbit::quantize_ternary(w, 1, 4, 4, Rounding::half_to_even).codes) ==
          std::vector<int>{0, 0, 1, -1});
}

TEST_CASE("N8.c: per-token int8", "[bitnet][worked][N8]") {
    const std::vector<float> x{127.0f, 62.5f, -62.5f, 0.5f, -0.5f, 1.5f};
    CHECK(lowbit::absmax_scale(x) == 1.0f);
    const lowbit::Int8Activations a = lowbit::quantize_activations_int8(x, 1, 6);
    CHECK(a.scales(0) == 1.0f);
    CHECK(codes_of(a.codes) == std::vector<int>{127, 63, -63, 1, -1, 2});
    // RNE, still the symmetric [-127, 127] range (the BitNet reference code uses [-128, 127]).
    CHECK(codes_of(lowbit::quantize_activations_int8(x, 1, 6, Rounding::half_to_even).codes) ==
          std::vector<int>{127, 62, -62, 0, 0, 2});
}

TEST_CASE("N8: groups, per tensor, zero scales, per-row activations", "[bitnet][N8]") {
    Eigen::MatrixXf w(2, 8);  // column-major: quantized as [rows, cols] all the same
    w << 1, -1, 0.1f, 0, 4, 4, -4, 0,  //
        0, 0, 0, 0, 0.3f, -0.2f, 0.1f, 0.6f;
    const lowbit::TernaryWeights grouped = lowbit::quantize_ternary(w, 4);
    REQUIRE(grouped.scales.rows() == 2);
    REQUIRE(grouped.scales.cols() == 2);
    CHECK(grouped.scales(0, 0) == static_cast<float>(2.1 / 4));
    CHECK(grouped.scales(0, 1) == 3.0f);
    CHECK(grouped.scales(1, 0) == 1.0f);  // gamma == 0 gives scale 1
    CHECK(grouped.scales(1, 1) == static_cast<float>(1.2 / 4));
    CHECK(codes_of(grouped.codes) == std::vector<int>{1, -1, 0, 0, 1, 1, -1, 0, 0, 0, 0, 0, 1, -1, 0, 1});
    const Eigen::MatrixXf fake = lowbit::fake_quantize_ternary(w, 4);
    CHECK(fake(0, 4) == 3.0f);
    CHECK(fake(1, 7) == grouped.scales(1, 1));
    CHECK(fake(1, 0) == 0.0f);

    const lowbit::TernaryWeights whole = lowbit::quantize_ternary_per_tensor(w);
    CHECK(whole.scales.size() == 1);
    CHECK(whole.scales(0, 0) == lowbit::absmean_scale(w));
    const Eigen::MatrixXf whole_fake = lowbit::fake_quantize_ternary_per_tensor(w);
    CHECK(whole_fake(0, 4) == whole.scales(0, 0));
    CHECK(lowbit::absmean_scale(Eigen::VectorXf::Zero(5).eval()) == 1.0f);

    Eigen::MatrixXf x(3, 4);
    x << 1, -2, 0.5f, 0,  //
        0, 0, 0, 0,       //
        -254, 127, 1, 3;
    const lowbit::Int8Activations a = lowbit::quantize_activations_int8(x);
    CHECK(a.scales(0) == 2.0f / 127.0f);
    CHECK(a.scales(1) == 1.0f);
    CHECK(a.scales(2) == 2.0f);
    CHECK(a.codes(0, 1) == -127);
    CHECK(a.codes(2, 0) == -127);
    CHECK(a.codes(2, 1) == 64);  // 63.5 -> 64
    const Eigen::MatrixXf fake_x = lowbit::fake_quantize_activations_int8(x);
    CHECK(fake_x(2, 1) == 128.0f);
}

TEST_CASE("BitNet bad input", "[bitnet][errors]") {
    const std::vector<float> w(12, 1.0f);
    CHECK_THROWS_WITH(lowbit::quantize_ternary(w, 2, 6, 4),
                      StartsWith("lowbit::quantize_ternary: cols = 6 is not a multiple of group_size = 4"));
    CHECK_THROWS_WITH(lowbit::quantize_ternary(w, 2, 5, 5), ContainsSubstring("12 elements are not rows * cols"));
    CHECK_THROWS_WITH(lowbit::quantize_ternary(w, 2, 6, 0), ContainsSubstring("group_size = 0 must be >= 1"));
    std::vector<float> with_nan = w;
    with_nan[3] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(lowbit::quantize_ternary(with_nan, 2, 6, 6), ContainsSubstring("element 3 = nan is not finite"));
    CHECK_THROWS_WITH(lowbit::absmean_scale(std::vector<float>{}), StartsWith("lowbit::absmean_scale: the input is empty"));
    CHECK_THROWS_AS(lowbit::absmax_scale(with_nan), std::invalid_argument);
    CHECK_THROWS_WITH(lowbit::quantize_activations_int8(w, 3, 4, Rounding::stochastic),
                      ContainsSubstring("rounding = stochastic is not supported"));
}

TEST_CASE("BitNet span forms equal the Eigen forms", "[bitnet]") {
    auto rng = lowbit::test::make_rng(601);
    const std::vector<float> w = lowbit::test::uniform_floats(rng, 4 * 64, -1.0f, 1.0f);
    std::vector<float> out(w.size());
    lowbit::fake_quantize_ternary(w, out, 4, 64, 32);
    const lowbit::RowMatrixXf map = Eigen::Map<const lowbit::RowMatrixXf>(w.data(), 4, 64);
    const lowbit::RowMatrixXf expected = lowbit::fake_quantize_ternary(map, 32);
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(out[i] == expected.data()[i]);
    lowbit::fake_quantize_activations_int8(w, out, 4, 64);
    const lowbit::RowMatrixXf expected_x = lowbit::fake_quantize_activations_int8(map);
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(out[i] == expected_x.data()[i]);
    std::vector<float> short_out(3);
    CHECK_THROWS_AS(lowbit::fake_quantize_ternary(w, short_out, 4, 64), std::invalid_argument);
}
