// Property tests over the public API: random shapes, storage orders and strides, data sprinkled with
// NaN, +-Inf, +-FLT_MAX, denormals and signed zeros, random thread counts. Every call either returns
// what the scalar reference (the reference.hpp beside each kernel in detail/) or the documented rule
// gives, or throws an exception derived from std::invalid_argument; nothing else (a crash, a sanitizer
// report, another exception type, a non-finite result where the rule documents a finite one) is
// acceptable.
//
// Iterations per test case: LOWBIT_PROPERTY_ITERATIONS (default 25; CI runs a longer pass). Every
// generator is seeded from Catch2's --rng-seed (printed at the start of the run) and a per-test salt;
// a failure prints the seed, the salt and the iteration, and replays with the same seed.
#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <unsupported/Eigen/CXX11/Tensor>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/compare.hpp"
#include "support/property.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"
#include "support/tolerance.hpp"

namespace {
using lowbit::test::all_finite;
using lowbit::test::coin;
using lowbit::test::first_difference;
using lowbit::test::first_matrix_difference;
using lowbit::test::hostile_value;
using lowbit::test::inf;
using lowbit::test::iterations;
using lowbit::test::nan_value;
using lowbit::test::returns_or_rejects;
using lowbit::test::same_bits;
using lowbit::test::sprinkled;
using lowbit::test::sprinkled_matrix;
using lowbit::test::ThreadCountGuard;
using lowbit::test::uniform_int;

using Eigen::Index;
using lowbit::RowMatrixXf;
using lowbit::Rounding;
using ColMatrixXf = Eigen::MatrixXf;
using StridedMap = Eigen::Map<const RowMatrixXf, 0, Eigen::OuterStride<>>;

/// A scale to hand to set_qparams / ste_forward: mostly reasonable, sometimes hostile (zero, negative,
/// denormal, huge, non-finite).
float random_scale(std::mt19937_64& rng) {
    if (coin(rng, 0.7)) return std::pow(10.0f, std::uniform_real_distribution<float>(-4.0f, 2.0f)(rng));
    static const float values[] = {0.0f,    -0.0f,         -1.0f,   FLT_TRUE_MIN, 1e-39f, FLT_MIN, 0x1.0p-127f,
                                   FLT_MAX, FLT_MAX / 3.0f, 1e38f,  inf,          -inf,   nan_value, 1e-20f};
    return values[uniform_int(rng, 0, static_cast<int>(sizeof values / sizeof values[0]) - 1)];
}

/// The same row-major data in the layouts the tensor-like overloads take: calls check(view, name) for
/// a plain row-major matrix, a column-major copy, a Map with an outer stride, and a block of a larger
/// matrix in both storage orders.
template <class Check>
void for_each_layout(const RowMatrixXf& m, Check&& check) {
    check(m, "row-major");
    const ColMatrixXf col = m;
    check(col, "column-major");
    const Index pad = 3;
    std::vector<float> padded(static_cast<std::size_t>(m.rows() * (m.cols() + pad)) + 1, 7.0f);
    const StridedMap map(padded.data(), m.rows(), m.cols(), Eigen::OuterStride<>(m.cols() + pad));
    Eigen::Map<RowMatrixXf, 0, Eigen::OuterStride<>>(padded.data(), m.rows(), m.cols(),
                                                      Eigen::OuterStride<>(m.cols() + pad)) = m;
    check(map, "Map with OuterStride");
    RowMatrixXf big = RowMatrixXf::Constant(m.rows() + 2, m.cols() + 3, 9.0f);
    big.block(1, 2, m.rows(), m.cols()) = m;
    check(big.block(1, 2, m.rows(), m.cols()), "row-major block");
    ColMatrixXf big_col = ColMatrixXf::Constant(m.rows() + 3, m.cols() + 1, 9.0f);
    big_col.block(2, 1, m.rows(), m.cols()) = m;
    check(big_col.block(2, 1, m.rows(), m.cols()), "column-major block");
}

// ------------------------------------------------------------------------------------ FakeQuantize

/// One FakeQuantize configuration under test.
template <int Bits, bool Symmetric>
void check_fake_quantize(std::mt19937_64& rng, const lowbit::FakeQuantConfig& config, const char* name) {
    using Quantizer = lowbit::FakeQuantize<Bits, Symmetric>;
    INFO("FakeQuantize<" << Bits << ", " << Symmetric << "> " << name);
    Quantizer quantizer;
    if (!returns_or_rejects([&] { quantizer = Quantizer(config); })) return;
    const Index rows = uniform_int(rng, 1, 6), cols = uniform_int(rng, 1, 40);
    const RowMatrixXf x = sprinkled_matrix(rng, rows, cols, false);
    const std::span<const float> xs(x.data(), static_cast<std::size_t>(x.size()));
    INFO("x " << rows << "x" << cols);

    // Calibration: the observer's range is the reference's finite range; the qparams are A4's.
    const lowbit::detail::FiniteRange range = lowbit::detail::reference::finite_min_max(x.data(), xs.size());
    if (coin(rng)) {
        if (!returns_or_rejects([&] { quantizer.calibrate(x); })) return;
        CHECK(quantizer.is_initialized() == range.found);
        if (range.found) {
            CHECK(same_bits(quantizer.observed_min(), range.min));
            CHECK(same_bits(quantizer.observed_max(), range.max));
            CHECK(std::isfinite(quantizer.scale()));
            CHECK(quantizer.scale() > 0.0f);
            CHECK(quantizer.zero_point() >= quantizer.qmin());
            CHECK(quantizer.zero_point() <= quantizer.qmax());
            if constexpr (Symmetric) {
                const float magnitude = std::fmax(std::fabs(range.min), std::fabs(range.max));
                float expected = std::max(magnitude / static_cast<float>(quantizer.qmax()), config.min_scale);
                // A4 plus the saturation rule: when qmin * s or qmax * s would overflow (a range reaching
                // FLT_MAX), s is the largest float below that keeps both finite.
                const auto overflows = [&](float s) {
                    volatile float low = static_cast<float>(quantizer.qmin()) * s;
                    volatile float high = static_cast<float>(quantizer.qmax()) * s;
                    return !std::isfinite(low) || !std::isfinite(high);
                };
                while (overflows(expected)) expected = std::nextafter(expected, 0.0f);
                CHECK(quantizer.scale() == expected);
            }
        }
    } else {
        const float scale = random_scale(rng);
        const int zero_point = Symmetric ? 0 : uniform_int(rng, -2, (1 << Bits) + 1);
        INFO("set_qparams(" << scale << ", " << zero_point << ")");
        if (!returns_or_rejects([&] { quantizer.set_qparams(scale, zero_point); })) {
            // Refused only when invalid, when 1 / s overflows or s is denormal, or when a code-range end
            // (qmin - z) s or (qmax - z) s overflows.
            volatile float low_end = static_cast<float>(quantizer.qmin() - zero_point) * scale;
            volatile float high_end = static_cast<float>(quantizer.qmax() - zero_point) * scale;
            CHECK(!(std::isfinite(scale) && scale > 0.0f && zero_point >= quantizer.qmin() &&
                    zero_point <= quantizer.qmax() && std::isfinite(1.0f / scale) && scale >= FLT_MIN &&
                    std::isfinite(low_end) && std::isfinite(high_end)));
            return;
        }
        CHECK(quantizer.scale() == scale);
    }
    INFO("scale " << quantizer.scale() << ", zero point " << quantizer.zero_point());

    // Forward: the reference pass of params(), and finite for finite input (saturating at the range ends).
    std::vector<float> expected(xs.size());
    if (config.rounding == Rounding::stochastic)
        lowbit::detail::reference::fake_quantize_forward_stochastic(quantizer.params(),
                                                                    lowbit::UniformStream(config.seed), 0, x.data(),
                                                                    expected.data(), xs.size());
    else
        lowbit::detail::reference::fake_quantize_forward(quantizer.params(), x.data(), expected.data(), xs.size());
    const std::vector<float> y = quantizer.forward(xs);
    CHECK(first_difference(y, expected) == -1);
    const double limit = std::max(std::fabs(static_cast<double>(quantizer.qmin() - quantizer.zero_point())),
                                  std::fabs(static_cast<double>(quantizer.qmax() - quantizer.zero_point()))) *
                         static_cast<double>(quantizer.scale());
    for (std::size_t i = 0; i < xs.size(); ++i) {
        if (std::isnan(xs[i])) {
            CHECK(std::isnan(y[i]));
            continue;
        }
        INFO("x[" << i << "] = " << xs[i] << " -> " << y[i]);
        CHECK(std::isfinite(y[i]));
        CHECK(std::fabs(static_cast<double>(y[i])) <= limit * (1.0 + 1e-6));
    }
    for_each_layout(x, [&](const auto& view, const char* layout) {
        INFO("layout " << layout);
        // Stochastic rounding draws u by storage index, so only a row-major result matches y element for element.
        if (config.rounding == Rounding::stochastic && !std::remove_cvref_t<decltype(view)>::IsRowMajor && rows > 1 && cols > 1)
            return;
        const auto y_view = quantizer.forward(view);
        CHECK(first_matrix_difference(y_view, Eigen::Map<const RowMatrixXf>(y.data(), rows, cols)) == -1);
    });

    // backward_clamped: the reference mask; backward: the identity.
    const RowMatrixXf grad = sprinkled_matrix(rng, rows, cols, true);
    std::vector<float> mask_expected(xs.size());
    lowbit::detail::reference::backward_clamped(quantizer.mask(), grad.data(), x.data(), mask_expected.data(),
                                                xs.size());
    const std::vector<float> dx =
        quantizer.backward_clamped(std::span<const float>(grad.data(), xs.size()), xs);
    CHECK(first_difference(dx, mask_expected) == -1);
    for_each_layout(x, [&](const auto& view, const char* layout) {
        INFO("layout " << layout);
        CHECK(first_matrix_difference(quantizer.backward_clamped(grad, view),
                                      Eigen::Map<const RowMatrixXf>(mask_expected.data(), rows, cols)) == -1);
    });
    CHECK(first_matrix_difference(quantizer.backward(grad), grad) == -1);
    const auto lsq = quantizer.backward_lsq(std::span<const float>(grad.data(), xs.size()), xs);
    CHECK(lsq.grad_input.size() == xs.size());

    // Mismatched shapes are refused.
    CHECK_THROWS_AS(quantizer.backward_clamped(grad, RowMatrixXf(rows + 1, cols)), std::invalid_argument);
    std::vector<float> short_out(xs.size() + 1);
    CHECK_THROWS_AS(quantizer.forward(xs, short_out), std::invalid_argument);
}

/// A sequence of observe() calls on finite batches keeps a finite range inside the batches' hull and
/// finite qparams (the moving average included).
template <int Bits, bool Symmetric>
void check_observer_sequence(std::mt19937_64& rng, const lowbit::FakeQuantConfig& config) {
    lowbit::FakeQuantize<Bits, Symmetric> quantizer(config);
    float hull_min = inf, hull_max = -inf;
    const int batches = uniform_int(rng, 1, 6);
    for (int b = 0; b < batches; ++b) {
        const std::vector<float> batch = sprinkled(rng, static_cast<std::size_t>(uniform_int(rng, 1, 20)), true);
        const auto range = lowbit::detail::reference::finite_min_max(batch.data(), batch.size());
        hull_min = std::min(hull_min, range.min);
        hull_max = std::max(hull_max, range.max);
        INFO("batch " << b << " range [" << range.min << ", " << range.max << "]");
        if (!returns_or_rejects([&] { quantizer.observe(batch); })) return;
        CHECK(std::isfinite(quantizer.observed_min()));
        CHECK(std::isfinite(quantizer.observed_max()));
        CHECK(quantizer.observed_min() >= hull_min);
        CHECK(quantizer.observed_max() <= hull_max);
        CHECK(quantizer.observed_min() <= quantizer.observed_max());
        CHECK(std::isfinite(quantizer.scale()));
        CHECK(quantizer.scale() > 0.0f);
        const std::vector<float> y = quantizer.forward(batch);
        CHECK(all_finite(y));
    }
}

}  // namespace

