// The element-wise fake-quant kernels (forward, both backward masks, STE forward, calibration min/max)
// against their scalar references, bit for bit (NaN: any NaN), for every length 0 .. (U+2)W+1 (U batches
// per unrolled iteration: every tail of the unrolled and the single-batch loops) at every input/output
// misalignment, large random lengths, ties in every lane, and NaN, +-Inf, +-0, denormals.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/fake_quant/kernels.hpp>
#include <lowbit/detail/fake_quant/passes.hpp>
#include <lowbit/detail/fake_quant/reference.hpp>
#include <lowbit/parallel.hpp>

#include "support/compare.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"

namespace {
using lowbit::test::first_difference;

namespace detail = lowbit::detail;
namespace kernels = lowbit::detail::kernels;
namespace simd = lowbit::detail::simd;
using lowbit::FakeQuantParams;
using lowbit::GradientMaskParams;
using lowbit::Rounding;

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();



/// The special values every data set mixes in.
[[maybe_unused]] std::vector<float> special_values(float scale) {
    const float denorm = std::numeric_limits<float>::denorm_min();
    return {nan,   -nan,  inf,    -inf,   0.0f,    -0.0f,   denorm,  -denorm, 1e-40f,  -1e-40f,
            std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
            std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
            1e30f, -1e30f, 0.5f * scale, -0.5f * scale, 1.5f * scale, -2.5f * scale};
}

/// x values: uniform over a little more than the code range, exact and near ties k + 0.5 (in units of
/// s), the range ends and specials; `tie_fraction` of them ties.
[[maybe_unused]] std::vector<float> make_inputs(std::mt19937_64& rng, std::size_t count,
                                                const FakeQuantParams& params) {
    std::uniform_real_distribution<float> code(params.code_min - 3.0f, params.code_max + 3.0f);
    std::uniform_int_distribution<int> kind(0, 9);
    const std::vector<float> specials = special_values(params.scale);
    std::uniform_int_distribution<std::size_t> pick(0, specials.size() - 1);
    std::vector<float> values(count);
    for (auto& value : values) {
        const int k = kind(rng);
        const float c = code(rng);
        if (k <= 4) value = c * params.scale;                              // random
        else if (k <= 7) value = (std::floor(c) + 0.5f) * params.scale;    // ties and near ties
        else if (k == 8) value = specials[pick(rng)];
        else value = std::floor(c) * params.scale;                         // integer codes, range ends
    }
    return values;
}

struct ParamCase {
    FakeQuantParams params;
    const char* what;
};

/// Symmetric and asymmetric ranges, both quotients, both deterministic roundings, ordinary, power-of-two
/// (exact ties), tiny (1/s overflows: plain division) and huge (1/s denormal) scales.
[[maybe_unused]] std::vector<ParamCase> param_cases() {
    std::vector<ParamCase> cases;
    struct Range {
        float min, max, zero;
    };
    const Range ranges[] = {{-127, 127, 0}, {-8, 7, 0}, {0, 255, 85}, {0, 15, 3}, {-1, 1, 0}, {0, 65535, 30000}};
    const float scales[] = {0.2f, 0.5f, 0.011764706f, 3.7f, 1e-3f, 1e-39f, 1e38f};
    // STE bounds that are not integers (z = 0): the outer clamp after rounding.
    for (Rounding rounding : {Rounding::half_away_from_zero, Rounding::half_to_even}) {
        FakeQuantParams p;
        p.scale = 0.3f;
        p.code_min = -2.5f;
        p.code_max = 1.25f;
        p.rounding = rounding;
        p.finish();
        cases.push_back({p, "ste, non-integer bounds"});
    }
    for (Rounding rounding : {Rounding::half_away_from_zero, Rounding::half_to_even}) {
        for (bool multiply : {false, true}) {
            for (const Range& range : ranges) {
                for (float scale : scales) {
                    FakeQuantParams p;
                    p.scale = scale;
                    p.zero_point = range.zero;
                    p.code_min = range.min;
                    p.code_max = range.max;
                    p.multiply_by_reciprocal = multiply;
                    p.rounding = rounding;
                    p.finish();
                    cases.push_back({p, multiply ? "multiply" : "divide"});
                }
            }
        }
    }
    return cases;
}

[[maybe_unused]] GradientMaskParams band_mask(const FakeQuantParams& params) {
    GradientMaskParams mask;
    mask.code = params;
    mask.low = (params.code_min - params.zero_point) * params.scale;
    mask.high = (params.code_max - params.zero_point) * params.scale;
    return mask;
}

/// The quotients the kernels can use for params (divide also through the checked reciprocal path).
[[maybe_unused]] std::vector<kernels::Quotient> quotients_for(const FakeQuantParams& params) {
    if (params.multiply_by_reciprocal) return {kernels::Quotient::multiply};
    std::vector<kernels::Quotient> result{kernels::Quotient::divide};
    if (kernels::reciprocal_check_applies(params)) result.push_back(kernels::Quotient::divide_checked);
    return result;
}

#if !defined(LOWBIT_FORCE_SCALAR)
using arch = simd::arch;
constexpr std::size_t lanes = simd::width<float>;

/// Runs forward (and both masks) on x at the given output misalignment, kernel vs reference.
void check_all_passes(const FakeQuantParams& params, const std::vector<float>& x, std::size_t offset, bool stream,
                      const std::vector<float>& grad) {
    const std::size_t n = x.size();
    std::vector<float> expected(n), actual_storage(n + offset + lanes);
    detail::reference::fake_quantize_forward(params, x.data(), expected.data(), n);
    for (kernels::Quotient quotient : quotients_for(params)) {
        float* actual = actual_storage.data() + offset;
        kernels::fake_quantize_forward<arch>(params, quotient, stream, x.data(), actual, n);
        const std::vector<float> got(actual, actual + n);
        const long at = first_difference(expected, got);
        INFO("forward, n = " << n << ", offset " << offset << ", stream " << stream << ", quotient "
                             << static_cast<int>(quotient) << ", s = " << params.scale << ", z = " << params.zero_point
                             << ", rounding " << static_cast<int>(params.rounding));
        if (at >= 0) UNSCOPED_INFO("x = " << x[at] << ", expected " << expected[at] << ", got " << got[at]);
        CHECK(at == -1);
    }
    for (bool on_code : {false, true}) {
        GradientMaskParams mask = band_mask(params);
        mask.on_rounded_code = on_code;
        std::vector<float> expected_grad(n);
        detail::reference::backward_clamped(mask, grad.data(), x.data(), expected_grad.data(), n);
        for (kernels::Quotient quotient : quotients_for(params)) {
            float* actual = actual_storage.data() + offset;
            kernels::backward_clamped<arch>(mask, quotient, stream, grad.data(), x.data(), actual, n);
            const std::vector<float> got(actual, actual + n);
            const long at = first_difference(expected_grad, got);
            INFO("backward_clamped on " << (on_code ? "code" : "band") << ", n = " << n << ", offset " << offset);
            if (at >= 0) UNSCOPED_INFO("x = " << x[at] << ", expected " << expected_grad[at] << ", got " << got[at]);
            CHECK(at == -1);
        }
    }
}

TEST_CASE("fake-quant kernels equal the reference for every length 0 .. (U+2)W+1 and misalignment",
          "[kernels][fake_quantize]") {
    auto rng = lowbit::test::make_rng(301);
    const auto cases = param_cases();
    for (const ParamCase& c : cases) {
        for (std::size_t n = 0; n <= (detail::kernels::transform_unroll + 2) * lanes + 1; ++n) {
            const std::vector<float> x = make_inputs(rng, n, c.params);
            const std::vector<float> grad = lowbit::test::uniform_floats(rng, n, -2.0f, 2.0f);
            for (std::size_t offset : {std::size_t{0}, std::size_t{1}, lanes - 1}) {
                for (bool stream : {false, true}) check_all_passes(c.params, x, offset, stream, grad);
            }
        }
    }
}

TEST_CASE("fake-quant kernels equal the reference on large random lengths", "[kernels][fake_quantize]") {
    auto rng = lowbit::test::make_rng(302);
    std::uniform_int_distribution<std::size_t> length(100, 5000);
    const auto cases = param_cases();
    for (std::size_t trial = 0; trial < cases.size(); ++trial) {
        const auto& params = cases[trial].params;
        const std::vector<float> x = make_inputs(rng, length(rng), params);
        const std::vector<float> grad = lowbit::test::uniform_floats(rng, x.size(), -2.0f, 2.0f);
        check_all_passes(params, x, trial % lanes, trial % 2 == 1, grad);
    }
}

TEST_CASE("fake-quant kernels round exact ties in every lane like the reference", "[kernels][fake_quantize]") {
    for (const ParamCase& c : param_cases()) {
        const auto& p = c.params;
        // Every lane a tie, then one tie lane among integers, for each lane position.
        std::vector<float> all_ties;
        for (std::size_t lane = 0; lane < 4 * lanes; ++lane) {
            const float code = p.code_min + static_cast<float>(lane % 7) - 1.0f;
            all_ties.push_back((code + 0.5f) * p.scale);
            all_ties.push_back(-(code + 0.5f) * p.scale);
        }
        const std::vector<float> grad(all_ties.size(), 1.0f);
        check_all_passes(p, all_ties, 0, false, grad);
        for (std::size_t lane = 0; lane < lanes; ++lane) {
            std::vector<float> one_tie(lanes);
            for (std::size_t i = 0; i < lanes; ++i) one_tie[i] = static_cast<float>(i) * p.scale;
            one_tie[lane] = (static_cast<float>(lane) + 0.5f) * p.scale;
            check_all_passes(p, one_tie, 0, false, std::vector<float>(lanes, -1.0f));
        }
    }
}

TEST_CASE("fake-quant kernels pass NaN, +-Inf, +-0 and denormals like the reference", "[kernels][fake_quantize]") {
    for (const ParamCase& c : param_cases()) {
        std::vector<float> x = special_values(c.params.scale);
        // Band edges and their neighbours.
        const GradientMaskParams mask = band_mask(c.params);
        for (float edge : {mask.low, mask.high}) {
            x.push_back(edge);
            x.push_back(std::nextafter(edge, inf));
            x.push_back(std::nextafter(edge, -inf));
        }
        const std::vector<float> grad(x.size(), 0.75f);
        for (std::size_t offset = 0; offset < lanes; ++offset) check_all_passes(c.params, x, offset, offset % 2 == 0, grad);
    }
}

TEST_CASE("RHAZ and RNE kernels equal std::round and std::nearbyint over a sweep of every float magnitude",
          "[kernels][fake_quantize]") {
    // Codes unclamped (range +-FLT_MAX), s = 1 with the multiply quotient: y = R(x) exactly.
    FakeQuantParams params;
    params.scale = 1.0f;
    params.code_min = -std::numeric_limits<float>::max();
    params.code_max = std::numeric_limits<float>::max();
    params.multiply_by_reciprocal = true;
    params.finish();
    std::vector<float> x;
    for (std::uint32_t bits = 0; bits < 0x7F800000u; bits += 997) {
        const float value = std::bit_cast<float>(bits);
        x.push_back(value);
        x.push_back(-value);
        x.push_back(std::floor(value) + 0.5f);  // a tie wherever representable
    }
    for (Rounding rounding : {Rounding::half_away_from_zero, Rounding::half_to_even}) {
        params.rounding = rounding;
        std::vector<float> y(x.size());
        kernels::fake_quantize_forward<arch>(params, kernels::Quotient::multiply, false, x.data(), y.data(), x.size());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const float expected = rounding == Rounding::half_to_even ? std::nearbyint(x[i]) : std::round(x[i]);
            // (R(x) + 0 - 0) * 1 turns -0 into +0, as the reference does.
            if (!lowbit::test::same_bits(y[i], (expected + 0.0f - 0.0f) * 1.0f)) ++wrong;
        }
        INFO("rounding " << static_cast<int>(rounding) << ", " << x.size() << " values");
        CHECK(wrong == 0);
    }
}

