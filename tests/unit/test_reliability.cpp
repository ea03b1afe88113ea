// Regressions for faults a hostile-input pass found: each test is one fault's reproducer and failed
// before its fix (calibration across threads, observers, ternary and int8 inputs, range overflow,
// subnormal scales, the worker pool, error messages).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/compare.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"

namespace {
using lowbit::test::ThreadCountGuard;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using lowbit::RowMatrixXf;


#if defined(__linux__)
/// Threads of this process, from /proc/self/task.
std::size_t process_thread_count() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++count;
    return count;
}
#endif
}  // namespace

TEST_CASE("calibration over two uneven thread ranges keeps both extremes", "[reliability][threads]") {
    // 1.5 grains on 2 threads: both ranges used to write the slot begin / grain = 0.
    const ThreadCountGuard threads(2);
    std::vector<float> x(393216, 0.5f);
    x.front() = -100.0f;
    x.back() = 200.0f;
    lowbit::FakeQuantize<8, false> asymmetric;
    asymmetric.calibrate(x);
    CHECK(asymmetric.observed_min() == -100.0f);
    CHECK(asymmetric.observed_max() == 200.0f);

    lowbit::FakeQuantize<8> observed;
    observed.observe(x);
    CHECK(observed.observed_max() == 200.0f);
    lowbit::FakeQuantize<8> once;
    (void)once.forward_with_calibration(x);
    CHECK(once.observed_min() == -100.0f);
    CHECK(once.observed_max() == 200.0f);

    // Per channel: two channels of 1.5 grains each.
    lowbit::PerChannelFakeQuantize<8> per_channel;
    std::vector<float> two_channels(2 * 393216, 0.5f);
    two_channels[0] = -100.0f;
    two_channels[393215] = 200.0f;
    two_channels[393216] = 300.0f;
    two_channels.back() = -400.0f;
    per_channel.calibrate(two_channels, 2);
    CHECK(per_channel.channel(0).observed_min() == -100.0f);
    CHECK(per_channel.channel(0).observed_max() == 200.0f);
    CHECK(per_channel.channel(1).observed_min() == -400.0f);
    CHECK(per_channel.channel(1).observed_max() == 300.0f);
}

TEST_CASE("per-channel LSQ before calibration uses scale 1 per channel", "[reliability]") {
    const lowbit::PerChannelFakeQuantize<8> per_channel;
    const RowMatrixXf grad = RowMatrixXf::Ones(3, 4);
    RowMatrixXf input(3, 4);
    input << 0.25f, -3.0f, 200.0f, 1.0f, 2.5f, 0.0f, -0.6f, 7.0f, -128.0f, 3.3f, 0.1f, -9.0f;
    const auto result = per_channel.backward_lsq(grad, input);
    REQUIRE(result.grad_scales.size() == 3);
    const lowbit::FakeQuantize<8> unit_scale;
    for (Eigen::Index r = 0; r < 3; ++r) {
        const RowMatrixXf row = input.row(r);
        const auto expected = unit_scale.backward_lsq(RowMatrixXf(grad.row(r)), row);
        CHECK(result.grad_scales[static_cast<std::size_t>(r)] == expected.grad_scale);
        CHECK(result.grad_input.row(r) == expected.grad_input);
    }
    lowbit::PerChannelFakeQuantize<8> emptied;
    CHECK_THROWS_WITH(emptied.set_qparams(std::span<const float>{}, std::span<const int>{}),
                      StartsWith("lowbit::PerChannelFakeQuantize::set_qparams: no channels"));
}

