// clip_search: MLX-format quantization whose per-group range is searched, not min-max (ptq/options.hpp
// describes the candidates). Minimises each group's squared weight error, optionally weighted per input
// channel (channel_weights_from_calibration: the mean square of the calibration activations, so the
// weighted error estimates the layer's output error with the inputs treated as uncorrelated).
#pragma once

#include "../detail/config.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "../detail/mlx_affine/quantize.hpp"
#include "../detail/ptq/calibration.hpp"
#include "../detail/ptq/group_error.hpp"
#include "../detail/ptq/group_fit.hpp"
#include "../detail/ptq/group_range.hpp"
#include "../quantized_matrix.hpp"
#include "options.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

inline void check_options(const char* function, const ClipSearchOptions& options) {
    if (options.grid < 1)
        throw std::invalid_argument(std::string(function) + ": ClipSearchOptions::grid = " +
                                    std::to_string(options.grid) + " must be >= 1");
    if (!(options.max_shrink > 0.0f && options.max_shrink <= 0.5f))
        throw std::invalid_argument(std::string(function) + ": ClipSearchOptions::max_shrink = " +
                                    float_text(options.max_shrink) + " must be in (0, 0.5]");
    if (options.refit_rounds < 0)
        throw std::invalid_argument(std::string(function) + ": ClipSearchOptions::refit_rounds = " +
                                    std::to_string(options.refit_rounds) + " must be >= 0");
}

/// Searches one group of Count finite values (weights c or nullptr) starting from (scale, bias), which
/// must be MLX's RTN pair for the group: on return (scale, bias) is the best pair found (never worse
/// than the starting one under the exact error, group_squared_error_fast with group_code's codes),
/// codes holds its codes, and the result is its weighted squared error. Candidates are ranked by the
/// vectorised estimate of group_error.hpp (group_squared_error_ranking).
template <int Bits, int Count>
double clip_search_group(const float* values, const float* weights, const ClipSearchOptions& options, float& scale,
                         float& bias, std::int32_t* codes) {
    constexpr std::size_t count = Count;
    const auto fast_error = [&](float s, float b) {
        return weights != nullptr ? group_squared_error_ranking<Bits, Count, true>(values, weights, s, b)
                                  : group_squared_error_ranking<Bits, Count, false>(values, weights, s, b);
    };
    const auto exact_error = [&](float s, float b, std::int32_t* out) -> double {
        return weights != nullptr ? group_squared_error_fast<Bits, Count, true>(values, weights, s, b, out)
                                  : group_squared_error_fast<Bits, Count, false>(values, weights, s, b, out);
    };
    const float rtn_scale = scale, rtn_bias = bias;
    const auto [low, high] = group_range<Count>(values);
    float best_fast = fast_error(scale, bias);
    const float range = high - low;
    if (range > 0.0f && std::isfinite(range)) {
        const float step = options.max_shrink / static_cast<float>(options.grid) * range;
        float best_low = low, best_high = high;
        const auto consider = [&](float lo, float hi) {
            if (!(lo < hi)) return;
            const auto [s, b] = group_scale_bias<Bits>(lo, hi);
            if (!group_levels_finite<Bits>(s, b)) return;
            const float error = fast_error(s, b);
            if (error < best_fast) {
                best_fast = error;
                scale = s;
                bias = b;
                best_low = lo;
                best_high = hi;
            }
        };
        for (int k = 1; k <= options.grid; ++k) consider(low + k * step, high - k * step);
        const float joint_high = best_high;
        for (int k = 0; k <= options.grid; ++k) consider(low + k * step, joint_high);
        const float chosen_low = best_low;
        for (int k = 0; k <= options.grid; ++k) consider(chosen_low, high - k * step);
    }
    // Weighted least-squares refit of (s, b) to the chosen codes, then re-coding; kept only if better.
    std::array<std::int32_t, 128> trial{};  // count <= 128 (the largest group)
    double best = exact_error(scale, bias, codes);
    if (scale != rtn_scale || bias != rtn_bias) {  // the exact error decides against RTN
        const double rtn = exact_error(rtn_scale, rtn_bias, trial.data());
        if (!(best < rtn)) {
            best = rtn;
            scale = rtn_scale;
            bias = rtn_bias;
            std::copy(trial.begin(), trial.begin() + Count, codes);
        }
    }
    for (int round = 0; round < options.refit_rounds; ++round) {
        double sw = 0, swq = 0, swqq = 0, swv = 0, swqv = 0;
        for (std::size_t i = 0; i < count; ++i) {
            const float c = weights != nullptr ? weights[i] : 1.0f, q = static_cast<float>(codes[i]), v = values[i];
            sw += c; swq += c * q; swqq += c * q * q; swv += c * v; swqv += c * q * v;
        }
        const double determinant = sw * swqq - swq * swq;
        if (!(determinant > 1e-12 * sw * swqq)) break;
        const auto s = static_cast<float>((sw * swqv - swq * swv) / determinant);
        const auto b = static_cast<float>((swqq * swv - swq * swqv) / determinant);
        if (!(s != 0.0f && std::isfinite(s) && std::isfinite(b) && group_levels_finite<Bits>(s, b))) break;
        const double error = exact_error(s, b, trial.data());
        if (!(error < best)) break;
        best = error;
        scale = s;
        bias = b;
        std::copy(trial.begin(), trial.begin() + static_cast<std::ptrdiff_t>(count), codes);
    }
    return best;
}

