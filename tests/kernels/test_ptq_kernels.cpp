// The post-training quantizers' kernels of detail/ptq/ against their references. Clip search: the
// vectorised ranking error (to the rounding of a float sum of Count terms and of each level, the bound
// group_error.hpp documents) and the group range (exactly), over every bits and group size and groups
// with ties, constant stretches and wide ranges. GPTQ: the per-column coder (codes exactly,
// levels and fed-forward errors to the rounding of one fused multiply-add, which the compiler may or
// may not contract in either version), the per-row range of a group of columns (exactly), and the
// inverse Cholesky factor U of (H + d I)^-1 (to float rounding, and U^T U (H + d I) = I), including the
// retry after a failed factorization that gptq makes when H is singular.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/mlx_affine/quantize.hpp>
#include <lowbit/detail/ptq/group_error.hpp>
#include <lowbit/detail/ptq/group_range.hpp>
#include <lowbit/detail/ptq/gptq_column.hpp>
#include <lowbit/detail/ptq/gptq_factor.hpp>

#include "support/random.hpp"

namespace {
namespace ptq = lowbit::detail::ptq;

template <int Bits>
void check_code_column(std::mt19937_64& rng, Eigen::Index count) {
    constexpr float max_code = static_cast<float>((1 << Bits) - 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::vector<float> values(static_cast<std::size_t>(count)), scales(values.size()), biases(values.size());
    for (std::size_t r = 0; r < values.size(); ++r) {
        // a group range per row from MLX's rule, the value inside, outside (clamped) or on an exact tie
        const float a = normal(rng), b = normal(rng) * (r % 5 == 0 ? 1e-3f : 1.0f);
        const auto [s, bias] = lowbit::detail::group_scale_bias<Bits>(std::min(a, b), std::max(a, b));
        scales[r] = s;
        biases[r] = bias;
        const float code = std::floor(unit(rng) * (max_code + 1.0f));
        switch (r % 4) {
            case 0: values[r] = bias + s * (code + 0.5f); break;                  // a tie (up to the division)
            case 1: values[r] = bias + s * (unit(rng) * (max_code + 4.0f) - 2.0f); break;  // may clamp
            default: values[r] = std::min(a, b) + unit(rng) * std::abs(a - b); break;
        }
    }
    const float pivot = 0.5f + unit(rng);
    std::vector<float> kernel_values = values, reference_values = values;
    std::vector<float> kernel_errors(values.size(), -1.0f), reference_errors(values.size(), -2.0f);
    std::vector<std::uint8_t> kernel_codes(values.size(), 255), reference_codes(values.size(), 254);
    ptq::gptq_code_column<Bits>(kernel_values.data(), scales.data(), biases.data(), pivot, count, kernel_codes.data(),
                                kernel_errors.data());
    ptq::reference::gptq_code_column<Bits>(reference_values.data(), scales.data(), biases.data(), pivot, count,
                                           reference_codes.data(), reference_errors.data());
    CHECK(kernel_codes == reference_codes);
    for (std::size_t r = 0; r < values.size(); ++r) {
        INFO("Bits = " << Bits << ", count = " << count << ", row " << r);
        const float level_bound = 2 * std::numeric_limits<float>::epsilon() *
                                  (std::abs(scales[r]) * max_code + std::abs(biases[r]) + std::abs(values[r]));
        CHECK(std::abs(kernel_values[r] - reference_values[r]) <= level_bound);
        CHECK(std::abs(kernel_errors[r] - reference_errors[r]) <= 2 * level_bound / pivot);
    }
}

/// A group of Count values: normal, with an outlier, constant stretches, or on the levels' midpoints.
template <int Count>
std::vector<float> clip_group(std::mt19937_64& rng, int kind) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(Count);
    for (float& v : values) v = normal(rng);
    if (kind == 1) values[rng() % Count] = 40.0f * normal(rng);
    if (kind == 2)
        for (int i = 0; i < Count / 2; ++i) values[i] = 0.25f;
    if (kind == 3)
        for (float& v : values) v = 0.5f + static_cast<float>(rng() % 16);
    return values;
}

/// How far the vectorised ranking error may lie from group_squared_error_fast's: the rounding of a
/// Count-term float sum (relative Count * FLT_EPSILON, doubled), plus one rounding of each level, whose
/// s * q + b the compiler may or may not contract to a fused multiply-add in the reference. A level off by
/// at most delta moves the term c e^2 by at most c (2 |e| delta + delta^2); summed, by at most
/// 2 delta sqrt(C * error) + C delta^2 (Cauchy-Schwarz, C = weight_sum, the sum of c).
float ranking_tolerance(int count, int bits, float scale, float bias, float weight_sum, float error) {
    constexpr float eps = std::numeric_limits<float>::epsilon();
    const float max_code = static_cast<float>((1 << bits) - 1);
    const float delta = eps * (std::abs(scale) * max_code + std::abs(bias));
    return 2.0f * static_cast<float>(count) * eps * error + 2.0f * delta * std::sqrt(weight_sum * error) +
           weight_sum * delta * delta;
}

template <int Bits, int Count>
void check_clip_kernels(std::mt19937_64& rng) {
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int trial = 0; trial < 200; ++trial) {
        const std::vector<float> values = clip_group<Count>(rng, trial % 4);
        std::vector<float> weights(Count);
        for (float& c : weights) c = trial % 3 == 0 ? 1.0f : unit(rng) * 5.0f;
        float weight_sum = 0.0f;
        for (float w : weights) weight_sum += w;
        const auto [low, high] = ptq::reference::group_range<Count>(values.data());
        CHECK(ptq::group_range<Count>(values.data()) == std::pair{low, high});
        // candidate ranges as clip search makes them: shrunk from either end
        const float shrink = 0.3f * unit(rng) * (high - low);
        const auto [scale, bias] = lowbit::detail::group_scale_bias<Bits>(low + shrink * unit(rng), high - shrink * unit(rng));
        for (const bool weighted : {false, true}) {
            INFO("Bits = " << Bits << ", Count = " << Count << ", trial " << trial << ", weighted " << weighted);
            const float* c = weighted ? weights.data() : nullptr;
            const float expected = weighted
                ? ptq::group_squared_error_fast<Bits, Count, true, false>(values.data(), c, scale, bias)
                : ptq::group_squared_error_fast<Bits, Count, false, false>(values.data(), c, scale, bias);
            const float actual = weighted ? ptq::group_squared_error_ranking<Bits, Count, true>(values.data(), c, scale, bias)
                                          : ptq::group_squared_error_ranking<Bits, Count, false>(values.data(), c, scale, bias);
            const float sum_of_c = weighted ? weight_sum : static_cast<float>(Count);
            CHECK(std::abs(actual - expected) <= ranking_tolerance(Count, Bits, scale, bias, sum_of_c, expected));
        }
    }
}