TEST_CASE("hand-built ternary weights and int8 activations are checked before reading",
          "[reliability][bitnet][errors]") {
    lowbit::TernaryWeights weights;
    weights.codes = lowbit::RowMatrixXi8::Ones(2, 128);
    weights.scales = RowMatrixXf::Ones(1, 1);
    weights.group_size = 64;
    CHECK_THROWS_WITH(weights.dequantize(), StartsWith("lowbit::TernaryWeights::dequantize: codes 2x128, scales 1x1"));
    weights.group_size = 0;
    CHECK_THROWS_AS(weights.dequantize(), std::invalid_argument);
    weights.per_tensor = true;
    CHECK_THROWS_AS(weights.dequantize(), std::invalid_argument);  // per tensor needs group_size == cols
    weights.group_size = 128;
    CHECK(weights.dequantize() == RowMatrixXf::Ones(2, 128));

    lowbit::Int8Activations activations;
    activations.codes = lowbit::RowMatrixXi8::Ones(4, 8);
    activations.scales = Eigen::VectorXf::Ones(2);
    CHECK_THROWS_WITH(activations.dequantize(),
                      StartsWith("lowbit::Int8Activations::dequantize: codes 4x8 need 4 scales, got 2"));
}

TEST_CASE("N4.7: a moving-average observer keeps min <= max when rounding would cross them", "[fake_quantize]") {
    // A range one ulp wide and a one-value batch far away: m + c (v - m) rounds above M + c (v - M) for
    // this case (c = 0.5) and for many of the ones drawn below (fixed seed 4707; a failure prints its
    // range and batch).
    lowbit::FakeQuantConfig config;
    config.observer = lowbit::Observer::moving_average;
    config.averaging_constant = 0.5f;
    auto check = [&](float low, float v) {
        const float high = std::nextafter(low, std::numeric_limits<float>::infinity());
        lowbit::FakeQuantize<8, false> quantizer(config);
        quantizer.observe(std::vector<float>{low, high});
        quantizer.observe(std::vector<float>{v});
        INFO("range [" << low << ", " << high << "], batch " << v);
        CHECK(quantizer.observed_min() <= quantizer.observed_max());
        CHECK(quantizer.observed_min() >= std::min(low, v));
        CHECK(quantizer.observed_max() <= std::max(high, v));
        CHECK(std::isfinite(quantizer.scale()));
    };
    check(14579.1758f, -19813.4668f);
    std::mt19937 rng(4707);
    std::uniform_real_distribution<float> value(-20000.0f, 20000.0f);
    for (int i = 0; i < 2000; ++i) check(value(rng), value(rng));
}

TEST_CASE("a moving-average observer survives extremes of opposite sign", "[reliability]") {
    const float big = std::numeric_limits<float>::max();
    lowbit::FakeQuantConfig config;
    config.observer = lowbit::Observer::moving_average;
    lowbit::FakeQuantize<8> symmetric(config);
    symmetric.observe(std::vector<float>{big});
    symmetric.observe(std::vector<float>{-big});
    CHECK(std::isfinite(symmetric.observed_min()));
    CHECK(std::isfinite(symmetric.scale()));
    const std::vector<float> y = symmetric.forward(std::vector<float>{0.0f, 1e30f, -big});
    for (float value : y) CHECK(std::isfinite(value));

    lowbit::FakeQuantize<8, false> asymmetric(config);
    asymmetric.observe(std::vector<float>{big});
    asymmetric.observe(std::vector<float>{-big});
    CHECK(std::isfinite(asymmetric.scale()));
    CHECK(asymmetric.zero_point() >= asymmetric.qmin());
    CHECK(asymmetric.zero_point() <= asymmetric.qmax());
    // PyTorch's f32 update is kept where it does not overflow.
    lowbit::FakeQuantize<8> ordinary(config);
    ordinary.observe(std::vector<float>{-1.0f, 3.0f});
    ordinary.observe(std::vector<float>{-5.0f, 1.0f});
    CHECK(ordinary.observed_min() == -1.0f + 0.01f * (-5.0f - -1.0f));
}

