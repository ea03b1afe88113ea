// FakeQuantize through <lowbit/lowbit.hpp>: every rule of docs/numerics.md N1-N6 and the worked examples
// N2.a, N4.a-N4.e, N5.a, N6.a and N6.b with their exact values. Expected outputs are written as
// code * scale: the decimal values in docs/numerics.md are those products rounded to float.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include <unsupported/Eigen/CXX11/Tensor>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using lowbit::FakeQuantConfig;
using lowbit::FakeQuantize;
using lowbit::Rounding;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float quiet_nan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> times(const std::vector<int>& codes, float scale) {
    std::vector<float> result;
    for (int code : codes) result.push_back(static_cast<float>(code) * scale);
    return result;
}

FakeQuantConfig pytorch_narrow() {
    FakeQuantConfig config = FakeQuantConfig::pytorch();
    config.narrow_range = true;
    return config;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

}  // namespace

// ---------------------------------------------------------------------------------------------- N3
TEST_CASE("N3: code ranges and num_levels", "[fake_quantize][N3]") {
    CHECK(FakeQuantize<4>().qmin() == -7);
    CHECK(FakeQuantize<4>().qmax() == 7);
    CHECK(FakeQuantize<4>().num_levels() == 15);
    CHECK(FakeQuantize<8>().qmin() == -127);
    CHECK(FakeQuantize<8>().qmax() == 127);
    CHECK(FakeQuantize<8>().num_levels() == 255);
    FakeQuantConfig full;
    full.narrow_range = false;
    CHECK(FakeQuantize<8>(full).qmin() == -128);
    CHECK(FakeQuantize<8>(full).num_levels() == 256);
    CHECK(FakeQuantize<4>(full).qmin() == -8);
    CHECK(FakeQuantize<4, false>().qmin() == 0);
    CHECK(FakeQuantize<4, false>().qmax() == 15);
    CHECK(FakeQuantize<4, false>().num_levels() == 16);
    CHECK(FakeQuantize<8, false>().qmax() == 255);
    CHECK(FakeQuantize<8, false>().num_levels() == 256);
    CHECK(FakeQuantize<2>().qmin() == -1);
    CHECK(FakeQuantize<2>().qmax() == 1);
    CHECK(FakeQuantize<16>().qmax() == 32767);
    CHECK(FakeQuantize<16, false>().qmax() == 65535);
    // The pytorch() preset is full range (torch's qint8 [-128, 127]).
    CHECK(FakeQuantize<8>(FakeQuantConfig::pytorch()).qmin() == -128);
}

// ---------------------------------------------------------------------------------------------- N1
TEST_CASE("N1: default rounding is half away from zero; half_to_even and stochastic on request",
          "[fake_quantize][N1]") {
    const std::vector<float> ties{0.5f, 1.5f, 2.5f, -0.5f, -2.5f};
    FakeQuantize<8> away;
    CHECK(away.config().rounding == Rounding::half_away_from_zero);
    away.set_qparams(1.0f, 0);
    CHECK(away.forward(ties) == std::vector<float>{1, 2, 3, -1, -3});

    FakeQuantConfig even_config;
    even_config.rounding = Rounding::half_to_even;
    FakeQuantize<8> even(even_config);
    even.set_qparams(1.0f, 0);
    CHECK(even.forward(ties) == std::vector<float>{0, 2, 2, 0, -2});

    FakeQuantConfig stochastic_config;
    stochastic_config.rounding = Rounding::stochastic;
    FakeQuantize<8> stochastic(stochastic_config);
    stochastic.set_qparams(1.0f, 0);
    for (float y : stochastic.forward(std::vector<float>(64, 2.25f))) CHECK((y == 2.0f || y == 3.0f));
}

TEST_CASE("N1: stochastic rounding is unbiased", "[fake_quantize][N1][stochastic]") {
    FakeQuantConfig config;
    config.rounding = Rounding::stochastic;
    config.seed = 7;
    FakeQuantize<8> quantizer(config);
    quantizer.set_qparams(0.5f, 0);
    constexpr std::size_t n = 200000;
    for (float value : {0.3f, -2.7f, 10.1f, 0.5f, -0.05f}) {
        const std::vector<float> x(n, value);
        lowbit::UniformStream stream(11);
        const std::vector<float> y = quantizer.forward(x, stream);
        double sum = 0.0;
        for (float v : y) {
            const double code = static_cast<double>(v) / 0.5;
            CHECK((code == std::floor(static_cast<double>(value) / 0.5) || code == std::ceil(static_cast<double>(value) / 0.5)));
            sum += v;
        }
        const double mean_code = sum / static_cast<double>(n) / 0.5;
        INFO("v = " << value / 0.5f << ", mean code " << mean_code);
        CHECK(std::fabs(mean_code - static_cast<double>(value) / 0.5) <= lowbit::test::stochastic_mean_tolerance(n));
    }
}