template <int Bits>
void check_clip_kernels_all_groups(std::mt19937_64& rng) {
    check_clip_kernels<Bits, 32>(rng);
    check_clip_kernels<Bits, 64>(rng);
    check_clip_kernels<Bits, 128>(rng);
}

}  // namespace

TEST_CASE("clip search's ranking error and group range equal their references", "[ptq][kernels]") {
    auto rng = lowbit::test::make_rng(1400);
    check_clip_kernels_all_groups<2>(rng);
    check_clip_kernels_all_groups<3>(rng);
    check_clip_kernels_all_groups<4>(rng);
    check_clip_kernels_all_groups<5>(rng);
    check_clip_kernels_all_groups<6>(rng);
    check_clip_kernels_all_groups<8>(rng);
}

TEST_CASE("gptq_code_column equals the group_code reference", "[ptq][kernels]") {
    auto rng = lowbit::test::make_rng(1401);
    for (const Eigen::Index count : {1, 7, 16, 17, 64, 100, 512, 1000}) {
        check_code_column<2>(rng, count);
        check_code_column<3>(rng, count);
        check_code_column<4>(rng, count);
        check_code_column<5>(rng, count);
        check_code_column<6>(rng, count);
        check_code_column<8>(rng, count);
    }
}

TEST_CASE("group_column_range is the per-row min and max over the columns", "[ptq][kernels]") {
    auto rng = lowbit::test::make_rng(1402);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const Eigen::Index rows : {1, 5, 33, 512})
        for (const Eigen::Index group : {1, 32, 64, 128}) {
            const Eigen::Index stride = rows + 3;
            std::vector<float> data(static_cast<std::size_t>(stride * group));
            for (float& v : data) v = normal(rng);
            std::vector<float> low(static_cast<std::size_t>(rows)), high(low.size());
            ptq::group_column_range(data.data(), stride, group, rows, low.data(), high.data());
            for (Eigen::Index r = 0; r < rows; ++r) {
                float expected_low = data[static_cast<std::size_t>(r)], expected_high = expected_low;
                for (Eigen::Index c = 1; c < group; ++c) {
                    expected_low = std::min(expected_low, data[static_cast<std::size_t>(c * stride + r)]);
                    expected_high = std::max(expected_high, data[static_cast<std::size_t>(c * stride + r)]);
                }
                CHECK(low[static_cast<std::size_t>(r)] == expected_low);
                CHECK(high[static_cast<std::size_t>(r)] == expected_high);
            }
        }
}

