// Property tests over the post-training quantizers (lowbit/ptq.hpp): random options at, inside and beyond
// their documented ranges, and calibration inputs with zeros, duplicated columns, one row, denormals and
// values near float's limits. Every call returns a valid quantization (shapes right, finite scales and
// biases, finite dequantized values, finite reported errors) or throws std::invalid_argument naming its
// function; never an allocation sized by an option, a crash, a sanitizer report or a silent non-finite
// result. With ordinary weights (|w| <= 1) and valid options every finite calibration input is accepted.
//
// Iterations: LOWBIT_PROPERTY_ITERATIONS (tests/support/property.hpp); seeds from Catch2's --rng-seed.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/lowbit.hpp>
#include <lowbit/ptq.hpp>

#include "support/property.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"

namespace {

using Eigen::Index;
using lowbit::RowMatrixXf;
using lowbit::test::coin;
using lowbit::test::inf;
using lowbit::test::iterations;
using lowbit::test::nan_value;
using lowbit::test::returns_or_rejects;
using lowbit::test::uniform_int;

template <class T, std::size_t N>
T pick(std::mt19937_64& rng, const T (&values)[N]) {
    return values[static_cast<std::size_t>(uniform_int(rng, 0, static_cast<int>(N) - 1))];
}

/// Calibration inputs [samples, in] of one of the hostile kinds; `kind` names it for the failure report.
RowMatrixXf hostile_calibration(std::mt19937_64& rng, Index in, std::string& kind) {
    const Index samples = coin(rng, 0.2) ? 1 : uniform_int(rng, 2, 24);
    RowMatrixXf x(samples, in);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : x.reshaped()) v = normal(rng);
    switch (uniform_int(rng, 0, 7)) {
        case 0:
            kind = "ordinary";
            break;
        case 1: {
            kind = "zero columns";
            for (Index c = 0; c < in; ++c)
                if (coin(rng, 0.4)) x.col(c).setZero();
            break;
        }
        case 2: {
            kind = "duplicated columns";
            for (Index c = 1; c < in; ++c)
                if (coin(rng, 0.5)) x.col(c) = x.col(uniform_int(rng, 0, static_cast<int>(c) - 1));
            break;
        }
        case 3: {
            kind = "denormals";
            for (auto& v : x.reshaped()) v *= FLT_TRUE_MIN * static_cast<float>(uniform_int(rng, 1, 1000));
            break;
        }
        case 4: {
            const float scales[] = {1e20f, 1e30f, 1e37f, FLT_MAX / 8.0f, 1e-20f, 1e-30f, 1e-38f};
            const float scale = pick(rng, scales);
            kind = "scaled by " + std::to_string(scale);
            x *= scale;
            for (auto& v : x.reshaped()) v = std::isfinite(v) ? v : std::copysign(FLT_MAX, v);
            break;
        }
        case 5: {
            kind = "columns of mixed magnitude";
            const float scales[] = {FLT_MAX / 64.0f, 1e30f, 1.0f, 1e-30f, FLT_TRUE_MIN, 0.0f};
            for (Index c = 0; c < in; ++c) {
                const float scale = pick(rng, scales);
                for (Index r = 0; r < samples; ++r) x(r, c) = std::clamp(x(r, c) * scale, -FLT_MAX, FLT_MAX);
            }
            break;
        }
        case 6: {
            kind = "all zero";
            x.setZero();
            break;
        }
        default: {
            kind = "sprinkled with the float extremes";
            x = lowbit::test::sprinkled_matrix(rng, samples, in, true);
            break;
        }
    }
    if (coin(rng, 0.05)) {
        kind += ", one non-finite value";
        x(uniform_int(rng, 0, static_cast<int>(samples) - 1), uniform_int(rng, 0, static_cast<int>(in) - 1)) =
            coin(rng) ? nan_value : -inf;
    }
    return x;
}