TEST_CASE("N1: stochastic rounding repeats for a seed", "[fake_quantize][N1][stochastic]") {
    auto rng = lowbit::test::make_rng(401);
    const std::vector<float> x = lowbit::test::uniform_floats(rng, 5000, -3.0f, 3.0f);
    FakeQuantConfig config;
    config.rounding = Rounding::stochastic;
    config.seed = 123;
    FakeQuantize<4> quantizer(config);
    quantizer.set_qparams(0.25f, 0);
    // forward(x) draws from a fresh UniformStream(config.seed): the same every call.
    CHECK(quantizer.forward(x) == quantizer.forward(x));
    // With the caller's stream: the same seed repeats the whole sequence, steps differ from each other.
    lowbit::UniformStream first(99), second(99), other(100);
    const auto a1 = quantizer.forward(x, first);
    const auto a2 = quantizer.forward(x, first);
    const auto b1 = quantizer.forward(x, second);
    const auto b2 = quantizer.forward(x, second);
    CHECK(a1 == b1);
    CHECK(a2 == b2);
    CHECK(a1 != a2);
    CHECK(quantizer.forward(x, other) != a1);
    CHECK(first.position() == 2 * x.size());
}

// ------------------------------------------------------------------------------------------- N4.a
TEST_CASE("N4.a: q4 calibrated on [-1.0, 0.3, 0.7, 1.4]", "[fake_quantize][worked]") {
    FakeQuantize<4> q4;
    const std::vector<float> data{-1.0f, 0.3f, 0.7f, 1.4f};
    q4.calibrate(data);
    const float s = 1.4f / 7.0f;
    CHECK(q4.scale() == s);
    CHECK(q4.scale() == 0.2f);
    CHECK(q4.zero_point() == 0);
    CHECK(q4.num_levels() == 15);
    // x/s = [-5, 1.5*, 3.5*, 7] -> RHAZ [-5, 2, 4, 7]
    CHECK(q4.forward(data) == times({-5, 2, 4, 7}, s));

    // The table: entrenar y (RHAZ), backward_clamped band [-1.4, 1.4], PyTorch-style y and mask.
    const std::vector<float> x{0.1f, 0.5f, -0.1f, -0.5f, 0.3f, 1.45f, -1.5f};
    CHECK(q4.forward(x) == times({1, 3, -1, -3, 2, 7, -7}, s));
    CHECK(q4.backward_clamped(std::vector<float>(x.size(), 1.0f), x) == std::vector<float>{1, 1, 1, 1, 1, 0, 0});

    FakeQuantize<4> torch_style(pytorch_narrow());  // range [-7, 7] as in the table
    torch_style.set_qparams(s, 0);
    CHECK(1.0f / s == 5.0f);
    CHECK(torch_style.forward(x) == times({0, 2, 0, -2, 2, 7, -7}, s));
    CHECK(torch_style.backward_clamped(std::vector<float>(x.size(), 1.0f), x) ==
          std::vector<float>{1, 1, 1, 1, 1, 1, 0});
}

// ------------------------------------------------------------------------------------------- N4.b
TEST_CASE("N4.b: q8 on [0, 1, -2, 1.5, -1.5] (the crate's own test)", "[fake_quantize][worked]") {
    FakeQuantize<8> q8;
    const std::vector<float> data{0.0f, 1.0f, -2.0f, 1.5f, -1.5f};
    q8.calibrate(data);
    const float s = 2.0f / 127.0f;
    CHECK(q8.scale() == s);
    CHECK(q8.scale() == 0.015748031f);
    const std::vector<float> y = q8.forward(data);
    CHECK(y == times({0, 64, -127, 95, -95}, s));
    CHECK(y[2] == -2.0f);
    CHECK(y[1] == 1.0078740f);
    CHECK(y[3] == 1.4960630f);
}