TEST_CASE("property: FakeQuantize forward calibration and masks match the reference", "[property][fake_quantize]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(7001);
    lowbit::FakeQuantConfig half_even;
    half_even.rounding = Rounding::half_to_even;
    half_even.narrow_range = false;
    lowbit::FakeQuantConfig reciprocal;
    reciprocal.multiply_by_reciprocal = true;
    reciprocal.gradient_mask = lowbit::GradientMask::rounded_code;
    lowbit::FakeQuantConfig stochastic;
    stochastic.rounding = Rounding::stochastic;
    stochastic.seed = 5;
    lowbit::FakeQuantConfig tiny_floor = lowbit::FakeQuantConfig::pytorch();
    tiny_floor.min_scale = FLT_TRUE_MIN;  // a floor whose reciprocal overflows
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        INFO("iteration " << iteration);
        lowbit::set_num_threads(uniform_int(rng, 1, 4));
        check_fake_quantize<8, true>(rng, {}, "default");
        check_fake_quantize<8, true>(rng, lowbit::FakeQuantConfig::pytorch(), "pytorch");
        check_fake_quantize<8, false>(rng, lowbit::FakeQuantConfig::pytorch(), "pytorch");
        check_fake_quantize<4, false>(rng, {}, "default");
        check_fake_quantize<3, true>(rng, half_even, "half_to_even, full range");
        check_fake_quantize<2, true>(rng, reciprocal, "reciprocal, rounded-code mask");
        check_fake_quantize<16, false>(rng, reciprocal, "reciprocal, rounded-code mask");
        check_fake_quantize<5, false>(rng, stochastic, "stochastic");
        check_fake_quantize<8, true>(rng, tiny_floor, "pytorch with min_scale = denorm_min");
        check_fake_quantize<8, false>(rng, tiny_floor, "pytorch with min_scale = denorm_min");
    }
}

