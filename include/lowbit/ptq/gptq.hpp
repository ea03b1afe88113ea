// gptq: MLX-format quantization that minimises the layer's output error on calibration inputs,
// ||X W^T - X W_hat^T||^2, by GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers", 2022): columns are quantized in order and each column's rounding
// error is spread over the columns not yet quantized through the upper Cholesky factor U of H^-1,
// H = 2 X^T X / samples + damping.
//
//   for each block of B columns [i1, i2):            (lazy: the rest of W is updated once per block)
//       for j in [i1, i2):
//           if j starts a group: s, b per row from W[:, j : j+G] (MLX's min-max rule, or clip search)
//           q = code(W[:, j]); e = (W[:, j] - w_hat) / U[j, j]
//           W[:, j+1 : i2] -= e U[j, j+1 : i2];  E[:, j - i1] = e
//       W[:, i2 :] -= E U[i1 : i2, i2 :]             (one GEMM)
//
// No act-order: GPTQ's reordering of columns by decreasing H[j, j] would need a column permutation that
// MLX's format cannot express (a runtime would have to permute the activations), so columns go in order.
// Inputs that never fire (H[j, j] = 0) get H[j, j] = 1 and their weights set to 0 before quantizing
// (they meet zero inputs, so the output does not change). U is computed without inverting H: with P the
// reversal permutation and P H P = L L^T, U = P L^-1 P (detail/ptq/gptq_factor.hpp: L in place, L^-1
// on the trailing triangle only, n^3 / 3 flops each).
//
// Layout: each row of W is quantized independently given U, so rows go in panels of 512, each copied
// column-major (a column contiguous): the per-column coding (detail/ptq/gptq_column.hpp) and the in-block
// rank-1 updates run on a 512 x block slice that stays in cache, and the lazy update is one GEMM per
// block; the column's levels overwrite it, so the panel ends as W_hat's rows. On 4096 x 4096 with 512
// calibration rows, at 1 thread, the work is about 160 GFLOP of Eigen GEMM-shaped products: H (9),
// the Cholesky factor and L^-1 (23 + 23), the lazy updates (69) and, with keep_better_of_rtn, the
// output errors of GPTQ and RTN rows (2 x 17).
#pragma once

#include "../detail/config.hpp"
#include "../errors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "../detail/mlx_affine/quantize.hpp"
#include "../detail/ptq/calibration.hpp"
#include "../detail/ptq/gptq_column.hpp"
#include "../detail/ptq/gptq_factor.hpp"
#include "../detail/ptq/group_fit.hpp"
#include "../quantized_matrix.hpp"
#include "clip_search.hpp"
#include "options.hpp"

LOWBIT_BEGIN_NAMESPACE

/// What gptq did beyond the result.
struct GptqReport {
    float damping = 0;           ///< the relative damping used (options.damping, or raised after a failed Cholesky)
    int dead_inputs = 0;         ///< inputs with H[j, j] = 0 (weights zeroed)
    int rows_kept_rtn = 0;       ///< rows where RTN's output error was lower and RTN's row was kept
    double output_error = 0;     ///< sum over rows of ||X (w - w_hat)||^2 / samples of the result (when computed)
    double rtn_output_error = 0; ///< the same for MLX's RTN (when computed)
};