// ------------------------------------------------------------------------------------------- N4.c
// The inputs are those of the seed crate's own asymmetric examples, whose calibration is *buggy* (the
// range is not widened to contain 0, the scale is floored after z). lowbit follows N4 instead
// (zero-inclusive range, floor before z), so these are lowbit's results; the seed's are in the comments.
TEST_CASE("N4.c: 4-bit asymmetric calibration, lowbit's N4 results for the seed's inputs",
          "[fake_quantize][worked][N4]") {
    SECTION("[-1.0, 0.3, 0.7, 2.0]: range contains 0, the same as the seed") {
        FakeQuantize<4, false> q;
        const std::vector<float> data{-1.0f, 0.3f, 0.7f, 2.0f};
        q.calibrate(data);
        CHECK(q.scale() == 3.0f / 15.0f);
        CHECK(q.scale() == 0.2f);
        CHECK(q.zero_point() == 5);  // 0 - RHAZ(-1 / 0.2) = 5
        const std::vector<float> y = q.forward(data);
        CHECK(y == times({-5, 2, 4, 10}, 0.2f));  // codes R(x/s) + z = [0, 7, 9, 15], minus z
        CHECK(y[0] == -1.0f);
        CHECK(y[3] == 2.0f);
    }
    SECTION("[1.0, 2.0]: widened to [0, 2] (the seed loses 2.0 and gives [1.0, 1.0])") {
        FakeQuantize<4, false> q;
        q.calibrate(std::vector<float>{1.0f, 2.0f});
        const float s = 2.0f / 15.0f;
        CHECK(q.scale() == s);
        CHECK(q.zero_point() == 0);
        const std::vector<float> y = q.forward(std::vector<float>{1.0f, 2.0f});
        CHECK(y == times({7, 15}, s));  // 1/s = 7.4999996 in float (s = fl(2/15) > 2/15): 7
        CHECK(y[1] == 2.0f);
    }
    SECTION("[-2.0, -1.0]: widened to [-2, 0] (the seed gives [-1.0, -1.0])") {
        FakeQuantize<4, false> q;
        q.calibrate(std::vector<float>{-2.0f, -1.0f});
        const float s = 2.0f / 15.0f;
        CHECK(q.scale() == s);
        CHECK(q.zero_point() == 15);
        const std::vector<float> y = q.forward(std::vector<float>{-2.0f, -1.0f});
        CHECK(y == times({-15, -7}, s));  // -1/s = -7.4999996: -7
        CHECK(y[0] == -2.0f);
    }
    SECTION("[3, 3, 3]: round-trips exactly (the seed gives 1.5e-9)") {
        FakeQuantize<4, false> q;
        q.calibrate(std::vector<float>{3.0f, 3.0f, 3.0f});
        CHECK(q.scale() == 3.0f / 15.0f);
        CHECK(q.zero_point() == 0);
        CHECK(q.forward(std::vector<float>{3.0f, 3.0f, 3.0f}) == std::vector<float>{3.0f, 3.0f, 3.0f});
    }
    SECTION("[0, 0]: all zero gives the floor scale and outputs of exactly 0") {
        FakeQuantize<4, false> q;
        q.calibrate(std::vector<float>{0.0f, 0.0f});
        CHECK(q.is_initialized());
        CHECK(q.scale() == q.config().min_scale);
        CHECK(q.zero_point() == 0);
        for (float y : q.forward(std::vector<float>{0.0f, 0.0f})) CHECK(same_bits(y, 0.0f));
    }
    SECTION("[-3, -3]: round-trips exactly (the seed gives -1.5e-9)") {
        FakeQuantize<4, false> q;
        q.calibrate(std::vector<float>{-3.0f, -3.0f});
        CHECK(q.scale() == 0.2f);
        CHECK(q.zero_point() == 15);
        CHECK(q.forward(std::vector<float>{-3.0f, -3.0f}) == std::vector<float>{-3.0f, -3.0f});
    }
}

// ---------------------------------------------------------------------------------------------- N4
TEST_CASE("N4: min-max calibration", "[fake_quantize][N4]") {
    SECTION("symmetric: s = max(|min|, |max|) / qmax, z = 0") {
        FakeQuantize<8> q;
        q.calibrate(std::vector<float>{-3.0f, 1.0f, 0.5f});
        CHECK(q.scale() == 3.0f / 127.0f);
        CHECK(q.zero_point() == 0);
        FakeQuantize<8> positive;
        positive.calibrate(std::vector<float>{1.0f, 2.0f});
        CHECK(positive.scale() == 2.0f / 127.0f);
    }
    SECTION("asymmetric: the range is widened to contain 0") {
        FakeQuantize<8, false> q;
        q.calibrate(std::vector<float>{-1.0f, 2.0f});
        CHECK(q.scale() == 3.0f / 255.0f);
        CHECK(q.zero_point() == 85);
    }
    SECTION("the scale is floored before z is computed") {
        FakeQuantize<8, false> q;
        q.calibrate(std::vector<float>{-1e-12f, 0.0f});
        CHECK(q.scale() == 1e-10f);
        CHECK(q.zero_point() == 0);  // 0 - R(-1e-12 / 1e-10); from the unfloored scale it would be 255
        CHECK(q.forward(std::vector<float>{-1e-12f})[0] == 0.0f);
    }
    SECTION("all-zero data gives outputs of exactly 0, symmetric too") {
        FakeQuantize<8> q;
        q.calibrate(std::vector<float>(10, 0.0f));
        CHECK(q.scale() == 1e-10f);
        for (float y : q.forward(std::vector<float>{0.0f, -0.0f})) CHECK(y == 0.0f);
    }
    SECTION("constant data round-trips (exactly where a float scale allows, within one ulp always)") {
        // fl(qmax * fl(c / qmax)) == c is not true for every float c and no float scale achieves it for
        // some (e.g. q = 7: the products q * s skip over c); N4.4's "exactly" holds for these constants and
        // within one ulp of c for all: |q s - c| <= q ulp(s) / 2 < ulp(c).
        for (float c : {3.0f, -3.0f, 1.0f, 0.5f, -2.0f, 127.0f}) {
            FakeQuantize<8> q;
            q.calibrate(std::vector<float>(4, c));
            CHECK(q.forward(std::vector<float>{c})[0] == c);
        }
        auto rng = lowbit::test::make_rng(402);
        for (float c : lowbit::test::uniform_floats(rng, 200, -1000.0f, 1000.0f)) {
            FakeQuantize<4> symmetric;
            symmetric.calibrate(std::vector<float>(3, c));
            FakeQuantize<8, false> asymmetric;
            asymmetric.calibrate(std::vector<float>(3, c));
            for (float y : {symmetric.forward(std::vector<float>{c})[0], asymmetric.forward(std::vector<float>{c})[0]}) {
                const float ulp = std::nextafter(std::fabs(c), inf) - std::fabs(c);
                CHECK(std::fabs(y - c) <= ulp);
            }
        }
    }
    SECTION("non-finite values are skipped") {
        FakeQuantize<8, false> with_specials, plain;
        with_specials.calibrate(std::vector<float>{quiet_nan, -1.0f, inf, 2.0f, -inf, quiet_nan});
        plain.calibrate(std::vector<float>{-1.0f, 2.0f});
        CHECK(with_specials.scale() == plain.scale());
        CHECK(with_specials.zero_point() == plain.zero_point());
    }
    SECTION("no finite value, or empty data, leaves the quantizer as it was") {
        FakeQuantize<8> q;
        q.calibrate(std::vector<float>{quiet_nan, inf, -inf});
        CHECK_FALSE(q.is_initialized());
        q.calibrate(std::vector<float>{});
        CHECK_FALSE(q.is_initialized());
        CHECK(q.scale() == 1.0f);
        q.calibrate(std::vector<float>{-2.0f, 1.0f});
        const float calibrated = q.scale();
        q.calibrate(std::vector<float>{quiet_nan});
        q.calibrate(std::vector<float>{});
        CHECK(q.is_initialized());
        CHECK(q.scale() == calibrated);
    }
    SECTION("forward before calibration uses scale 1 and zero point 0") {
        FakeQuantize<8> q;
        CHECK_FALSE(q.is_initialized());
        CHECK(q.scale() == 1.0f);
        CHECK(q.zero_point() == 0);
        CHECK(q.forward(std::vector<float>{0.4f, 1.6f, 200.0f, -2.5f}) == std::vector<float>{0, 2, 127, -3});
    }
    SECTION("forward_with_calibration calibrates once") {
        FakeQuantize<8> q;
        const std::vector<float> first{-1.0f, 1.0f};
        CHECK(q.forward_with_calibration(first) == q.forward(first));
        CHECK(q.scale() == 1.0f / 127.0f);
        q.forward_with_calibration(std::vector<float>{-100.0f, 100.0f});
        CHECK(q.scale() == 1.0f / 127.0f);
    }
}