TEST_CASE("property: observers stay finite and inside the data on finite batches", "[property][fake_quantize]") {
    auto rng = lowbit::test::make_rng(7002);
    lowbit::FakeQuantConfig moving;
    moving.observer = lowbit::Observer::moving_average;
    moving.averaging_constant = 0.5f;
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        INFO("iteration " << iteration);
        check_observer_sequence<8, true>(rng, {});
        check_observer_sequence<8, false>(rng, {});
        check_observer_sequence<8, true>(rng, lowbit::FakeQuantConfig::pytorch());
        check_observer_sequence<8, false>(rng, lowbit::FakeQuantConfig::pytorch());
        check_observer_sequence<4, false>(rng, moving);
    }
}

TEST_CASE("property: the moving-average observer does not overflow between the float extremes",
          "[property][fake_quantize]") {
    lowbit::FakeQuantConfig moving;
    moving.observer = lowbit::Observer::moving_average;
    moving.averaging_constant = 0.5f;
    for (float c : {0.01f, 0.5f, 1.0f}) {
        moving.averaging_constant = c;
        INFO("averaging_constant " << c);
        lowbit::FakeQuantize<8, false> quantizer(moving);
        quantizer.observe(std::vector<float>{FLT_MAX});
        quantizer.observe(std::vector<float>{-FLT_MAX});
        CHECK(std::isfinite(quantizer.observed_min()));
        CHECK(std::isfinite(quantizer.observed_max()));
        CHECK(std::isfinite(quantizer.scale()));
        quantizer.observe(std::vector<float>{-FLT_MAX, FLT_MAX});
        quantizer.observe(std::vector<float>{FLT_MAX});
        CHECK(std::isfinite(quantizer.observed_min()));
        CHECK(std::isfinite(quantizer.observed_max()));
        CHECK(all_finite(quantizer.forward(std::vector<float>{-FLT_MAX, 0.0f, FLT_MAX})));
    }
}

TEST_CASE("property: symmetric forward saturates at FLT_MAX instead of overflowing", "[property][fake_quantize]") {
    for (const float magnitude : {FLT_MAX, FLT_MAX / 2.0f, 0x1.fffffcp127f}) {
        INFO("data +-" << magnitude);
        const std::vector<float> x{magnitude, -magnitude, 0.0f, magnitude / 3.0f};
        lowbit::FakeQuantize<8> narrow;
        narrow.calibrate(x);
        CHECK(all_finite(narrow.forward(x)));
        lowbit::FakeQuantize<8> pytorch(lowbit::FakeQuantConfig::pytorch());
        pytorch.calibrate(x);
        CHECK(all_finite(pytorch.forward(x)));
        lowbit::FakeQuantize<4, false> asymmetric;
        asymmetric.calibrate(x);
        CHECK(all_finite(asymmetric.forward(x)));
    }
}

TEST_CASE("property: a scale whose reciprocal overflows is refused or harmless", "[property][fake_quantize]") {
    for (const float scale : {FLT_TRUE_MIN, 1e-39f, 0x1.0p-127f, 0x1.0p-128f + 0x1.0p-140f}) {
        INFO("scale " << scale);
        for (const bool reciprocal : {false, true}) {
            lowbit::FakeQuantConfig config;
            config.multiply_by_reciprocal = reciprocal;
            lowbit::FakeQuantize<8> quantizer(config);
            if (!returns_or_rejects([&] { quantizer.set_qparams(scale, 0); })) continue;
            const std::vector<float> y = quantizer.forward(std::vector<float>{0.0f, -0.0f, 1.0f, -1e-45f, 1e-40f});
            CHECK(all_finite(y));
        }
    }
}

// ------------------------------------------------------------------------------ PerChannelFakeQuantize