/// Options at the defaults (valid = true) or drawn from values inside, at and beyond each field's range.
lowbit::ClipSearchOptions random_clip(std::mt19937_64& rng, bool& valid) {
    lowbit::ClipSearchOptions options;
    if (coin(rng, 0.4)) return options;
    const int grids[] = {-1, 0, 1, 3, 10, 200};
    const float shrinks[] = {-0.1f, 0.0f, 1e-30f, 0.3f, 0.5f, 0.50001f, 1.0f, nan_value, inf};
    const int rounds[] = {-1, 0, 2, 50};
    options.grid = pick(rng, grids);
    options.max_shrink = pick(rng, shrinks);
    options.refit_rounds = pick(rng, rounds);
    valid = options.grid >= 1 && options.max_shrink > 0.0f && options.max_shrink <= 0.5f && options.refit_rounds >= 0;
    return options;
}

lowbit::HqqOptions random_hqq(std::mt19937_64& rng, bool& valid) {
    lowbit::HqqOptions options;
    if (coin(rng, 0.4)) return options;
    const float ps[] = {0.0f, 1e-6f, 0.3f, 0.7f, 0.999999f, 1.0f, 1.5f, nan_value};
    const int rounds[] = {-1, 0, 1, 20, 300};
    const float betas[] = {-1.0f, 0.0f, 1e-30f, 10.0f, 1e30f, FLT_MAX, inf, nan_value};
    const float kappas[] = {0.5f, 1.0f, 1.01f, 2.0f, 1e30f, inf};
    options.p = pick(rng, ps);
    options.iterations = pick(rng, rounds);
    options.beta = pick(rng, betas);
    options.kappa = pick(rng, kappas);
    valid = options.p > 0.0f && options.p < 1.0f && options.iterations >= 1 && options.beta > 0.0f &&
            std::isfinite(options.beta) && options.kappa >= 1.0f && std::isfinite(options.kappa);
    return options;
}

/// `ordinary`: options for which every finite calibration input must be accepted (the defaults'
/// damping and retries, any block size; the GPTQ recovery of a singular H needs the damping).
lowbit::GptqOptions random_gptq(std::mt19937_64& rng, bool& valid, bool& ordinary) {
    lowbit::GptqOptions options;
    const int blocks[] = {INT_MIN, -5, 0, 1, 7, 32, 64, 128, 1 << 20, 1 << 30, INT_MAX};
    options.block_size = pick(rng, blocks);
    options.keep_better_of_rtn = coin(rng);
    ordinary = options.block_size >= 1;
    valid = ordinary;
    if (coin(rng, 0.5)) {
        const float dampings[] = {-1.0f, 0.0f, 1e-6f, 0.01f, 1.0f, 1e10f, FLT_MAX, inf, nan_value};
        const int retries[] = {-1, 0, 1, 4, 60, INT_MAX};
        options.damping = pick(rng, dampings);
        options.damping_retries = pick(rng, retries);
        valid = valid && options.damping >= 0.0f && std::isfinite(options.damping) && options.damping_retries >= 0;
        ordinary = false;
    }
    if (coin(rng, 0.3)) {
        options.clip_groups = true;
        bool clip_valid = true;
        options.clip = random_clip(rng, clip_valid);
        valid = valid && clip_valid;
        ordinary = ordinary && clip_valid;
    }
    return options;
}

/// A quantization that came back: right shape, finite scales and biases, finite dequantized values.
template <int G, int B>
void check_valid(const lowbit::QuantizedMatrix<G, B>& q, Index rows, Index cols) {
    REQUIRE(q.rows() == rows);
    REQUIRE(q.cols() == cols);
    CHECK(q.scales.allFinite());
    CHECK(q.biases.allFinite());
    CHECK(lowbit::dequantize(q).allFinite());
}