TEST_CASE("N4: observers (running min-max, and PyTorch's moving average)", "[fake_quantize][N4][worked]") {
    SECTION("min_max keeps the running extremes") {
        FakeQuantize<8, false> q;
        q.observe(std::vector<float>{-1.0f, 2.0f});
        q.observe(std::vector<float>{-0.5f, 1.0f});
        CHECK(q.observed_min() == -1.0f);
        CHECK(q.observed_max() == 2.0f);
        q.observe(std::vector<float>{-3.0f, 0.0f});
        CHECK(q.observed_min() == -3.0f);
        CHECK(q.scale() == 5.0f / 255.0f);
    }
    SECTION("N4.e: moving average with c = 0.01: (-1, 2) then (-3, 1) gives (-1.02, 1.99)") {
        FakeQuantize<8, false> q(FakeQuantConfig::pytorch());
        q.observe(std::vector<float>{-1.0f, 0.5f, 2.0f});
        CHECK(q.observed_min() == -1.0f);
        CHECK(q.observed_max() == 2.0f);
        q.observe(std::vector<float>{-3.0f, 1.0f});
        CHECK(std::fabs(q.observed_min() - -1.02f) <= lowbit::test::observer_update_tolerance(3.0));
        CHECK(std::fabs(q.observed_max() - 1.99f) <= lowbit::test::observer_update_tolerance(2.0));
        // calibrate restarts the observer from its data
        q.calibrate(std::vector<float>{-4.0f, 4.0f});
        CHECK(q.observed_min() == -4.0f);
    }
}