TEST_CASE("ternary quantization refuses negative and overflowing sizes", "[reliability][bitnet][errors]") {
    const std::vector<float> w(16, 0.5f);
    CHECK_THROWS_WITH(lowbit::quantize_ternary(w, (std::int64_t{1} << 62) + 1, 4, 4),
                      StartsWith("lowbit::quantize_ternary: rows * cols = ") && ContainsSubstring("overflows"));
    const std::vector<float> eight(8, 0.5f);
    CHECK_THROWS_WITH(lowbit::quantize_ternary(eight, -1, -8, 1),
                      StartsWith("lowbit::quantize_ternary: rows = -1 and cols = -8 must be >= 0"));
    CHECK_THROWS_AS(lowbit::quantize_activations_int8(eight, -2, -4), std::invalid_argument);
}

TEST_CASE("an activation row too small to scale gets scale 1 and codes 0", "[reliability][bitnet]") {
    const std::vector<float> tiny{1e-44f, 0.0f};
    CHECK(lowbit::absmax_scale(tiny) == 1.0f);
    const lowbit::Int8Activations activations = lowbit::quantize_activations_int8(tiny, 1, 2);
    CHECK(activations.scales(0) == 1.0f);
    CHECK(activations.codes(0, 0) == 0);
    CHECK(activations.codes(0, 1) == 0);
    // Just above the underflow the ordinary rule holds: s = max|x| / 127 > 0.
    const std::vector<float> small{1e-40f, 0.0f};
    CHECK(lowbit::absmax_scale(small) == 1e-40f / 127.0f);
}

TEST_CASE("stochastic per-channel rounding draws fresh noise for every element", "[reliability]") {
    lowbit::FakeQuantConfig config;
    config.rounding = lowbit::Rounding::stochastic;
    config.seed = 7;
    const Eigen::Index rows = 64, cols = 64;
    const RowMatrixXf x = RowMatrixXf::Constant(rows, cols, 0.03f);
    const std::vector<int> zero_points_rows(static_cast<std::size_t>(rows), 0);
    const std::vector<float> scales_rows(static_cast<std::size_t>(rows), 0.1f);

    // Axis 1 of a row-major matrix: every run is one element long.
    lowbit::PerChannelFakeQuantize<8> along_columns(config, 1);
    along_columns.set_qparams(std::vector<float>(static_cast<std::size_t>(cols), 0.1f),
                              std::vector<int>(static_cast<std::size_t>(cols), 0));
    const RowMatrixXf y1 = along_columns.forward(x);
    CHECK(std::fabs(y1.mean() - 0.03f) < 0.004f);  // 4096 Bernoulli(0.3) draws: sd of the mean 0.0007

    // Axis 0: one run per row; rows must not share one noise pattern.
    lowbit::PerChannelFakeQuantize<8> along_rows(config, 0);
    along_rows.set_qparams(scales_rows, zero_points_rows);
    const RowMatrixXf y0 = along_rows.forward(x);
    CHECK(std::fabs(y0.mean() - 0.03f) < 0.004f);
    int rows_equal_to_first = 0;
    for (Eigen::Index r = 1; r < rows; ++r) rows_equal_to_first += y0.row(r) == y0.row(0) ? 1 : 0;
    CHECK(rows_equal_to_first == 0);
    // Element i of the tensor draws uniform(i) of UniformStream(seed), as FakeQuantize does.
    lowbit::FakeQuantize<8> single(config);
    single.set_qparams(0.1f, 0);
    const RowMatrixXf expected = single.forward(x);
    CHECK(y0 == expected);
}

TEST_CASE("a group whose range overflows is refused, naming row and group", "[reliability][errors]") {
    const float big = std::numeric_limits<float>::max();
    RowMatrixXf w = RowMatrixXf::Zero(2, 128);
    w(1, 70) = big;
    w(1, 100) = -big;
    CHECK_THROWS_WITH((lowbit::quantize<64, 4>(w)),
                      StartsWith("lowbit::quantize: row 1, group 1 (columns 64 to 127) spans a range"));
    const lowbit::GroupFakeQuantize<64, 4> fake_quantize;
    CHECK_THROWS_WITH(fake_quantize.forward(w), StartsWith("lowbit::GroupFakeQuantize::forward: row 1, group 1"));
    // One extreme alone is representable.
    w(1, 100) = 0.0f;
    const auto q = lowbit::quantize<64, 4>(w);
    CHECK(lowbit::dequantize(q).allFinite());
}