namespace {

template <int Bits, bool Symmetric>
void check_per_channel(std::mt19937_64& rng, const lowbit::FakeQuantConfig& config) {
    const int axis = uniform_int(rng, 0, 1);
    lowbit::PerChannelFakeQuantize<Bits, Symmetric> quantizer(config, axis);
    const Index rows = uniform_int(rng, 1, 7), cols = uniform_int(rng, 1, 30);
    const RowMatrixXf x = sprinkled_matrix(rng, rows, cols, false);
    INFO("PerChannelFakeQuantize<" << Bits << ", " << Symmetric << ">, axis " << axis << ", x " << rows << "x"
                                   << cols);
    const Index channels = axis == 0 ? rows : cols;
    quantizer.calibrate(x);
    REQUIRE(quantizer.channels() == static_cast<std::size_t>(channels));
    // Each channel is calibrated on its own slice, as a FakeQuantize with the same config.
    for (Index c = 0; c < channels; ++c) {
        const std::vector<float> slice = [&] {
            std::vector<float> values;
            for (Index i = 0; i < (axis == 0 ? cols : rows); ++i) values.push_back(axis == 0 ? x(c, i) : x(i, c));
            return values;
        }();
        lowbit::FakeQuantize<Bits, Symmetric> single(config);
        single.calibrate(slice);
        INFO("channel " << c);
        CHECK(quantizer.channel(static_cast<std::size_t>(c)).is_initialized() == single.is_initialized());
        CHECK(quantizer.channel(static_cast<std::size_t>(c)).scale() == single.scale());
        CHECK(quantizer.channel(static_cast<std::size_t>(c)).zero_point() == single.zero_point());
    }
    if (!quantizer.is_initialized()) {
        CHECK_THROWS_AS((lowbit::PerChannelFakeQuantize<Bits, Symmetric>(config, axis).forward_with_calibration(x)),
                        std::invalid_argument);
        return;
    }
    // Forward: the reference pass of each channel's params on its elements, in every layout.
    RowMatrixXf expected(rows, cols);
    for (Index r = 0; r < rows; ++r)
        for (Index c = 0; c < cols; ++c) {
            const auto& channel = quantizer.channel(static_cast<std::size_t>(axis == 0 ? r : c));
            lowbit::detail::reference::fake_quantize_forward(channel.params(), &x(r, c), &expected(r, c), 1);
        }
    for_each_layout(x, [&](const auto& view, const char* layout) {
        INFO("layout " << layout);
        CHECK(first_matrix_difference(quantizer.forward(view), expected) == -1);
    });
    const RowMatrixXf grad = sprinkled_matrix(rng, rows, cols, true);
    RowMatrixXf mask_expected(rows, cols);
    for (Index r = 0; r < rows; ++r)
        for (Index c = 0; c < cols; ++c) {
            const auto& channel = quantizer.channel(static_cast<std::size_t>(axis == 0 ? r : c));
            lowbit::detail::reference::backward_clamped(channel.mask(), &grad(r, c), &x(r, c), &mask_expected(r, c), 1);
        }
    for_each_layout(x, [&](const auto& view, const char* layout) {
        INFO("layout " << layout);
        CHECK(first_matrix_difference(quantizer.backward_clamped(grad, view), mask_expected) == -1);
    });
    const auto lsq = quantizer.backward_lsq(grad, x);
    CHECK(lsq.grad_scales.size() == static_cast<std::size_t>(channels));
    // A different channel count is refused.
    CHECK_THROWS_AS(quantizer.forward(RowMatrixXf::Zero(axis == 0 ? rows + 1 : rows, axis == 1 ? cols + 1 : cols)),
                    std::invalid_argument);
    CHECK_THROWS_AS(quantizer.observe(RowMatrixXf::Zero(axis == 0 ? rows + 1 : rows, axis == 1 ? cols + 1 : cols)),
                    std::invalid_argument);
}

}  // namespace

TEST_CASE("property: PerChannelFakeQuantize is a FakeQuantize per channel", "[property][per_channel]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(7003);
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        INFO("iteration " << iteration);
        lowbit::set_num_threads(uniform_int(rng, 1, 4));
        check_per_channel<8, true>(rng, {});
        check_per_channel<4, false>(rng, {});
        check_per_channel<8, true>(rng, lowbit::FakeQuantConfig::pytorch());
        check_per_channel<6, false>(rng, lowbit::FakeQuantConfig::pytorch());
    }
}

TEST_CASE("property: PerChannelFakeQuantize before calibration acts as scale 1 or refuses", "[property][per_channel]") {
    auto rng = lowbit::test::make_rng(7004);
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        INFO("iteration " << iteration);
        const Index rows = uniform_int(rng, 1, 5), cols = uniform_int(rng, 1, 9);
        const RowMatrixXf x = sprinkled_matrix(rng, rows, cols, false);
        const RowMatrixXf grad = sprinkled_matrix(rng, rows, cols, true);
        const lowbit::PerChannelFakeQuantize<8, true> quantizer;
        const lowbit::FakeQuantize<8, true> unit;  // scale 1, zero point 0
        RowMatrixXf y;
        if (returns_or_rejects([&] { y = quantizer.forward(x); }))
            CHECK(first_matrix_difference(y, unit.forward(x)) == -1);
        if (returns_or_rejects([&] { y = quantizer.backward_clamped(grad, x); }))
            CHECK(first_matrix_difference(y, unit.backward_clamped(grad, x)) == -1);
        lowbit::PerChannelLsqGradients<RowMatrixXf> lsq;
        if (returns_or_rejects([&] { lsq = quantizer.backward_lsq(grad, x); })) {
            const auto expected = unit.backward_lsq(grad, x);
            CHECK(first_matrix_difference(lsq.grad_input, expected.grad_input) == -1);
        }
    }
}

TEST_CASE("property: stochastic per-channel rounding draws one stream over the whole tensor",
          "[property][per_channel]") {
    // With every channel at the same scale, per-channel fake quantization is per-tensor fake
    // quantization: element i of the input draws u number i of UniformStream(seed), as
    // FakeQuantize::forward does, rather than each channel restarting the stream.
    auto rng = lowbit::test::make_rng(7005);
    lowbit::FakeQuantConfig config;
    config.rounding = Rounding::stochastic;
    config.seed = 11;
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        const Index rows = uniform_int(rng, 2, 6), cols = uniform_int(rng, 1, 40);
        INFO("iteration " << iteration << ", x " << rows << "x" << cols);
        const RowMatrixXf x = RowMatrixXf::Random(rows, cols) * 3.0f;
        lowbit::PerChannelFakeQuantize<4> per_channel(config);
        const std::vector<float> scales(static_cast<std::size_t>(rows), 0.37f);
        const std::vector<int> zero_points(static_cast<std::size_t>(rows), 0);
        per_channel.set_qparams(scales, zero_points);
        lowbit::FakeQuantize<4> per_tensor(config);
        per_tensor.set_qparams(0.37f, 0);
        CHECK(first_matrix_difference(per_channel.forward(x), per_tensor.forward(x)) == -1);
        const std::vector<float> flat(x.data(), x.data() + x.size());
        CHECK(first_difference(per_channel.forward(flat), per_tensor.forward(flat)) == -1);
    }
}

// ------------------------------------------------------------------------------------- STE functions