// ------------------------------------------------------------------------------------------- N4.d
TEST_CASE("N4.d: observer qparams for min = -1, max = 2, and forward with them", "[fake_quantize][worked]") {
    const std::vector<float> data{-1.0f, 2.0f};
    FakeQuantize<8, false> quint8(FakeQuantConfig::pytorch());
    quint8.calibrate(data);
    CHECK(quint8.scale() == 3.0f / 255.0f);
    CHECK(quint8.scale() == 0.011764706f);
    CHECK(quint8.zero_point() == 85);
    FakeQuantize<7, false> reduced(FakeQuantConfig::pytorch());  // quint8 with reduce_range: [0, 127]
    reduced.calibrate(data);
    CHECK(reduced.scale() == 3.0f / 127.0f);
    CHECK(reduced.zero_point() == 42);
    FakeQuantize<8> narrow_symmetric(pytorch_narrow());  // qint8 symmetric [-127, 127]
    narrow_symmetric.calibrate(data);
    CHECK(narrow_symmetric.scale() == 2.0f / 127.0f);
    CHECK(narrow_symmetric.zero_point() == 0);
    FakeQuantize<8, false> zeros(FakeQuantConfig::pytorch());
    zeros.calibrate(std::vector<float>{0.0f, 0.0f});
    CHECK(zeros.scale() == 0x1.0p-23f);
    CHECK(zeros.zero_point() == 0);

    // With s = 3/255, z = 85, fl(1/s) = 85:
    const float s = quint8.scale();
    CHECK(1.0f / s == 85.0f);
    const std::vector<float> x{0.5f, 2.01f, -1.01f};
    const std::vector<float> y = quint8.forward(x);
    CHECK(y == times({42, 170, -85}, s));  // codes 127 (42.5* -> 42, + 85), 256 -> 255, -1 -> 0
    CHECK(y[0] == 0.49411765f);
    CHECK(y[1] == 2.0f);
    CHECK(y[2] == -1.0f);
    CHECK(quint8.backward_clamped(std::vector<float>(3, 1.0f), x) == std::vector<float>{1, 0, 0});
}

// ---------------------------------------------------------------------------------------------- N5
TEST_CASE("N5: forward formula, NaN in gives NaN out, +-Inf saturate", "[fake_quantize][N5]") {
    FakeQuantize<4, false> asymmetric;
    asymmetric.set_qparams(0.1f, 5);
    const std::vector<float> y = asymmetric.forward(std::vector<float>{quiet_nan, inf, -inf, 0.26f, -0.34f});
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == 10.0f * 0.1f);   // (qmax - z) s
    CHECK(y[2] == -5.0f * 0.1f);   // (qmin - z) s
    CHECK(y[3] == 3.0f * 0.1f);    // R(2.6) = 3
    CHECK(y[4] == -3.0f * 0.1f);   // R(-3.4) = -3
    FakeQuantize<8> torch_like(FakeQuantConfig::pytorch());
    torch_like.set_qparams(0.5f, 0);
    const std::vector<float> t = torch_like.forward(std::vector<float>{quiet_nan, inf, -inf});
    CHECK(std::isnan(t[0]));
    CHECK(t[1] == 127.0f * 0.5f);
    CHECK(t[2] == -128.0f * 0.5f);
}

// ------------------------------------------------------------------------------------------- N5.a
TEST_CASE("N5.a: halfway points, PyTorch preset and lowbit's default", "[fake_quantize][worked]") {
    const std::vector<float> x{-1.25f, -0.75f, -0.25f, 0.25f, 0.75f, 1.25f};
    FakeQuantize<8> signed_torch(FakeQuantConfig::pytorch());  // [-128, 127], z = 0
    signed_torch.set_qparams(0.5f, 0);
    CHECK(signed_torch.forward(x) == std::vector<float>{-1.0f, -1.0f, 0.0f, 0.0f, 1.0f, 1.0f});
    FakeQuantize<8, false> unsigned_torch(FakeQuantConfig::pytorch());  // z = 3 needs an affine range
    unsigned_torch.set_qparams(0.5f, 3);
    CHECK(unsigned_torch.forward(x) == std::vector<float>{-1.0f, -1.0f, 0.0f, 0.0f, 1.0f, 1.0f});
    // lowbit's default rounds half away from zero *before* adding z (N5), so z = 0 and z = 3 agree;
    // rounding x/s + z (the seed crate's order, quoted in N5.a) is not what lowbit does.
    FakeQuantize<8> signed_default;
    signed_default.set_qparams(0.5f, 0);
    CHECK(signed_default.forward(x) == std::vector<float>{-1.5f, -1.0f, -0.5f, 0.5f, 1.0f, 1.5f});
    FakeQuantize<8, false> unsigned_default;
    unsigned_default.set_qparams(0.5f, 3);
    CHECK(unsigned_default.forward(x) == std::vector<float>{-1.5f, -1.0f, -0.5f, 0.5f, 1.0f, 1.5f});
}

// ------------------------------------------------------------------------------------------- N6.a
TEST_CASE("N6.a: mask at the range edges", "[fake_quantize][worked][N6]") {
    const std::vector<float> x{-0.4f, -0.5f, -0.6f, 254.5f, 255.4f, 255.5f};
    const std::vector<float> ones(x.size(), 1.0f);
    FakeQuantize<8, false> torch_like(FakeQuantConfig::pytorch());
    torch_like.set_qparams(1.0f, 0);
    CHECK(torch_like.forward(x) == std::vector<float>{0, 0, 0, 254, 255, 255});
    CHECK(torch_like.backward_clamped(ones, x) == std::vector<float>{1, 1, 0, 1, 1, 0});
    FakeQuantize<8, false> band;  // default: raw x in [0, 255]
    band.set_qparams(1.0f, 0);
    CHECK(band.backward_clamped(ones, x) == std::vector<float>{0, 0, 0, 1, 0, 0});
}