TEST_CASE("constant groups, as documented", "[reliability][N9]") {
    // |c| >= 5e-8: bias c, dequantizes to c. |c| < 5e-8: bias 0, dequantizes to 0 (as MLX).
    const auto constant = [](float c) { return lowbit::dequantize(lowbit::quantize<32, 4>(RowMatrixXf::Constant(1, 32, c))); };
    CHECK((constant(1e-7f).array() == 1e-7f).all());
    CHECK((constant(-0.75f).array() == -0.75f).all());
    CHECK((constant(3e-8f).array() == 0.0f).all());
}

TEST_CASE("subnormal scales, whose reciprocal can overflow, are refused", "[reliability][errors]") {
    lowbit::FakeQuantize<8> pytorch(lowbit::FakeQuantConfig::pytorch());
    CHECK_THROWS_WITH(pytorch.set_qparams(1e-39f, 0),
                      StartsWith("lowbit::FakeQuantize::set_qparams: scale = 1.00000022e-39 is subnormal"));
    lowbit::FakeQuantConfig config;
    config.min_scale = 1e-39f;
    CHECK_THROWS_WITH(lowbit::FakeQuantize<8>(config), StartsWith("lowbit::FakeQuantize: min_scale = "));
    CHECK_THROWS_AS(lowbit::ste_forward(std::vector<float>{0.0f}, 1e-39f, -1.0f, 1.0f), std::invalid_argument);
    // An STE range whose end overflows (found by the property pass): refused, not inf.
    CHECK_THROWS_WITH(lowbit::int8_ste(std::vector<float>{std::numeric_limits<float>::max()},
                                       std::numeric_limits<float>::max() / 100.0f),
                      StartsWith("lowbit::int8_ste: scale = ") && ContainsSubstring("beyond the largest float"));
    CHECK(std::isfinite(lowbit::int8_ste(std::vector<float>{std::numeric_limits<float>::max()},
                                         std::numeric_limits<float>::max() / 128.0f)[0]));
    // The smallest accepted scale still maps 0 to 0 and keeps 0 inside the gradient mask.
    pytorch.set_qparams(std::numeric_limits<float>::min(), 0);
    CHECK(pytorch.forward(std::vector<float>{0.0f})[0] == 0.0f);
    CHECK(pytorch.backward_clamped(std::vector<float>{1.0f}, std::vector<float>{0.0f})[0] == 1.0f);
    // Too large a scale: the end of the code range would be inf.
    CHECK_THROWS_WITH(pytorch.set_qparams(1e37f, 0), ContainsSubstring("beyond the largest float"));
}

TEST_CASE("a range reaching FLT_MAX saturates at the largest finite level", "[reliability]") {
    const float big = std::numeric_limits<float>::max();
    lowbit::FakeQuantize<8> symmetric;
    symmetric.calibrate(std::vector<float>{big, -big});
    const std::vector<float> y = symmetric.forward(std::vector<float>{big, -big, 0.0f});
    CHECK(std::isfinite(y[0]));
    CHECK(y[0] == 127.0f * symmetric.scale());
    CHECK(y[1] == -y[0]);
    CHECK(y[2] == 0.0f);
    CHECK(y[0] > 0.99999f * big);  // one ulp of scale below the overflowing one

    lowbit::FakeQuantize<8, false> asymmetric;
    asymmetric.calibrate(std::vector<float>{big, -big});
    for (float value : asymmetric.forward(std::vector<float>{big, -big, 0.0f})) CHECK(std::isfinite(value));
}