TEST_CASE("inverse_cholesky_upper equals the direct factor of (H + d I)^-1", "[ptq][kernels]") {
    auto rng = lowbit::test::make_rng(1403);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // sizes around the solve's block width (256 columns) so partial and several blocks are covered
    for (const Eigen::Index n : {1, 3, 64, 255, 256, 257, 600}) {
        INFO("n = " << n);
        Eigen::MatrixXf x(n + 8, n);
        for (auto& v : x.reshaped()) v = normal(rng);
        for (Eigen::Index c = 0; c < n; ++c) x.col(c) *= 0.2f + static_cast<float>(c % 7);
        const Eigen::MatrixXf xt = x.transpose();  // materialized: GCC 12 -O1 warns inside Eigen's transposed packing
        const Eigen::MatrixXf h = 2.0f * (xt * x) / static_cast<float>(x.rows());
        const float damping = 0.01f * h.diagonal().mean();
        Eigen::MatrixXf expected, actual, scratch = h;
        REQUIRE(ptq::reference::inverse_cholesky_upper(h, damping, expected));
        const Eigen::VectorXf diagonal = ptq::reverse_hessian(scratch);
        REQUIRE(ptq::inverse_cholesky_upper(scratch, diagonal, damping, actual));
        CHECK(actual.isUpperTriangular());
        CHECK((actual - expected).norm() <= 1e-4f * expected.norm());
        Eigen::MatrixXf damped = h;
        damped.diagonal().array() += damping;
        const Eigen::MatrixXf actual_t = actual.transpose();
        const Eigen::MatrixXf identity = actual_t * (actual * damped);
        CHECK((identity - Eigen::MatrixXf::Identity(n, n)).norm() <= 1e-3f * std::sqrt(static_cast<float>(n)));
    }
}

TEST_CASE("inverse_cholesky_upper fails on a singular H and succeeds after restoring with more damping",
          "[ptq][kernels]") {
    auto rng = lowbit::test::make_rng(1404);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const Eigen::Index n = 300;
    Eigen::MatrixXf x(40, n);  // rank 40 < n: H is singular
    for (auto& v : x.reshaped()) v = normal(rng);
    const Eigen::MatrixXf xt = x.transpose();
    const Eigen::MatrixXf h = xt * x;
    Eigen::MatrixXf scratch = h, upper;
    const Eigen::VectorXf diagonal = ptq::reverse_hessian(scratch);
    const Eigen::MatrixXf reversed_strict_upper = scratch.triangularView<Eigen::StrictlyUpper>();
    // Negative damping makes the factorization fail for sure.
    CHECK_FALSE(ptq::inverse_cholesky_upper(scratch, diagonal, -10.0f * diagonal.maxCoeff(), upper));
    CHECK(Eigen::MatrixXf(scratch.triangularView<Eigen::StrictlyUpper>()) == reversed_strict_upper);
    ptq::restore_reversed_hessian(scratch);
    const float damping = 0.1f * diagonal.mean();
    REQUIRE(ptq::inverse_cholesky_upper(scratch, diagonal, damping, upper));
    Eigen::MatrixXf expected;
    REQUIRE(ptq::reference::inverse_cholesky_upper(h, damping, expected));
    CHECK((upper - expected).norm() <= 1e-3f * expected.norm());
}