TEST_CASE("calibration min/max kernel equals the reference", "[kernels][min_max]") {
    auto rng = lowbit::test::make_rng(303);
    std::uniform_int_distribution<int> kind(0, 11);
    auto check = [](const std::vector<float>& x) {
        const detail::FiniteRange expected = detail::reference::finite_min_max(x.data(), x.size());
        const detail::FiniteRange actual = kernels::finite_min_max<arch>(x.data(), x.size());
        INFO("n = " << x.size());
        CHECK(actual.found == expected.found);
        CHECK(lowbit::test::same_bits(actual.min, expected.min));
        CHECK(lowbit::test::same_bits(actual.max, expected.max));
    };
    const std::vector<float> specials = special_values(1.0f);
    for (std::size_t n = 0; n <= 3 * lanes + 1; ++n) {
        for (int trial = 0; trial < 20; ++trial) {
            std::vector<float> x = lowbit::test::uniform_floats(rng, n, -100.0f, 100.0f);
            for (auto& value : x) {
                const int k = kind(rng);
                if (k == 0) value = nan;
                else if (k == 1) value = specials[static_cast<std::size_t>(trial) % specials.size()];
                else if (k == 2) value = (trial % 2) ? 0.0f : -0.0f;
            }
            check(x);
        }
        check(std::vector<float>(n, nan));
        check(std::vector<float>(n, inf));
        check(std::vector<float>(n, -0.0f));
    }
    for (int trial = 0; trial < 50; ++trial) {
        std::uniform_int_distribution<std::size_t> length(100, 20000);
        std::vector<float> x = lowbit::test::uniform_floats(rng, length(rng), -1e6f, 1e6f);
        for (std::size_t i = 0; i < x.size(); i += 37) x[i] = specials[i % specials.size()];
        check(x);
    }
}