namespace detail::ptq {

inline void check_options(const char* function, const GptqOptions& options) {
    if (!(options.damping >= 0.0f && std::isfinite(options.damping)))
        throw std::invalid_argument(std::string(function) + ": GptqOptions::damping = " + float_text(options.damping) +
                                    " must be finite and >= 0");
    if (options.block_size < 1)
        throw std::invalid_argument(std::string(function) + ": GptqOptions::block_size = " +
                                    std::to_string(options.block_size) + " must be >= 1");
    if (options.damping_retries < 0)
        throw std::invalid_argument(std::string(function) + ": GptqOptions::damping_retries = " +
                                    std::to_string(options.damping_retries) + " must be >= 0");
    if (options.clip_groups) check_options(function, options.clip);
}

/// H = 2 X^T X / samples [in, in] (full symmetric), x already checked and rescaled (scaled_calibration).
inline Eigen::MatrixXf gptq_hessian(const Eigen::Ref<const Eigen::MatrixXf>& x) {
    const Eigen::MatrixXf xt = x.transpose();
    Eigen::MatrixXf h = Eigen::MatrixXf::Zero(x.cols(), x.cols());
    h.selfadjointView<Eigen::Lower>().rankUpdate(xt, 2.0f / static_cast<float>(x.rows()));
    h.triangularView<Eigen::StrictlyUpper>() = h.transpose();
    return h;
}

/// Throws the error for a column j whose fed-forward error e = (w - level) / U[j, j] is not finite:
/// weights far beyond their levels (near float's limits) over a small pivot (a large damping).
[[noreturn]] inline void throw_feedback_overflow(const char* function, const Eigen::MatrixXf& errors, Eigen::Index j,
                                                 Eigen::Index i1, Eigen::Index r0, Eigen::Index rows, float pivot) {
    Eigen::Index r = 0;
    while (r + 1 < rows && std::isfinite(errors(r, j - i1))) ++r;
    throw numerical_error(std::string(function) + ": row " + std::to_string(r0 + r) + ", column " + std::to_string(j) +
                          ": the error fed forward, (w - level) / U[j, j] with U[j, j] = " + float_text(pivot) +
                          ", is " + float_text(errors(r, j - i1)) +
                          ": the weights are too large for float error feedback at this damping");
}

/// Rows of W processed together: GPTQ treats every row independently given U, so the column sweep runs
/// on a panel of rows at a time, whose in-block updates stay in cache (512 rows x 128 columns = 256 KiB).
inline constexpr Eigen::Index gptq_panel_rows = 512;

/// GPTQ on weights [out, in] with H [in, in] of the rescaled inputs (undamped; used as scratch);
/// calibration.x [samples, in] for the RTN comparison (may be empty: then the comparison is skipped), its
/// error_unit turning the reported errors back into the inputs' units. Arguments already checked.
template <int GroupSize, int Bits>
QuantizedMatrix<GroupSize, Bits> gptq_with_hessian(
    const char* function, const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>>& weights, Eigen::MatrixXf h,
    const ScaledCalibration& calibration, const GptqOptions& options, GptqReport* report) {
    const Eigen::MatrixXf& x = calibration.x;
    const QuantizedMatrix<GroupSize, Bits> rtn = quantize_named<MlxAffine<GroupSize, Bits>>(function, weights);
    const Eigen::Index rows = weights.rows(), cols = weights.cols();
    GptqReport found;
    std::vector<bool> dead(static_cast<std::size_t>(cols), false);
    for (Eigen::Index j = 0; j < cols; ++j)
        if (h(j, j) == 0.0f) {
            h(j, j) = 1.0f;
            dead[static_cast<std::size_t>(j)] = true;
            ++found.dead_inputs;
        }
    const float mean_diagonal = h.diagonal().mean();
    // U = P L^-1 P with P H P = L L^T (P: reversal): the upper Cholesky factor of H^-1 (gptq_factor.hpp).
    Eigen::MatrixXf upper;
    float damping = options.damping;
    const Eigen::VectorXf diagonal = reverse_hessian(h);
    for (int attempt = 0;; ++attempt) {
        if (inverse_cholesky_upper(h, diagonal, damping * mean_diagonal, upper)) break;
        if (attempt >= options.damping_retries || !std::isfinite(damping * 10.0f * mean_diagonal))
            throw numerical_error(std::string(function) +
                                  ": H = 2 X^T X / samples is not positive definite even "
                                  "with damping = " +
                                  float_text(damping) + " (relative to mean diag H = " + float_text(mean_diagonal) +
                                  ")");
        restore_reversed_hessian(h);
        damping = damping > 0.0f ? damping * 10.0f : 1e-4f;
    }
    h.resize(0, 0);
    found.damping = damping;

    QuantizedMatrix<GroupSize, Bits> result;
    result.codes.resize(rows, rtn.codes.cols());
    result.scales.resize(rows, cols / GroupSize);
    result.biases.resize(rows, cols / GroupSize);
    // A multiple of the group size, at most the layer's width (never a buffer sized by the option alone).
    const Eigen::Index block = std::min<Eigen::Index>(
        cols, (std::max<Eigen::Index>(options.block_size, GroupSize) + GroupSize - 1) / GroupSize * GroupSize);
    const Eigen::Index panel_rows = std::min(rows, gptq_panel_rows);
    const bool compare = options.keep_better_of_rtn && x.rows() > 0;
    Eigen::MatrixXf work(panel_rows, cols);  // the panel's rows, column-major: GPTQ walks columns
    Eigen::MatrixXf errors(panel_rows, block);
    Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic> codes(panel_rows, cols);
    Eigen::VectorXf scale(panel_rows), bias(panel_rows), low(panel_rows), high(panel_rows);
    std::vector<float> group_values(GroupSize);
    std::vector<std::int32_t> group_codes(GroupSize);
    std::vector<std::uint8_t> row_codes(static_cast<std::size_t>(cols));
    for (Eigen::Index r0 = 0; r0 < rows; r0 += panel_rows) {
        const Eigen::Index p = std::min(panel_rows, rows - r0);
        auto panel = work.topRows(p);
        panel = weights.middleRows(r0, p);
        for (Eigen::Index j = 0; j < cols; ++j)
            if (dead[static_cast<std::size_t>(j)]) panel.col(j).setZero();
        for (Eigen::Index i1 = 0; i1 < cols; i1 += block) {
            const Eigen::Index i2 = std::min(cols, i1 + block);
            for (Eigen::Index j = i1; j < i2; ++j) {
                const Eigen::Index g = j / GroupSize;
                if (j % GroupSize == 0) {
                    group_column_range(&work(0, j), work.outerStride(), GroupSize, p, low.data(), high.data());
                    for (Eigen::Index r = 0; r < p; ++r) {
                        auto [s, b] = group_scale_bias<Bits>(low(r), high(r));
                        if (options.clip_groups) {
                            for (Eigen::Index k = 0; k < GroupSize; ++k) group_values[k] = work(r, j + k);
                            clip_search_group<Bits, GroupSize>(group_values.data(), nullptr, options.clip, s, b,
                                                               group_codes.data());
                        }
                        if (!(std::isfinite(low(r)) && std::isfinite(high(r)) && group_levels_finite<Bits>(s, b)))
                            throw numerical_error(std::string(function) + ": row " + std::to_string(r0 + r) +
                                                  ", group " + std::to_string(g) +
                                                  ": the error-updated weights span [" + float_text(low(r)) + ", " +
                                                  float_text(high(r)) + "], a range too wide for float levels");
                        scale(r) = s;
                        bias(r) = b;
                        result.scales(r0 + r, g) = s;
                        result.biases(r0 + r, g) = b;
                    }
                }
                gptq_code_column<Bits>(&work(0, j), scale.data(), bias.data(), upper(j, j), p, &codes(0, j),
                                       &errors(0, j - i1));
                if (!errors.col(j - i1).head(p).allFinite())
                    throw_feedback_overflow(function, errors, j, i1, r0, p, upper(j, j));
                if (j + 1 < i2)
                    panel.middleCols(j + 1, i2 - j - 1).noalias() -=
                        errors.col(j - i1).head(p) * upper.row(j).segment(j + 1, i2 - j - 1);
            }
            if (i2 < cols)
                panel.rightCols(cols - i2).noalias() -=
                    errors.topLeftCorner(p, i2 - i1) * upper.block(i1, i2, i2 - i1, cols - i2);
        }
        // panel now holds the levels (the dequantized weights)
        for (Eigen::Index r = 0; r < p; ++r) {
            for (Eigen::Index c = 0; c < cols; ++c) row_codes[static_cast<std::size_t>(c)] = codes(r, c);
            pack_row_codes<Bits>(row_codes.data(), static_cast<std::size_t>(cols), &result.codes(r0 + r, 0));
        }
        if (compare) {
            const Eigen::VectorXd gptq_errors = row_output_errors(x, weights.middleRows(r0, p), panel);
            QuantizedMatrix<GroupSize, Bits> rtn_rows;
            rtn_rows.codes = rtn.codes.middleRows(r0, p);
            rtn_rows.scales = rtn.scales.middleRows(r0, p);
            rtn_rows.biases = rtn.biases.middleRows(r0, p);
            const Eigen::VectorXd rtn_errors = row_output_errors(x, weights.middleRows(r0, p), dequantize(rtn_rows));
            for (Eigen::Index r = 0; r < p; ++r) {
                found.rtn_output_error += rtn_errors(r);
                if (rtn_errors(r) < gptq_errors(r)) {
                    result.codes.row(r0 + r) = rtn.codes.row(r0 + r);
                    result.scales.row(r0 + r) = rtn.scales.row(r0 + r);
                    result.biases.row(r0 + r) = rtn.biases.row(r0 + r);
                    found.output_error += rtn_errors(r);
                    ++found.rows_kept_rtn;
                } else {
                    found.output_error += gptq_errors(r);
                }
            }
        }
    }
    found.output_error *= calibration.error_unit;
    found.rtn_output_error *= calibration.error_unit;
    if (report != nullptr) *report = found;
    return result;
}

}  // namespace detail::ptq