// ------------------------------------------------------------------------------------------- N2.a
TEST_CASE("N2.a: reciprocal versus division", "[fake_quantize][worked][N2]") {
    FakeQuantize<8> torch_like(FakeQuantConfig::pytorch());
    torch_like.set_qparams(0.01f, 0);
    CHECK(torch_like.forward(std::vector<float>{0.045f})[0] == 4.0f * 0.01f);
    FakeQuantize<8> dividing;
    dividing.set_qparams(0.01f, 0);
    CHECK(dividing.forward(std::vector<float>{0.045f})[0] == 5.0f * 0.01f);
}

// ---------------------------------------------------------------------------------------------- N6
TEST_CASE("N6: backward is the identity; backward_clamped uses the raw-x inclusive band corrected for z",
          "[fake_quantize][N6]") {
    FakeQuantize<4, false> q;
    q.set_qparams(0.1f, 5);
    const std::vector<float> grad{0.5f, -2.0f, quiet_nan, inf, 3.0f};
    const std::vector<float> passed = q.backward(grad);
    for (std::size_t i = 0; i < grad.size(); ++i) CHECK((same_bits(passed[i], grad[i]) || std::isnan(passed[i])));
    const float low = -5.0f * 0.1f, high = 10.0f * 0.1f;  // (qmin - z) s, (qmax - z) s
    const std::vector<float> x{low, high, std::nextafter(low, -inf), std::nextafter(high, inf), quiet_nan, 0.0f, inf};
    CHECK(q.backward_clamped(std::vector<float>(x.size(), 2.0f), x) == std::vector<float>{2, 2, 0, 0, 0, 2, 0});
}

// ------------------------------------------------------------------------------------------- N6.b
TEST_CASE("N6.b: LSQ backward", "[fake_quantize][worked][lsq]") {
    FakeQuantize<3> q(FakeQuantConfig::pytorch());  // [-4, 3]
    q.set_qparams(0.5f, 0);
    const std::vector<float> x{-1.3f, 0.26f, 0.7f, 3.0f, -2.3f};
    const std::vector<float> ones(x.size(), 1.0f);
    const auto lsq = q.backward_lsq(ones, x);
    CHECK(lsq.grad_input == std::vector<float>{1, 1, 1, 0, 0});
    const double abs_sum = 0.4 + 0.48 + 0.4 + 3.0 + 4.0;
    CHECK(std::fabs(lsq.grad_scale - -1.3200002f) <= lowbit::test::reordered_sum_tolerance(x.size(), abs_sum));
    const float factor = 1.0f / std::sqrt(5.0f * 3.0f);
    const auto scaled = q.backward_lsq(ones, x, factor);
    CHECK(std::fabs(scaled.grad_scale - factor * -1.32f) <=
          lowbit::test::reordered_sum_tolerance(x.size(), abs_sum * factor) + 4 * lowbit::test::float_unit_roundoff);
    // Tensor-like form gives the same.
    Eigen::VectorXf xv = Eigen::Map<const Eigen::VectorXf>(x.data(), 5);
    const auto tensor_lsq = q.backward_lsq(Eigen::VectorXf::Ones(5).eval(), xv);
    CHECK(tensor_lsq.grad_scale == lsq.grad_scale);
}