TEST_CASE("streaming and threaded dispatch of large arrays equal the reference", "[kernels][fake_quantize][threads]") {
    auto rng = lowbit::test::make_rng(304);
    const std::size_t n = detail::streaming_min_count + 3 * lanes + 5;  // streaming path, odd tail
    FakeQuantParams params;
    params.scale = 0.05f;
    params.zero_point = 3.0f;
    params.code_min = 0.0f;
    params.code_max = 15.0f;
    params.finish();
    const std::vector<float> x = make_inputs(rng, n, params);
    const std::vector<float> grad = lowbit::test::uniform_floats(rng, n, -1.0f, 1.0f);
    std::vector<float> expected(n), actual(n + 1);
    detail::reference::fake_quantize_forward(params, x.data(), expected.data(), n);
    for (int threads : {1, 2, 3}) {
        lowbit::set_num_threads(threads);
        // Output misaligned by one float: the streaming head goes through the padded batch.
        detail::fake_quantize_forward(params, x.data(), actual.data() + 1, n);
        CHECK(first_difference(expected, std::vector<float>(actual.begin() + 1, actual.end())) == -1);
        const GradientMaskParams mask = band_mask(params);
        std::vector<float> expected_grad(n);
        detail::reference::backward_clamped(mask, grad.data(), x.data(), expected_grad.data(), n);
        detail::backward_clamped(mask, grad.data(), x.data(), actual.data(), n);
        CHECK(first_difference(expected_grad, std::vector<float>(actual.begin(), actual.end() - 1)) == -1);
        const detail::FiniteRange range = detail::finite_min_max(x.data(), n);
        const detail::FiniteRange range_expected = detail::reference::finite_min_max(x.data(), n);
        CHECK(range.found == range_expected.found);
        CHECK(lowbit::test::same_bits(range.min, range_expected.min));
        CHECK(lowbit::test::same_bits(range.max, range_expected.max));
    }
    lowbit::set_num_threads(0);
}
#endif

TEST_CASE("stochastic forward is the same for every thread count", "[kernels][fake_quantize][threads]") {
    auto rng = lowbit::test::make_rng(305);
    const std::size_t n = 3 * detail::elementwise_grain + 17;
    FakeQuantParams params;
    params.scale = 0.1f;
    params.rounding = Rounding::stochastic;
    params.finish();
    const std::vector<float> x = lowbit::test::uniform_floats(rng, n, -5.0f, 5.0f);
    std::vector<float> expected(n), actual(n);
    lowbit::UniformStream reference_stream(42);
    detail::reference::fake_quantize_forward_stochastic(params, reference_stream, 0, x.data(), expected.data(), n);
    for (int threads : {1, 2, 4}) {
        lowbit::set_num_threads(threads);
        lowbit::UniformStream stream(42);
        detail::fake_quantize_forward_stochastic(params, stream, x.data(), actual.data(), n);
        CHECK(first_difference(expected, actual) == -1);
        CHECK(stream.position() == n);
    }
    lowbit::set_num_threads(0);
}

}  // namespace