template <int G, int B>
void check_ptq(std::mt19937_64& rng) {
    INFO("format g" << G << " q" << B);
    const Index rows = uniform_int(rng, 1, 10), cols = G * uniform_int(rng, 1, 3);
    const bool ordinary_weights = coin(rng, 0.7);
    const RowMatrixXf w = ordinary_weights ? lowbit::test::random_weights(rng, rows, cols) / 2.5f
                                           : lowbit::test::sprinkled_matrix(rng, rows, cols, true);
    std::string kind;
    const RowMatrixXf x = hostile_calibration(rng, cols, kind);
    const bool finite_x = x.allFinite();
    INFO("w " << rows << "x" << cols << (ordinary_weights ? " ordinary" : " sprinkled") << ", x " << x.rows() << "x"
              << cols << " " << kind);

    // Channel weights: finite and >= 0 for every finite x, refused otherwise.
    Eigen::VectorXf channel;
    CHECK(returns_or_rejects([&] { channel = lowbit::channel_weights_from_calibration(x); }) == finite_x);
    if (finite_x) {
        CHECK(channel.allFinite());
        CHECK((channel.array() >= 0.0f).all());
    }

    bool clip_valid = true;
    const lowbit::ClipSearchOptions clip = random_clip(rng, clip_valid);
    INFO("clip grid " << clip.grid << ", max_shrink " << clip.max_shrink << ", refit_rounds " << clip.refit_rounds);
    const bool clip_returned = returns_or_rejects([&] {
        const auto q = lowbit::clip_search<G, B>(w, finite_x ? channel : Eigen::VectorXf(), clip);
        check_valid(q, rows, cols);
    });
    if (ordinary_weights && clip_valid) CHECK(clip_returned);

    bool hqq_valid = true;
    const lowbit::HqqOptions hqq = random_hqq(rng, hqq_valid);
    INFO("hqq p " << hqq.p << ", iterations " << hqq.iterations << ", beta " << hqq.beta << ", kappa " << hqq.kappa);
    const bool hqq_returned = returns_or_rejects([&] { check_valid(lowbit::hqq<G, B>(w, hqq), rows, cols); });
    if (ordinary_weights && hqq_valid) CHECK(hqq_returned);

    bool gptq_valid = true, gptq_ordinary = true;
    const lowbit::GptqOptions gptq = random_gptq(rng, gptq_valid, gptq_ordinary);
    INFO("gptq damping " << gptq.damping << ", block_size " << gptq.block_size << ", retries " << gptq.damping_retries
                         << ", clip_groups " << gptq.clip_groups);
    lowbit::GptqReport report;
    const bool gptq_returned = returns_or_rejects([&] {
        check_valid(lowbit::gptq<G, B>(w, x, gptq, &report), rows, cols);
        CHECK(std::isfinite(report.damping));
        CHECK(std::isfinite(report.output_error));
        CHECK(std::isfinite(report.rtn_output_error));
    });
    if (ordinary_weights && gptq_ordinary && finite_x) CHECK(gptq_returned);
    if (!gptq_valid || !finite_x) CHECK_FALSE(gptq_returned);

    // allocate_bits over two candidate formats with a random method and the options above.
    lowbit::BitAllocationOptions allocation;
    allocation.bits = {2, B};
    allocation.group_sizes = {G};
    allocation.target_bits_per_weight = std::uniform_real_distribution<double>(1.0, 9.0)(rng);
    const lowbit::PtqMethod methods[] = {lowbit::PtqMethod::rtn, lowbit::PtqMethod::clip_search, lowbit::PtqMethod::hqq,
                                         lowbit::PtqMethod::gptq};
    allocation.method = pick(rng, methods);
    allocation.clip = clip;
    allocation.hqq = hqq;
    allocation.gptq = gptq;
    INFO("allocate_bits method " << static_cast<int>(allocation.method) << ", target "
                                 << allocation.target_bits_per_weight);
    (void)returns_or_rejects([&] {
        const lowbit::BitAllocation result = lowbit::allocate_bits({{"layer", {w, std::nullopt}, x}}, allocation);
        REQUIRE(result.layers.size() == 1);
        CHECK(std::isfinite(result.output_error));
        CHECK(result.layers[0].dequantize().allFinite());
    });
}

}  // namespace

TEST_CASE("property: PTQ methods return finite quantizations or refuse, at any options and calibration inputs",
          "[property][ptq]") {
    lowbit::test::ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(7301);
    for (int iteration = 0; iteration < iterations(); ++iteration) {
        INFO("iteration " << iteration);
        lowbit::set_num_threads(uniform_int(rng, 1, 3));
        check_ptq<32, 2>(rng);
        check_ptq<64, 4>(rng);
        check_ptq<32, 3>(rng);
        check_ptq<128, 8>(rng);
    }
}