TEST_CASE("property: ste_forward ternary_ste and int8_ste match the reference pass", "[property][ste]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(7006);
    const Rounding rules[] = {Rounding::half_away_from_zero, Rounding::half_to_even, Rounding::stochastic};
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        lowbit::set_num_threads(uniform_int(rng, 1, 4));
        const Index rows = uniform_int(rng, 1, 5), cols = uniform_int(rng, 1, 33);
        const RowMatrixXf x = sprinkled_matrix(rng, rows, cols, false);
        const std::span<const float> xs(x.data(), static_cast<std::size_t>(x.size()));
        const float scale = random_scale(rng);
        float low = std::uniform_real_distribution<float>(-130.0f, 3.0f)(rng);
        float high = std::uniform_real_distribution<float>(-3.0f, 130.0f)(rng);
        if (coin(rng, 0.1)) low = nan_value;
        if (coin(rng, 0.5)) {
            low = std::round(low);
            high = std::round(high);
        }
        const Rounding rounding = rules[uniform_int(rng, 0, 2)];
        INFO("iteration " << iteration << ", scale " << scale << ", [" << low << ", " << high << "], rounding "
                          << static_cast<int>(rounding));
        std::vector<float> y;
        if (!returns_or_rejects([&] { y = lowbit::ste_forward(xs, scale, low, high, rounding); })) {
            // Refused only when invalid, when 1 / s overflows or s is denormal, or when a range end overflows.
            volatile float low_end = std::floor(low) * scale;
            volatile float high_end = std::ceil(high) * scale;
            CHECK(!(std::isfinite(scale) && scale > 0.0f && low <= high && std::isfinite(1.0f / scale) && scale >= FLT_MIN &&
                    std::isfinite(low_end) && std::isfinite(high_end)));
            continue;
        }
        lowbit::FakeQuantParams params;
        params.scale = scale;
        params.code_min = low;
        params.code_max = high;
        params.rounding = rounding;
        params.finish();
        std::vector<float> expected(xs.size());
        if (rounding == Rounding::stochastic)
            lowbit::detail::reference::fake_quantize_forward_stochastic(params, lowbit::UniformStream(0), 0, x.data(),
                                                                        expected.data(), xs.size());
        else
            lowbit::detail::reference::fake_quantize_forward(params, x.data(), expected.data(), xs.size());
        CHECK(first_difference(y, expected) == -1);
        for_each_layout(x, [&](const auto& view, const char* layout) {
            INFO("layout " << layout);
            if (rounding == Rounding::stochastic && !std::remove_cvref_t<decltype(view)>::IsRowMajor && rows > 1 && cols > 1)
                return;  // u is drawn by storage index
            CHECK(first_matrix_difference(lowbit::ste_forward(view, scale, low, high, rounding),
                                          Eigen::Map<const RowMatrixXf>(expected.data(), rows, cols)) == -1);
        });
        if (rounding != Rounding::stochastic) {
            std::vector<float> ternary_expected(xs.size()), int8_expected(xs.size());
            lowbit::FakeQuantParams ternary = params, int8 = params;
            ternary.code_min = -1.0f;
            ternary.code_max = 1.0f;
            int8.code_min = -127.0f;
            int8.code_max = 127.0f;
            lowbit::detail::reference::fake_quantize_forward(ternary.finish(), x.data(), ternary_expected.data(),
                                                             xs.size());
            lowbit::detail::reference::fake_quantize_forward(int8.finish(), x.data(), int8_expected.data(), xs.size());
            // The scale passed ste_forward above; the named functions may still refuse it when their own
            // range end, bound * s, overflows (int8_ste from s > FLT_MAX / 127), and only then.
            auto check_named = [&](auto named_ste, float bound, const std::vector<float>& named_expected) {
                std::vector<float> named;
                if (!returns_or_rejects([&] { named = named_ste(xs, scale, rounding); })) {
                    volatile float end = bound * scale;
                    CHECK(!std::isfinite(end));
                    return;
                }
                CHECK(first_difference(named, named_expected) == -1);
            };
            check_named([](auto&&... args) { return lowbit::ternary_ste(args...); }, 1.0f, ternary_expected);
            check_named([](auto&&... args) { return lowbit::int8_ste(args...); }, 127.0f, int8_expected);
        }
        const RowMatrixXf grad = sprinkled_matrix(rng, rows, cols, false);
        CHECK(first_matrix_difference(lowbit::ste_backward(grad), grad) == -1);
        std::vector<float> wrong(xs.size() + 1);
        CHECK_THROWS_AS(lowbit::ste_forward(xs, wrong, 1.0f, -1.0f, 1.0f), std::invalid_argument);
    }
}

// ------------------------------------------------------------------------------------------ BitNet

namespace {

/// gamma of A8: the float nearest mean |x| (summed in double), 1 when 0.
float absmean_rule(std::span<const float> values) {
    double sum = 0.0;
    for (float v : values) sum += std::fabs(static_cast<double>(v));
    const float mean = static_cast<float>(sum / static_cast<double>(values.size()));
    return mean > 0.0f ? mean : 1.0f;
}

}  // namespace

TEST_CASE("property: BitNet quantizers follow A8 and reject what they document", "[property][bitnet]") {
    auto rng = lowbit::test::make_rng(7007);
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        const int group = std::array<int, 5>{1, 2, 4, 8, 64}[static_cast<std::size_t>(uniform_int(rng, 0, 4))];
        const Index rows = uniform_int(rng, 1, 4), cols = group * uniform_int(rng, 1, 3);
        const RowMatrixXf w = sprinkled_matrix(rng, rows, cols, coin(rng, 0.7));
        const std::span<const float> ws(w.data(), static_cast<std::size_t>(w.size()));
        const bool finite = all_finite(ws);
        const Rounding rounding = coin(rng) ? Rounding::half_away_from_zero : Rounding::half_to_even;
        INFO("iteration " << iteration << ", w " << rows << "x" << cols << ", group " << group);

        lowbit::TernaryWeights t;
        if (!returns_or_rejects([&] { t = lowbit::quantize_ternary(w, group, rounding); })) {
            CHECK(!finite);
        } else {
            CHECK(finite);
            REQUIRE(t.scales.rows() == rows);
            REQUIRE(t.scales.cols() == cols / group);
            for (Index r = 0; r < rows; ++r)
                for (Index g = 0; g < cols / group; ++g) {
                    const float gamma = absmean_rule(ws.subspan(static_cast<std::size_t>(r * cols + g * group),
                                                                static_cast<std::size_t>(group)));
                    CHECK(t.scales(r, g) == gamma);
                    for (Index j = 0; j < group; ++j) {
                        const float code = std::clamp(
                            lowbit::detail::round_deterministic(rounding, w(r, g * group + j) / gamma), -1.0f, 1.0f);
                        CHECK(t.codes(r, g * group + j) == static_cast<int>(code));
                    }
                }
            const RowMatrixXf dq = t.dequantize();
            CHECK(all_finite(std::span<const float>(dq.data(), static_cast<std::size_t>(dq.size()))));
            // Every layout gives the same codes.
            for_each_layout(w, [&](const auto& view, const char* layout) {
                INFO("layout " << layout);
                const lowbit::TernaryWeights other = lowbit::quantize_ternary(view, group, rounding);
                CHECK(other.codes == t.codes);
                CHECK(first_matrix_difference(other.scales, t.scales) == -1);
            });
        }

        lowbit::Int8Activations a;
        if (!returns_or_rejects([&] { a = lowbit::quantize_activations_int8(w, rounding); })) {
            CHECK(!finite);
        } else {
            CHECK(finite);
            for (Index r = 0; r < rows; ++r) {
                const float scale = a.scales(r);
                INFO("row " << r << " scale " << scale);
                CHECK(std::isfinite(scale));
                CHECK(scale > 0.0f);
                float largest = 0.0f;
                for (Index c = 0; c < cols; ++c) largest = std::fmax(largest, std::fabs(w(r, c)));
                float expected = largest / 127.0f > 0.0f ? largest / 127.0f : 1.0f;
                // Saturation: when 127 s overflows (max |x| near FLT_MAX), s is the largest float below that does not.
                const auto overflows = [](float s) {
                    volatile float top = 127.0f * s;
                    return !std::isfinite(top);
                };
                while (overflows(expected)) expected = std::nextafter(expected, 0.0f);
                CHECK(scale == expected);
                for (Index c = 0; c < cols; ++c) {
                    const float code =
                        std::clamp(lowbit::detail::round_deterministic(rounding, w(r, c) / scale), -127.0f, 127.0f);
                    CHECK(a.codes(r, c) == static_cast<int>(code));
                }
            }
            const RowMatrixXf dq = a.dequantize();
            CHECK(all_finite(std::span<const float>(dq.data(), static_cast<std::size_t>(dq.size()))));
        }
        float s = 0.0f;
        if (returns_or_rejects([&] { s = lowbit::absmax_scale(ws); })) {
            CHECK(std::isfinite(s));
            CHECK(s > 0.0f);
        }
        if (returns_or_rejects([&] { s = lowbit::absmean_scale(ws); })) CHECK(s == absmean_rule(ws));
    }
}