/// Rewrites every group of q (an RTN quantization of weights) with `improve(row, group, values, codes,
/// scale, bias)`, then repacks the codes. Rows in parallel.
template <int GroupSize, int Bits, class Improve>
void improve_groups(QuantizedMatrix<GroupSize, Bits>& q, const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>>& weights,
                    Improve&& improve) {
    const Eigen::Index rows = q.rows(), cols = q.cols(), groups = cols / GroupSize;
    parallel_for(static_cast<std::size_t>(rows), rows_per_range(cols) / 4 + 1, [&](std::size_t begin, std::size_t end) {
        std::vector<std::int32_t> codes(static_cast<std::size_t>(cols));
        for (std::size_t r = begin; r < end; ++r) {
            const auto row = static_cast<Eigen::Index>(r);
            const float* values = weights.data() + row * weights.outerStride();
            for (Eigen::Index g = 0; g < groups; ++g)
                improve(row, g, values + g * GroupSize, codes.data() + g * GroupSize, q.scales(row, g), q.biases(row, g));
            pack_row_codes<Bits>(codes.data(), static_cast<std::size_t>(cols), &q.codes(row, 0));
        }
    });
}

}  // namespace detail::ptq

/// Per input channel, the mean square of the calibration inputs x [samples, in]: the weights under which
/// a group's squared weight error estimates its share of the output error. Only their ratios matter
/// (clip_search's ranking is invariant under a common scale), so inputs whose largest magnitude lies
/// outside [2^-32, 2^32] are first rescaled by a power of two (detail/ptq/calibration.hpp): the weights
/// are finite for every finite x, and a channel far below the largest (its mean square under float's
/// range once rescaled) gets weight 0. Throws std::invalid_argument for an empty x or a NaN/Inf (naming
/// row and column).
template <class Derived>
Eigen::VectorXf channel_weights_from_calibration(const Eigen::MatrixBase<Derived>& x) {
    detail::ptq::require_calibration("lowbit::channel_weights_from_calibration", x, x.cols(), 1);
    if (x.cols() == 0) throw std::invalid_argument("lowbit::channel_weights_from_calibration: x has no columns");
    const int exponent = detail::ptq::calibration_exponent(x);
    const auto scaled = x.template cast<double>().array() * std::ldexp(1.0, exponent);  // exact: a power of two
    return (scaled.square().colwise().sum() / static_cast<double>(x.rows())).transpose().template cast<float>();
}

/// Quantizes w [out, in] into MLX's format (as quantize) with each group's range searched to minimise the
/// group's squared error sum_i c_i (w_i - w_hat_i)^2, c = channel_weights [in] (all 1 when empty). Each
/// group is never worse than MLX's RTN group under that error. Throws std::invalid_argument for what
/// quantize refuses, channel weights of the wrong size or negative / non-finite, or bad options.
template <int GroupSize = 64, int Bits = 4, class Derived>
QuantizedMatrix<GroupSize, Bits> clip_search(const Eigen::MatrixBase<Derived>& w, const Eigen::VectorXf& channel_weights,
                                             const ClipSearchOptions& options = {}) {
    static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::clip_search takes a float matrix");
    constexpr const char* function = "lowbit::clip_search";
    detail::ptq::check_options(function, options);
    const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>> weights(w.derived());
    QuantizedMatrix<GroupSize, Bits> q = detail::quantize_named<MlxAffine<GroupSize, Bits>>(function, weights);
    if (channel_weights.size() != 0) detail::ptq::require_channel_weights(function, channel_weights, weights.cols());
    const float* channel = channel_weights.size() != 0 ? channel_weights.data() : nullptr;
    detail::ptq::improve_groups(q, weights, [&](Eigen::Index, Eigen::Index g, const float* values, std::int32_t* codes,
                                                float& scale, float& bias) {
        detail::ptq::clip_search_group<Bits, GroupSize>(values, channel != nullptr ? channel + g * GroupSize : nullptr,
                                                        options, scale, bias, codes);
    });
    return q;
}

/// clip_search with every channel weight 1 (plain squared weight error).
template <int GroupSize = 64, int Bits = 4, class Derived>
QuantizedMatrix<GroupSize, Bits> clip_search(const Eigen::MatrixBase<Derived>& w, const ClipSearchOptions& options = {}) {
    return clip_search<GroupSize, Bits>(w, Eigen::VectorXf(), options);
}

LOWBIT_END_NAMESPACE