TEST_CASE("the worker pool is bounded whatever thread count is asked for", "[reliability][threads]") {
    const ThreadCountGuard threads(100000);
    CHECK(lowbit::num_threads() == lowbit::max_threads());
    CHECK(lowbit::max_threads() == 4 * lowbit::hardware_threads());
    // hardware_threads() is read once per process (the query costs system calls): the system's count.
    const unsigned reported = std::thread::hardware_concurrency();
    CHECK(lowbit::hardware_threads() == (reported == 0 ? 1 : static_cast<int>(reported)));
#if defined(__linux__)
    const std::size_t before = process_thread_count();
    const RowMatrixXf w = RowMatrixXf::Random(512, 256);
    const auto q = lowbit::quantize<64, 4>(w);
    const RowMatrixXf x = RowMatrixXf::Random(256, 256);
    const RowMatrixXf y = lowbit::quantized_matmul(x, q);
    const RowMatrixXf one = [&] {
        const ThreadCountGuard single(1);
        return lowbit::quantized_matmul(x, q);
    }();
    lowbit::set_num_threads(100000);
    CHECK(y == one);
    CHECK(process_thread_count() <= before + static_cast<std::size_t>(lowbit::max_threads()));
#endif
}

TEST_CASE("messages name the function the user called", "[reliability][errors]") {
    const lowbit::GroupFakeQuantize<64, 4> fake_quantize;
    CHECK_THROWS_WITH(fake_quantize.forward(RowMatrixXf::Zero(2, 60)),
                      StartsWith("lowbit::GroupFakeQuantize::forward: in = 60"));
    const lowbit::QuantizedLinear<64, 4> layer(128, 4);
    CHECK_THROWS_WITH(layer.forward(RowMatrixXf::Zero(1, 64)), StartsWith("lowbit::QuantizedLinear::forward: x is 1x64"));
    const std::vector<float> x{1.0f};
    CHECK_THROWS_WITH(lowbit::ternary_ste(x, 0.0f), StartsWith("lowbit::ternary_ste: scale = 0"));
    CHECK_THROWS_WITH(lowbit::int8_ste(x, -1.0f), StartsWith("lowbit::int8_ste: scale = -1"));
    std::vector<float> out(2);
    CHECK_THROWS_WITH(lowbit::int8_ste(x, out, 1.0f), StartsWith("lowbit::int8_ste: x has 1 elements"));

    lowbit::PerChannelFakeQuantize<8> per_channel;
    CHECK_THROWS_WITH(per_channel.set_qparams(std::vector<float>{1.0f, -2.0f}, std::vector<int>{0, 0}),
                      StartsWith("lowbit::PerChannelFakeQuantize::set_qparams: channel 1: ") &&
                          ContainsSubstring("scale = -2"));
    per_channel.set_qparams(std::vector<float>{1.0f, 2.0f}, std::vector<int>{0, 0});
    CHECK_THROWS_AS(per_channel.channel(2), std::out_of_range);

    static_assert(std::is_same_v<decltype(layer.input_dims()), Eigen::Index>);
    static_assert(std::is_same_v<decltype(layer.output_dims()), Eigen::Index>);
    CHECK(layer.input_dims() == 128);
    CHECK(layer.output_dims() == 4);
}

TEST_CASE("property pass: levels near FLT_MAX never dequantize to inf", "[reliability]") {
    const float big = std::numeric_limits<float>::max();
    // A 5-bit group from -big / 2 to big: max - min is finite, but the top level s * 31 + b is not.
    RowMatrixXf w = RowMatrixXf::Zero(1, 128);
    w(0, 0) = big;
    w(0, 1) = -0.5f * big;
    bool refused = false;
    try {
        const auto q = lowbit::quantize<128, 5>(w);
        CHECK(lowbit::dequantize(q).allFinite());
    } catch (const std::invalid_argument& error) {
        refused = true;
        CHECK_THAT(error.what(), StartsWith("lowbit::quantize: row 0, group 0"));
    }
    CHECK(refused);
    // int8 activations of a row holding FLT_MAX: 127 * s stays finite.
    const std::vector<float> row{big, -1.0f};
    const lowbit::Int8Activations activations = lowbit::quantize_activations_int8(row, 1, 2);
    CHECK(activations.codes(0, 0) == 127);
    CHECK(activations.dequantize().allFinite());
}