TEST_CASE("property: absmax_scale of denormal data is positive (no 0/0)", "[property][bitnet]") {
    for (const float tiny : {FLT_TRUE_MIN, 2.0f * FLT_TRUE_MIN, 100.0f * FLT_TRUE_MIN, -FLT_TRUE_MIN}) {
        INFO("x = " << tiny);
        const std::vector<float> x{tiny, 0.0f, -0.0f};
        const float s = lowbit::absmax_scale(x);
        CHECK(std::isfinite(s));
        CHECK(s > 0.0f);
        const lowbit::Int8Activations a = lowbit::quantize_activations_int8(x, 1, 3);
        const RowMatrixXf dq = a.dequantize();
        CHECK(all_finite(std::span<const float>(dq.data(), static_cast<std::size_t>(dq.size()))));
        std::vector<float> out(3);
        lowbit::fake_quantize_activations_int8(x, out, 1, 3);
        CHECK(all_finite(out));
    }
}

TEST_CASE("property: BitNet span forms refuse hostile sizes", "[property][bitnet]") {
    const std::vector<float> four{0.5f, -0.25f, 1.0f, 0.0f};
    struct Sizes {
        Index rows, cols;
    };
    const Index big = std::numeric_limits<Index>::max();
    // (2^62 + 1) * 4 wraps to 4 in 64 bits, (-1) * (-4) is 4: each matches the span's size only by overflow
    // or sign.
    for (const Sizes sizes : {Sizes{-1, -4}, Sizes{-4, -1}, Sizes{(Index{1} << 62) + 1, 4}, Sizes{4, (Index{1} << 62) + 1},
                              Sizes{big, big}, Sizes{big, 2}, Sizes{-big - 1, -1}, Sizes{0, 4}, Sizes{2, -2}}) {
        INFO("rows " << sizes.rows << ", cols " << sizes.cols);
        CHECK_THROWS_AS(lowbit::quantize_ternary(four, sizes.rows, sizes.cols, 1), std::invalid_argument);
        CHECK_THROWS_AS(lowbit::quantize_ternary_per_tensor(four, sizes.rows, sizes.cols), std::invalid_argument);
        CHECK_THROWS_AS(lowbit::quantize_activations_int8(four, sizes.rows, sizes.cols), std::invalid_argument);
        std::vector<float> out(4);
        CHECK_THROWS_AS(lowbit::fake_quantize_ternary(four, out, sizes.rows, sizes.cols, 1), std::invalid_argument);
        CHECK_THROWS_AS(lowbit::fake_quantize_activations_int8(four, out, sizes.rows, sizes.cols),
                        std::invalid_argument);
    }
    for (const int group : {0, -1, -64, std::numeric_limits<int>::min(), 3}) {
        INFO("group_size " << group);
        CHECK_THROWS_AS(lowbit::quantize_ternary(four, 1, 4, group), std::invalid_argument);
    }
}

TEST_CASE("property: hand-built TernaryWeights and Int8Activations dequantize or refuse", "[property][bitnet]") {
    auto rng = lowbit::test::make_rng(7008);
    for (int iteration = 0; iteration < 4 * iterations(); ++iteration) {
        lowbit::TernaryWeights t;
        t.per_tensor = coin(rng, 0.3);
        const Index rows = uniform_int(rng, 0, 4), cols = uniform_int(rng, 0, 8);
        t.codes = lowbit::RowMatrixXi8::Constant(rows, cols, 1);
        t.group_size = uniform_int(rng, -2, 9);
        const Index scale_rows = coin(rng) ? rows : uniform_int(rng, 0, 5);
        const Index scale_cols = coin(rng) && t.group_size > 0 ? cols / t.group_size : uniform_int(rng, 0, 5);
        t.scales = RowMatrixXf::Constant(scale_rows, scale_cols, 0.5f);
        INFO("iteration " << iteration << ": codes " << rows << "x" << cols << ", scales " << scale_rows << "x"
                          << scale_cols << ", group_size " << t.group_size << ", per_tensor " << t.per_tensor);
        // Readable exactly when every element's scale index is in range.
        const bool readable =
            rows * cols > 0 &&
            (t.per_tensor ? scale_rows >= 1 && scale_cols >= 1
                          : t.group_size >= 1 && scale_rows >= rows && (cols - 1) / t.group_size < scale_cols);
        RowMatrixXf dq;
        if (returns_or_rejects([&] { dq = t.dequantize(); })) {
            CHECK((readable || rows * cols == 0));
            CHECK(dq.rows() == rows);
            CHECK(dq.cols() == cols);
            CHECK((dq.array() == 0.5f).all());
        }

        lowbit::Int8Activations a;
        a.codes = lowbit::RowMatrixXi8::Constant(rows, cols, -2);
        a.scales = Eigen::VectorXf::Constant(coin(rng) ? rows : uniform_int(rng, 0, 5), 0.25f);
        INFO("activations: codes " << rows << "x" << cols << ", scales " << a.scales.size());
        if (returns_or_rejects([&] { dq = a.dequantize(); })) {
            CHECK(a.scales.size() >= rows);
            CHECK((dq.array() == -0.5f).all());
        }
    }
}