/// Quantizes w [out, in] into MLX's format by GPTQ with calibration inputs x [samples, in] (the inputs
/// the layer sees; float, any dense expression): minimises ||X W^T - X W_hat^T||^2 (see the top of this
/// file; options in ptq/options.hpp). With options.keep_better_of_rtn (default) every row's output error
/// on x is at most MLX RTN's. `report`, when given, receives the damping used and the errors.
/// Throws std::invalid_argument for what quantize refuses, x of the wrong width, without rows or with a
/// NaN/Inf (naming row and column), bad options, or an H that stays indefinite after
/// options.damping_retries increases of the damping (x10 each).
template <int GroupSize = 64, int Bits = 4, class DerivedW, class DerivedX>
QuantizedMatrix<GroupSize, Bits> gptq(const Eigen::MatrixBase<DerivedW>& w, const Eigen::MatrixBase<DerivedX>& x,
                                      const GptqOptions& options = {}, GptqReport* report = nullptr) {
    static_assert(std::is_same_v<typename DerivedW::Scalar, float> && std::is_same_v<typename DerivedX::Scalar, float>,
                  "lowbit::gptq takes float matrices");
    constexpr const char* function = "lowbit::gptq";
    detail::ptq::check_options(function, options);
    const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>> weights(w.derived());
    detail::quantize_named<MlxAffine<GroupSize, Bits>>(function,
                                                       weights.topRows(std::min<Eigen::Index>(weights.rows(), 1)));
    detail::ptq::require_calibration(function, x, weights.cols(), 1);
    const detail::ptq::ScaledCalibration calibration = detail::ptq::scaled_calibration(x);
    return detail::ptq::gptq_with_hessian<GroupSize, Bits>(function, weights, detail::ptq::gptq_hessian(calibration.x),
                                                           calibration, options, report);
}

LOWBIT_END_NAMESPACE
