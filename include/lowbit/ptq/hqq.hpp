// hqq: calibration-free MLX-format quantization in the style of HQQ (Badri & Shaji, "Half-Quadratic
// Quantization of Large Machine Learning Models", 2023): each group's bias is optimised for the lp error
// sum |w - w_hat|^p with p < 1, which lets outliers keep their error and fits the bulk of the group,
// by half-quadratic splitting (the rounds are described at HqqOptions in ptq/options.hpp). The scale
// stays MLX's RTN scale.
#pragma once

#include "../detail/config.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <Eigen/Core>

#include "../detail/mlx_affine/quantize.hpp"
#include "../detail/ptq/group_fit.hpp"
#include "clip_search.hpp"
#include "options.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

inline void check_options(const char* function, const HqqOptions& options) {
    if (!(options.p > 0.0f && options.p < 1.0f))
        throw std::invalid_argument(std::string(function) + ": HqqOptions::p = " + float_text(options.p) +
                                    " must be in (0, 1)");
    if (options.iterations < 1)
        throw std::invalid_argument(std::string(function) + ": HqqOptions::iterations = " +
                                    std::to_string(options.iterations) + " must be >= 1");
    if (!(options.beta > 0.0f && std::isfinite(options.beta)))
        throw std::invalid_argument(std::string(function) + ": HqqOptions::beta = " + float_text(options.beta) +
                                    " must be finite and > 0");
    if (!(options.kappa >= 1.0f && std::isfinite(options.kappa)))
        throw std::invalid_argument(std::string(function) + ": HqqOptions::kappa = " + float_text(options.kappa) +
                                    " must be finite and >= 1");
}

/// HQQ rounds on one group of Count values from (scale, bias) = MLX's RTN pair; bias becomes the best
/// bias seen by lp error (RTN's included) and codes its codes. One |e|^p per value and round: the round
/// that codes with the current bias also measures its lp error and, from |e|^p / |e| = |e|^(p-1), shrinks.
template <int Bits, int Count>
void hqq_group(const float* values, const HqqOptions& options, float scale, float& bias, std::int32_t* codes) {
    static_assert(Count % 8 == 0, "lowbit: the group loops run in 8 lanes");
    constexpr float max_code = static_cast<float>((1 << Bits) - 1);
    float best = std::numeric_limits<float>::infinity(), previous = best;
    float best_bias = bias, current = bias, beta = options.beta;
    for (int round = 0; round <= options.iterations; ++round) {
        float error_lanes[8] = {}, sum_lanes[8] = {};
        const float inverse_beta = 1.0f / beta;
        for (int i = 0; i < Count; i += 8)
            for (int k = 0; k < 8; ++k) {
                const float v = values[i + k];
                const float q = round_small_nonnegative(std::min(std::max((v - current) / scale, 0.0f), max_code));
                const float base = v - scale * q;
                const float error = base - current;
                const float magnitude = std::abs(error);
                const float power = abs_pow(error, options.p);  // |e|^p
                error_lanes[k] += power;
                // shrink_p(e) = sign(e) * max(|e| - |e|^(p-1) / beta, 0), |e|^(p-1) = |e|^p / |e|; e = 0 gives 0
                const float denominator = std::max(magnitude, std::numeric_limits<float>::min());
                const float shrunk = std::max(magnitude - power / denominator * inverse_beta, 0.0f);
                sum_lanes[k] += base - std::copysign(shrunk, error);
            }
        const float error = ((error_lanes[0] + error_lanes[1]) + (error_lanes[2] + error_lanes[3])) +
                            ((error_lanes[4] + error_lanes[5]) + (error_lanes[6] + error_lanes[7]));
        if (error < best) {
            best = error;
            best_bias = current;
        }
        if (round == options.iterations || error > previous) break;  // HQQ's early stop
        previous = error;
        const float sum = ((sum_lanes[0] + sum_lanes[1]) + (sum_lanes[2] + sum_lanes[3])) +
                          ((sum_lanes[4] + sum_lanes[5]) + (sum_lanes[6] + sum_lanes[7]));
        const float next = sum / static_cast<float>(Count);  // b = mean(w - W_e - s q)
        if (!(std::isfinite(next) && group_levels_finite<Bits>(scale, next))) break;
        current = next;
        beta *= options.kappa;
    }
    bias = best_bias;
    for (int i = 0; i < Count; ++i) codes[i] = static_cast<std::int32_t>(group_code<Bits>(values[i], scale, bias));
}

}  // namespace detail::ptq

/// Quantizes w [out, in] into MLX's format (as quantize) with each group's bias optimised by HQQ-style
/// half-quadratic rounds for the lp error sum |w - w_hat|^p (options.p < 1); no calibration data. The
/// scale is MLX's; each group is never worse than MLX's RTN group under the lp error (computed with a
/// polynomial |x|^p, relative error below 1e-5). Throws std::invalid_argument for what quantize refuses
/// or bad options (naming the field).
template <int GroupSize = 64, int Bits = 4, class Derived>
QuantizedMatrix<GroupSize, Bits> hqq(const Eigen::MatrixBase<Derived>& w, const HqqOptions& options = {}) {
    static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::hqq takes a float matrix");
    constexpr const char* function = "lowbit::hqq";
    detail::ptq::check_options(function, options);
    const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>> weights(w.derived());
    QuantizedMatrix<GroupSize, Bits> q = detail::quantize_named<MlxAffine<GroupSize, Bits>>(function, weights);
    detail::ptq::improve_groups(q, weights, [&](Eigen::Index, Eigen::Index, const float* values, std::int32_t* codes,
                                                float& scale, float& bias) {
        detail::ptq::hqq_group<Bits, GroupSize>(values, options, scale, bias, codes);
    });
    return q;
}

LOWBIT_END_NAMESPACE