// ------------------------------------------------------------------------------------- tensor-like
TEST_CASE("Tensor-like inputs give plain results of the input's shape", "[fake_quantize][tensor_like]") {
    FakeQuantize<4> q;
    q.set_qparams(0.3f, 0);
    auto rng = lowbit::test::make_rng(403);
    const std::vector<float> values = lowbit::test::uniform_floats(rng, 24, -3.0f, 3.0f);
    auto expect_elementwise = [&](const auto& input, const auto& output) {
        for (Eigen::Index i = 0; i < input.rows(); ++i)
            for (Eigen::Index j = 0; j < input.cols(); ++j)
                CHECK(output(i, j) == q.forward(std::vector<float>{input(i, j)})[0]);
    };
    const Eigen::MatrixXf col_major = Eigen::Map<const Eigen::MatrixXf>(values.data(), 4, 6);
    const lowbit::RowMatrixXf row_major = col_major;
    const Eigen::Matrix<float, 4, 6> fixed = col_major;
    const Eigen::ArrayXXf array = col_major.array();

    const auto a = q.forward(col_major);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(a)>, Eigen::MatrixXf>);
    expect_elementwise(col_major, a);
    const auto b = q.forward(row_major);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(b)>, std::remove_cvref_t<decltype(row_major)>>);
    expect_elementwise(col_major, b);
    const auto c = q.forward(fixed);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(c)>, Eigen::Matrix<float, 4, 6>>);
    expect_elementwise(col_major, c);
    const auto d = q.forward(array);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(d)>, Eigen::ArrayXXf>);
    expect_elementwise(col_major, d);
    // Map, strided Map (a block), Ref, and a lazy expression.
    const Eigen::Map<const Eigen::MatrixXf> map(values.data(), 4, 6);
    expect_elementwise(col_major, q.forward(map));
    const Eigen::Map<const Eigen::MatrixXf, 0, Eigen::OuterStride<>> strided(values.data(), 2, 6, Eigen::OuterStride<>(4));
    const auto e = q.forward(strided);
    CHECK(e.rows() == 2);
    expect_elementwise(strided, e);
    const Eigen::Ref<const Eigen::MatrixXf> ref = col_major.block(1, 1, 3, 4);
    expect_elementwise(ref, q.forward(ref));
    expect_elementwise(col_major * 2.0f, q.forward(col_major * 2.0f));
    expect_elementwise(row_major.transpose(), q.forward(row_major.transpose()));

    // Eigen::Tensor of rank 1 and 3, both layouts, and TensorMap.
    Eigen::Tensor<float, 3> t3(2, 3, 4);
    std::copy(values.begin(), values.end(), t3.data());
    const Eigen::Tensor<float, 3> y3 = q.forward(t3);
    CHECK(y3.dimension(0) == 2);
    CHECK(y3.dimension(2) == 4);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k) CHECK(y3(i, j, k) == q.forward(std::vector<float>{t3(i, j, k)})[0]);
    Eigen::Tensor<float, 3, Eigen::RowMajor> r3 = t3.swap_layout().shuffle(Eigen::array<int, 3>{2, 1, 0});
    const auto yr3 = q.forward(r3);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(yr3)>, Eigen::Tensor<float, 3, Eigen::RowMajor>>);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k) CHECK(yr3(i, j, k) == y3(i, j, k));
    Eigen::TensorMap<const Eigen::Tensor<const float, 1>> map1(values.data(), 24);
    const Eigen::Tensor<float, 1> y1 = q.forward(map1);
    CHECK(y1.size() == 24);
    for (int i = 0; i < 24; ++i) CHECK(y1(i) == q.forward(std::vector<float>{values[static_cast<std::size_t>(i)]})[0]);

    // backward_clamped with grad and input in different storage orders pairs elements by index.
    const auto masked = q.backward_clamped(row_major, col_major);
    for (Eigen::Index i = 0; i < 4; ++i)
        for (Eigen::Index j = 0; j < 6; ++j) {
            const float x = col_major(i, j);
            CHECK(masked(i, j) == (std::fabs(x) <= 7.0f * 0.3f ? x : 0.0f));
        }
    const Eigen::Tensor<float, 3> g3 = q.backward(t3);
    CHECK(g3(1, 2, 3) == t3(1, 2, 3));
}

// -------------------------------------------------------------------------------------- bad input
TEST_CASE("Bad input throws std::invalid_argument naming the function and the value", "[fake_quantize][errors]") {
    FakeQuantize<8> q;
    for (float bad : {0.0f, -1.0f, quiet_nan, inf}) {
        CHECK_THROWS_AS(q.set_qparams(bad, 0), std::invalid_argument);
        CHECK_THROWS_WITH(q.set_qparams(bad, 0), StartsWith("lowbit::FakeQuantize::set_qparams: scale = "));
    }
    CHECK_THROWS_WITH(q.set_qparams(-1.0f, 0), ContainsSubstring("scale = -1"));
    CHECK_THROWS_WITH(q.set_qparams(quiet_nan, 0), ContainsSubstring("scale = nan"));
    CHECK_THROWS_WITH(q.set_qparams(0.1f, 200), ContainsSubstring("zero_point = 200 is outside [-127, 127]"));
    CHECK_THROWS_WITH(q.set_qparams(0.1f, 3), ContainsSubstring("zero_point = 3 must be 0"));
    FakeQuantize<4, false> asymmetric;
    CHECK_THROWS_WITH(asymmetric.set_qparams(0.1f, -1), ContainsSubstring("zero_point = -1 is outside [0, 15]"));
    CHECK_THROWS_WITH(asymmetric.set_qparams(0.1f, 16), ContainsSubstring("zero_point = 16"));
    CHECK_FALSE(asymmetric.is_initialized());

    FakeQuantConfig bad_config;
    bad_config.averaging_constant = 0.0f;
    CHECK_THROWS_WITH(FakeQuantize<8>(bad_config), StartsWith("lowbit::FakeQuantize: averaging_constant = 0"));

    const std::vector<float> three(3, 1.0f), four(4, 1.0f);
    CHECK_THROWS_WITH(q.backward_clamped(three, four),
                      StartsWith("lowbit::FakeQuantize::backward_clamped: grad has 3 elements but input has 4"));
    CHECK_THROWS_AS(q.backward_lsq(three, four), std::invalid_argument);
    std::vector<float> out(2);
    CHECK_THROWS_WITH(q.forward(three, out), StartsWith("lowbit::FakeQuantize::forward: x has 3"));
    CHECK_THROWS_WITH(q.backward_clamped(Eigen::MatrixXf::Ones(2, 3).eval(), Eigen::MatrixXf::Ones(3, 2).eval()),
                      ContainsSubstring("grad has shape [2, 3] but input has shape [3, 2]"));
    Eigen::Tensor<float, 2> t23(2, 3), t32(3, 2);
    t23.setZero();
    t32.setZero();
    CHECK_THROWS_AS(q.backward_clamped(t23, t32), std::invalid_argument);

    FakeQuantize<8> uncalibrated;
    CHECK_THROWS_WITH(uncalibrated.forward_with_calibration(std::vector<float>{quiet_nan, inf}),
                      StartsWith("lowbit::FakeQuantize::forward_with_calibration: x has no finite value"));
    CHECK_THROWS_AS(uncalibrated.forward_with_calibration(Eigen::VectorXf::Constant(3, quiet_nan).eval()),
                    std::invalid_argument);
    CHECK_THROWS_WITH(uncalibrated.forward_with_calibration(std::vector<float>{}), ContainsSubstring("x is empty"));
    CHECK_FALSE(uncalibrated.is_initialized());
}