// -------------------------------------------------------------------- quantize / QuantizedLinear

namespace {

/// MLX's affine rule for one group, from quantized_matrix.hpp's documentation (not its code): f32, RNE.
struct GroupRule {
    float scale = 0.0f, bias = 0.0f;
    std::vector<int> codes;
};
template <int Bits>
GroupRule mlx_group_rule(const float* values, int count) {
    const float n_bins = static_cast<float>((1 << Bits) - 1);
    float lo = values[0], hi = values[0];
    for (int i = 1; i < count; ++i) {
        lo = std::min(lo, values[i]);
        hi = std::max(hi, values[i]);
    }
    GroupRule rule;
    const bool min_is_edge = std::fabs(lo) > std::fabs(hi);
    float scale = std::max((hi - lo) / n_bins, 1e-7f);
    scale = min_is_edge ? scale : -scale;
    const float edge = min_is_edge ? lo : hi;
    const float q0 = std::nearbyint(edge / scale);
    if (q0 != 0.0f) {
        scale = edge / q0;
        rule.bias = edge;
    }
    rule.scale = scale;
    for (int i = 0; i < count; ++i)
        rule.codes.push_back(static_cast<int>(std::clamp(std::nearbyint((values[i] - rule.bias) / scale), 0.0f, n_bins)));
    return rule;
}

template <int GroupSize, int Bits>
void check_quantized(std::mt19937_64& rng) {
    using Q = lowbit::QuantizedMatrix<GroupSize, Bits>;
    const Index rows = uniform_int(rng, 1, 6), cols = GroupSize * uniform_int(rng, 1, 3);
    const RowMatrixXf w = sprinkled_matrix(rng, rows, cols, coin(rng, 0.8));
    INFO("QuantizedMatrix<" << GroupSize << ", " << Bits << ">, w " << rows << "x" << cols);
    // The documented rule, group by group; a group whose rule is not finite must be refused.
    bool representable = true;
    std::vector<GroupRule> rules;
    for (Index r = 0; r < rows; ++r)
        for (Index g = 0; g < cols / GroupSize; ++g) {
            const float* values = &w(r, g * GroupSize);
            bool finite = true;
            for (int i = 0; i < GroupSize; ++i) finite = finite && std::isfinite(values[i]);
            if (!finite) {
                representable = false;
                rules.emplace_back();
                continue;
            }
            rules.push_back(mlx_group_rule<Bits>(values, GroupSize));
            const GroupRule& rule = rules.back();
            // Rebuilt values fl(fl(s * q) + b) must be finite too, for every code and the top level 2^Bits - 1
            // (volatile: no fused multiply-add, as dequantize).
            bool rebuilt = std::isfinite(rule.scale) && rule.scale != 0.0f;
            std::vector<int> levels = rule.codes;
            levels.push_back((1 << Bits) - 1);
            for (int code : levels) {
                volatile float product = rule.scale * static_cast<float>(code);
                rebuilt = rebuilt && std::isfinite(product + rule.bias);
            }
            representable = representable && rebuilt;
        }
    Q q;
    std::string message;
    if (!returns_or_rejects([&] { q = lowbit::quantize<GroupSize, Bits>(w); }, &message)) {
        for (Index r = 0; r < rows; ++r)
            for (Index g = 0; g < cols / GroupSize; ++g) {
                const auto block = w.block(r, g * GroupSize, 1, GroupSize);
                UNSCOPED_INFO("row " << r << " group " << g << ": [" << block.minCoeff() << ", " << block.maxCoeff() << "]");
            }
        CHECK(!representable);
        if (all_finite(std::span<const float>(w.data(), static_cast<std::size_t>(w.size()))))
            CHECK(message.find("row") != std::string::npos);  // names where the unrepresentable group is
        return;
    }
    CHECK(representable);  // quantize returned for a group the rule cannot represent
    if (!representable) return;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(cols));
    for (Index r = 0; r < rows; ++r) {
        lowbit::detail::reference::unpack_codes<Bits>(&q.codes(r, 0), static_cast<std::size_t>(cols), codes.data());
        for (Index g = 0; g < cols / GroupSize; ++g) {
            const GroupRule& rule = rules[static_cast<std::size_t>(r * (cols / GroupSize) + g)];
            INFO("row " << r << ", group " << g);
            CHECK(same_bits(q.scales(r, g), rule.scale));
            CHECK(same_bits(q.biases(r, g), rule.bias));
            bool codes_match = true;
            for (int i = 0; i < GroupSize; ++i)
                codes_match = codes_match && codes[static_cast<std::size_t>(g * GroupSize + i)] ==
                                                 rule.codes[static_cast<std::size_t>(i)];
            CHECK(codes_match);
        }
    }
    // Every layout quantizes to the same words; GroupFakeQuantize is dequantize(quantize(w)).
    for_each_layout(w, [&](const auto& view, const char* layout) {
        INFO("layout " << layout);
        const Q other = lowbit::quantize<GroupSize, Bits>(view);
        CHECK(other.codes == q.codes);
        CHECK(first_matrix_difference(other.scales, q.scales) == -1);
        CHECK(first_matrix_difference(other.biases, q.biases) == -1);
    });
    const RowMatrixXf dq = lowbit::dequantize(q);
    CHECK(all_finite(std::span<const float>(dq.data(), static_cast<std::size_t>(dq.size()))));
    CHECK(first_matrix_difference(lowbit::GroupFakeQuantize<GroupSize, Bits>().forward(w), dq) == -1);
    for (Index r = 0; r < rows; ++r)
        for (Index c = 0; c < cols; ++c) {
            const float s = q.scales(r, c / GroupSize);
            const double slack = lowbit::test::quantization_rounding_slack(std::fabs(static_cast<double>(w(r, c))) +
                                                                           std::fabs(static_cast<double>(dq(r, c))));
            CHECK(std::fabs(static_cast<double>(dq(r, c)) - static_cast<double>(w(r, c))) <=
                  std::fabs(static_cast<double>(s)) + slack);
        }

