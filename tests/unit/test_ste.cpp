// The STE free functions (docs/numerics.md N7): the seed's own tests (bitnet-quantize layer/ste.rs) as
// written there, then lowbit's additions (Rounding option, tensor-like inputs, bad input).
#include <cmath>
#include <limits>
#include <vector>

#include <unsupported/Eigen/CXX11/Tensor>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

namespace {
using lowbit::Rounding;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
constexpr float quiet_nan = std::numeric_limits<float>::quiet_NaN();
constexpr float inf = std::numeric_limits<float>::infinity();
}  // namespace

// ---- the seed's tests, as written ----

TEST_CASE("seed test_ternary_ste", "[ste][seed]") {
    // Create input with various magnitudes
    const std::vector<float> values{-2.0f, -0.5f, 0.0f, 0.5f, 2.0f};
    // Scale = 1.0 for simplicity
    const std::vector<float> result = lowbit::ternary_ste(values, 1.0f);
    // Should be clamped to {-1, 0, 1}
    CHECK(result[0] == -1.0f);  // -2.0 -> -1
    CHECK(result[1] == -1.0f);  // -0.5 rounds to -1
    CHECK(result[2] == 0.0f);   // 0 stays 0
    CHECK(result[3] == 1.0f);   // 0.5 rounds to 1
    CHECK(result[4] == 1.0f);   // 2.0 -> 1
}

TEST_CASE("seed test_int8_ste", "[ste][seed]") {
    const std::vector<float> values{-200.0f, -50.0f, 0.0f, 50.0f, 200.0f};
    const std::vector<float> result = lowbit::int8_ste(values, 1.0f);
    // Should be clamped to [-127, 127]
    CHECK(result[0] == -127.0f);
    CHECK(result[1] == -50.0f);
    CHECK(result[2] == 0.0f);
    CHECK(result[3] == 50.0f);
    CHECK(result[4] == 127.0f);
}

TEST_CASE("seed test_ste_with_scale", "[ste][seed]") {
    const std::vector<float> values{0.5f, 1.0f, 1.5f, 2.0f};
    // Scale = 2.0 means values are divided by 2 before rounding
    const std::vector<float> result = lowbit::ternary_ste(values, 2.0f);
    // 0.5/2 = 0.25 -> 0 -> 0
    // 1.0/2 = 0.5 -> 1 -> 2
    // 1.5/2 = 0.75 -> 1 -> 2
    // 2.0/2 = 1.0 -> 1 -> 2
    CHECK(std::fabs(result[0] - 0.0f) < 0.01f);
    CHECK(std::fabs(result[1] - 2.0f) < 0.01f);
    CHECK(std::fabs(result[2] - 2.0f) < 0.01f);
    CHECK(std::fabs(result[3] - 2.0f) < 0.01f);
}

TEST_CASE("seed test_ste_backward_identity", "[ste][seed]") {
    const std::vector<float> grad{1.0f, 2.0f, 3.0f};
    const std::vector<float> result = lowbit::ste_backward(grad);
    CHECK(grad == result);
}

// ---- lowbit's additions ----

TEST_CASE("N7: ste_forward = clamp(R(x / s), lo, hi) * s with a Rounding option", "[ste][N7]") {
    const std::vector<float> x{-0.75f, -0.25f, 0.25f, 0.75f, 5.0f, -5.0f, quiet_nan, inf, -inf};
    const std::vector<float> away = lowbit::ste_forward(x, 0.5f, -2.0f, 3.0f);
    const std::vector<float> expected_away{-1.0f, -0.5f, 0.5f, 1.0f, 1.5f, -1.0f};
    for (std::size_t i = 0; i < expected_away.size(); ++i) CHECK(away[i] == expected_away[i]);
    CHECK(std::isnan(away[6]));
    CHECK(away[7] == 1.5f);
    CHECK(away[8] == -1.0f);
    const std::vector<float> even = lowbit::ste_forward(x, 0.5f, -2.0f, 3.0f, Rounding::half_to_even);
    CHECK(even[0] == -1.0f);  // -1.5 -> -2
    CHECK(even[1] == 0.0f);   // -0.5 -> 0
    CHECK(even[2] == 0.0f);
    CHECK(even[3] == 1.0f);
    // The seed's ternary tie cases flip under RNE.
    CHECK(lowbit::ternary_ste(std::vector<float>{-0.5f, 0.5f}, 1.0f, Rounding::half_to_even) ==
          std::vector<float>{0.0f, 0.0f});
    // Stochastic: every result is floor or ceil, the stream repeats.
    lowbit::UniformStream a(5), b(5);
    const std::vector<float> many(1000, 0.3f);
    std::vector<float> out_a(many.size()), out_b(many.size());
    lowbit::ste_forward(many, out_a, 1.0f, -1.0f, 1.0f, a);
    lowbit::ste_forward(many, out_b, 1.0f, -1.0f, 1.0f, b);
    CHECK(out_a == out_b);
    for (float v : out_a) CHECK((v == 0.0f || v == 1.0f));
}

TEST_CASE("STE functions take tensor-like inputs", "[ste][tensor_like]") {
    Eigen::MatrixXf x(2, 3);
    x << -2.0f, -0.5f, 0.0f, 0.5f, 2.0f, 0.7f;
    const Eigen::MatrixXf t = lowbit::ternary_ste(x, 1.0f);
    CHECK(t(0, 0) == -1.0f);
    CHECK(t(1, 1) == 1.0f);
    CHECK(t(1, 2) == 1.0f);
    Eigen::Tensor<float, 2> tensor(2, 3);
    tensor.setValues({{-200.0f, 50.0f, 0.0f}, {1.0f, 2.0f, 300.0f}});
    const Eigen::Tensor<float, 2> q = lowbit::int8_ste(tensor, 1.0f);
    CHECK(q(0, 0) == -127.0f);
    CHECK(q(1, 2) == 127.0f);
    const Eigen::Tensor<float, 2> g = lowbit::ste_backward(tensor);
    CHECK(g(0, 1) == 50.0f);
}

TEST_CASE("STE bad input", "[ste][errors]") {
    const std::vector<float> x{1.0f};
    for (float bad : {0.0f, -2.0f, quiet_nan, inf}) {
        CHECK_THROWS_AS(lowbit::ste_forward(x, bad, -1.0f, 1.0f), std::invalid_argument);
        CHECK_THROWS_WITH(lowbit::ternary_ste(x, bad), StartsWith("lowbit::ternary_ste: scale = "));
    }
    CHECK_THROWS_WITH(lowbit::int8_ste(x, -2.0f), StartsWith("lowbit::int8_ste: scale = -2"));
    CHECK_THROWS_WITH(lowbit::ste_forward(x, 1.0f, 2.0f, 1.0f),
                      StartsWith("lowbit::ste_forward: min_val = 2 must be <= max_val = 1"));
    CHECK_THROWS_AS(lowbit::ste_forward(x, 1.0f, quiet_nan, 1.0f), std::invalid_argument);
    std::vector<float> out(2);
    CHECK_THROWS_WITH(lowbit::ste_forward(x, out, 1.0f, -1.0f, 1.0f), ContainsSubstring("x has 1 elements but out has 2"));
    CHECK_THROWS_AS(lowbit::ste_backward(x, out), std::invalid_argument);
}