// ------------------------------------------------------------------------------------- per channel
TEST_CASE("PerChannelFakeQuantize: one scale per slice along the axis", "[fake_quantize][per_channel]") {
    Eigen::Matrix<float, 3, 4, Eigen::RowMajor> w;
    w << 1.0f, -2.0f, 0.5f, 0.25f,  //
        0.1f, 0.2f, -0.3f, 0.05f,   //
        0.0f, 0.0f, 0.0f, 0.0f;
    lowbit::PerChannelFakeQuantize<8> rows;
    CHECK_FALSE(rows.is_initialized());
    rows.calibrate(w);
    REQUIRE(rows.channels() == 3);
    CHECK(rows.is_initialized());
    CHECK(rows.scales() == std::vector<float>{2.0f / 127.0f, 0.3f / 127.0f, 1e-10f});
    CHECK(rows.zero_points() == std::vector<int>{0, 0, 0});
    const auto y = rows.forward(w);
    for (int r = 0; r < 3; ++r) {
        FakeQuantize<8> one;
        one.calibrate(std::vector<float>(w.row(r).data(), w.row(r).data() + 4));
        const std::vector<float> expected = one.forward(std::vector<float>(w.row(r).data(), w.row(r).data() + 4));
        for (int c = 0; c < 4; ++c) CHECK(y(r, c) == expected[static_cast<std::size_t>(c)]);
    }
    // Column-major storage of the same matrix: the same result.
    const Eigen::MatrixXf w_col = w;
    lowbit::PerChannelFakeQuantize<8> rows_col;
    rows_col.calibrate(w_col);
    CHECK(rows_col.scales() == rows.scales());
    CHECK(Eigen::MatrixXf(rows_col.forward(w_col)) == Eigen::MatrixXf(y));
    // Span form: row-major [channels, n / channels].
    lowbit::PerChannelFakeQuantize<8> spans;
    spans.calibrate(std::span<const float>(w.data(), 12), 3);
    CHECK(spans.scales() == rows.scales());
    const std::vector<float> ys = spans.forward(std::span<const float>(w.data(), 12));
    for (int i = 0; i < 12; ++i) CHECK(ys[static_cast<std::size_t>(i)] == y.data()[i]);
    // Axis 1: one scale per column.
    lowbit::PerChannelFakeQuantize<8> cols(FakeQuantConfig{}, 1);
    cols.calibrate(w);
    CHECK(cols.scales() == std::vector<float>{1.0f / 127.0f, 2.0f / 127.0f, 0.5f / 127.0f, 0.25f / 127.0f});
    // backward_clamped per channel; set_qparams; errors.
    lowbit::PerChannelFakeQuantize<4, false> manual;
    manual.set_qparams(std::vector<float>{0.1f, 1.0f, 0.5f}, std::vector<int>{0, 15, 3});
    const Eigen::Matrix<float, 3, 4, Eigen::RowMajor> ones = Eigen::Matrix<float, 3, 4, Eigen::RowMajor>::Ones();
    const auto g = manual.backward_clamped(ones, w);
    CHECK(g(0, 0) == 1.0f);  // 1.0 in [0, 1.5]
    CHECK(g(0, 1) == 0.0f);  // -2 < 0
    CHECK(g(1, 2) == 1.0f);  // -0.3 in [-15, 0]
    CHECK(g(1, 0) == 0.0f);  // 0.1 > 0
    CHECK_THROWS_WITH(manual.forward(Eigen::MatrixXf::Ones(2, 4).eval()),
                      ContainsSubstring("the input has 2 channels along axis 0 but the quantizer has 3"));
    CHECK_THROWS_AS(manual.set_qparams(std::vector<float>{0.0f}, std::vector<int>{0}), std::invalid_argument);
    CHECK_THROWS_AS(spans.calibrate(std::span<const float>(w.data(), 12), 5), std::invalid_argument);
    Eigen::Tensor<float, 3> t(2, 3, 4);
    t.setConstant(1.0f);
    lowbit::PerChannelFakeQuantize<8> last_axis(FakeQuantConfig{}, 2);
    last_axis.calibrate(t);
    CHECK(last_axis.channels() == 4);
    CHECK_THROWS_WITH(lowbit::PerChannelFakeQuantize<8>(FakeQuantConfig{}, 3).calibrate(t),
                      ContainsSubstring("axis = 3 is outside a rank-3 input"));
}