    // quantized_matmul and QuantizedLinear: the scalar reference within the dot-product bound, bitwise
    // the same for every layout of x, and forward = matmul + bias.
    const Index batch = uniform_int(rng, 1, 5);
    const RowMatrixXf x = sprinkled_matrix(rng, batch, cols, true).cwiseMax(-1e15f).cwiseMin(1e15f);
    RowMatrixXf reference(batch, rows);
    lowbit::detail::reference::quantized_matmul(x.data(), cols, batch, q.view(), reference.data(), rows);
    const RowMatrixXf y = lowbit::quantized_matmul(x, q);
    for (Index m = 0; m < batch; ++m)
        for (Index n = 0; n < rows; ++n) {
            double abs_sum = 0.0;
            for (Index k = 0; k < cols; ++k)
                abs_sum += std::fabs(static_cast<double>(x(m, k))) *
                           (std::fabs(static_cast<double>(dq(n, k))) + std::fabs(static_cast<double>(q.biases(n, k / GroupSize))));
            INFO("out(" << m << ", " << n << ") = " << y(m, n) << ", reference " << reference(m, n));
            if (std::isfinite(reference(m, n)) && abs_sum < 1e37)
                CHECK(std::fabs(static_cast<double>(y(m, n)) - static_cast<double>(reference(m, n))) <=
                      2.0 * lowbit::test::dot_tolerance(static_cast<std::size_t>(cols), abs_sum));
        }
    for_each_layout(x, [&](const auto& view, const char* layout) {
        INFO("layout " << layout);
        CHECK(first_matrix_difference(lowbit::quantized_matmul(view, q), y) == -1);
    });
    const Eigen::VectorXf bias = Eigen::VectorXf::LinSpaced(rows, -2.0f, 2.0f);
    const lowbit::QuantizedLinear<GroupSize, Bits> layer(q, bias);
    RowMatrixXf with_bias = y;
    with_bias.rowwise() += bias.transpose();
    CHECK(first_matrix_difference(layer.forward(x), with_bias) == -1);
    Eigen::Tensor<float, 3, Eigen::RowMajor> tensor(1, batch, cols);
    std::copy(x.data(), x.data() + x.size(), tensor.data());
    const auto y_tensor = layer.forward(tensor);
    CHECK(first_difference(std::span<const float>(y_tensor.data(), static_cast<std::size_t>(y_tensor.size())),
                           std::span<const float>(with_bias.data(), static_cast<std::size_t>(with_bias.size()))) == -1);
    // Shape errors are refused.
    CHECK_THROWS_AS(lowbit::quantized_matmul(RowMatrixXf::Zero(batch, cols + GroupSize), q), std::invalid_argument);
    CHECK(lowbit::quantized_matmul(RowMatrixXf::Zero(0, cols), q).rows() == 0);  // an empty batch: empty result
    CHECK_THROWS_AS((lowbit::QuantizedLinear<GroupSize, Bits>(q, Eigen::VectorXf::Zero(rows + 1))), std::invalid_argument);
    CHECK_THROWS_AS((lowbit::GroupFakeQuantize<GroupSize, Bits>().backward(RowMatrixXf::Zero(rows, cols + 1), w)),
                    std::invalid_argument);
    Q broken = q;
    broken.scales.resize(rows, cols / GroupSize + 1);
    CHECK_THROWS_AS(lowbit::dequantize(broken), std::invalid_argument);
    CHECK_THROWS_AS(lowbit::quantized_matmul(x, broken), std::invalid_argument);
}

}  // namespace

TEST_CASE("property: quantize follows the MLX rule and dequantize quantized_matmul and QuantizedLinear agree",
          "[property][quantized]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(7009);
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        INFO("iteration " << iteration);
        lowbit::set_num_threads(uniform_int(rng, 1, 4));
        check_quantized<32, 2>(rng);
        check_quantized<64, 3>(rng);
        check_quantized<64, 4>(rng);
        check_quantized<128, 5>(rng);
        check_quantized<32, 6>(rng);
        check_quantized<64, 8>(rng);
    }
}

TEST_CASE("property: quantize refuses a group spanning -FLT_MAX to FLT_MAX and names row and group",
          "[property][quantized]") {
    RowMatrixXf w = RowMatrixXf::Zero(3, 128);
    w(2, 64) = FLT_MAX;
    w(2, 100) = -FLT_MAX;
    try {
        const auto q = lowbit::quantize<64, 4>(w);
        FAIL("quantize returned scale " << q.scales(2, 1) << " for a group spanning -FLT_MAX to FLT_MAX");
    } catch (const std::invalid_argument& error) {
        const std::string message = error.what();
        INFO(message);
        CHECK(message.rfind("lowbit::quantize", 0) == 0);
        CHECK(message.find("row 2") != std::string::npos);
        CHECK(message.find("group 1") != std::string::npos);
    }
    CHECK_THROWS_AS((lowbit::GroupFakeQuantize<64, 4>().forward(w)), std::invalid_argument);
}

TEST_CASE("property: error messages name the function the caller called", "[property][messages]") {
    const std::vector<float> x{1.0f, 2.0f};
    std::vector<float> out(3);
    const auto message_of = [](auto&& fn) -> std::string {
        try {
            fn();
        } catch (const std::invalid_argument& error) {
            return error.what();
        }
        return "(no exception)";
    };
    CHECK_THAT(message_of([&] { lowbit::ternary_ste(x, out, 1.0f); }), Catch::Matchers::StartsWith("lowbit::ternary_ste"));
    CHECK_THAT(message_of([&] { lowbit::ternary_ste(x, 0.0f); }), Catch::Matchers::StartsWith("lowbit::ternary_ste"));
    CHECK_THAT(message_of([&] { lowbit::int8_ste(x, out, 1.0f); }), Catch::Matchers::StartsWith("lowbit::int8_ste"));
    CHECK_THAT(message_of([&] { lowbit::int8_ste(x, -1.0f); }), Catch::Matchers::StartsWith("lowbit::int8_ste"));
    CHECK_THAT(message_of([&] { lowbit::ste_forward(x, out, 1.0f, -1.0f, 1.0f); }),
               Catch::Matchers::StartsWith("lowbit::ste_forward"));
    lowbit::PerChannelFakeQuantize<8> per_channel;
    CHECK_THAT(message_of([&] { per_channel.forward_with_calibration(std::vector<float>{nan_value, nan_value}, 2); }),
               Catch::Matchers::StartsWith("lowbit::PerChannelFakeQuantize::forward_with_calibration"));
    lowbit::FakeQuantize<8> fq;
    CHECK_THAT(message_of([&] { fq.forward_with_calibration(std::vector<float>{}); }),
               Catch::Matchers::StartsWith("lowbit::FakeQuantize::forward_with_calibration"));
    CHECK_THAT(message_of([&] { lowbit::fake_quantize_ternary(x, out, 1, 2, 1); }),
               Catch::Matchers::StartsWith("lowbit::fake_quantize_ternary"));
    CHECK_THAT(message_of([&] { lowbit::fake_quantize_activations_int8(x, out, 1, 2); }),
               Catch::Matchers::StartsWith("lowbit::fake_quantize_activations_int8"));
}
