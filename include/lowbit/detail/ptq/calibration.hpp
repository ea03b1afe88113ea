// Calibration inputs of the post-training quantizers (ptq/): the argument checks on inputs and channel
// weights, and the power-of-two rescaling that keeps float sums of squares of the inputs (GPTQ's H, the
// output errors, clip search's channel weights) finite and nonzero for any finite inputs.
//
// Every PTQ rule fed by the inputs is invariant under one common positive scale of them: GPTQ's update
// e / U[j, j] * U[j, :] (H scaled by c scales U by 1 / sqrt(c)), its damping relative to mean(diag H),
// the comparison of output errors, and clip search's ranking under channel weights. A power of two 2^k
// multiplies exactly (a value more than 2^149 below the largest may lose bits, and is negligible beside
// it), so the rescaled inputs give the same result as exact arithmetic on the given ones would.
#pragma once

#include "../config.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include <Eigen/Core>

#include "../../matrix_types.hpp"
#include "../checks.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

/// Checks calibration inputs x [samples, in] for a layer with `in` inputs: right width, at least
/// `min_rows` rows, every value finite. Throws std::invalid_argument naming `function` and the value.
template <class Derived>
void require_calibration(const char* function, const Eigen::MatrixBase<Derived>& x, Eigen::Index in,
                         Eigen::Index min_rows) {
    if (x.cols() != in)
        throw std::invalid_argument(std::string(function) + ": calibration inputs are " +
                                    shape_text(x.rows(), x.cols()) + " but the layer has in = " + std::to_string(in) +
                                    " inputs");
    if (x.rows() < min_rows)
        throw std::invalid_argument(std::string(function) + ": " + std::to_string(x.rows()) +
                                    " calibration rows, at least " + std::to_string(min_rows) + " needed");
    for (Eigen::Index r = 0; r < x.rows(); ++r)
        for (Eigen::Index c = 0; c < x.cols(); ++c)
            if (!std::isfinite(x(r, c)))
                throw std::invalid_argument(std::string(function) + ": calibration input at row " + std::to_string(r) +
                                            ", column " + std::to_string(c) + " is " + float_text(x(r, c)));
}

/// Checks per-input-channel weights c [in]: finite and >= 0.
inline void require_channel_weights(const char* function, const Eigen::VectorXf& weights, Eigen::Index in) {
    if (weights.size() != in)
        throw std::invalid_argument(std::string(function) + ": channel weights have " + std::to_string(weights.size()) +
                                    " values for in = " + std::to_string(in));
    for (Eigen::Index i = 0; i < weights.size(); ++i)
        if (!(std::isfinite(weights(i)) && weights(i) >= 0.0f))
            throw std::invalid_argument(std::string(function) + ": channel weight " + std::to_string(i) + " = " +
                                        float_text(weights(i)) + " must be finite and >= 0");
}

/// The exponent k of the power of two 2^k the PTQ methods multiply checked calibration inputs by: 0 while
/// max|x| lies in [2^-32, 2^32] (ordinary inputs are used as given, bit for bit), else the k that brings
/// max|x| into [1, 2). After it a column's sum of squares over n samples is below n * 2^65, finite for
/// any n < 2^62, and the largest input's square is a normal float.
template <class Derived>
int calibration_exponent(const Eigen::MatrixBase<Derived>& x) {
    if (x.size() == 0) return 0;
    const float largest = x.cwiseAbs().maxCoeff();
    if (largest == 0.0f || (largest >= 0x1p-32f && largest <= 0x1p32f)) return 0;
    return -std::ilogb(largest);
}

/// Calibration inputs as the PTQ methods use them: x * 2^k (k = calibration_exponent(x)), and the factor
/// 2^-2k that turns a squared output error computed on them back into x's units.
struct ScaledCalibration {
    Eigen::MatrixXf x;
    double error_unit = 1.0;
};

/// x (checked: finite) rescaled by calibration_exponent; a plain copy when the exponent is 0.
template <class Derived>
ScaledCalibration scaled_calibration(const Eigen::MatrixBase<Derived>& x) {
    const int exponent = calibration_exponent(x);
    if (exponent == 0) return {x.template cast<float>(), 1.0};
    // In double: 2^k itself may lie outside float's range (k up to 149), the product does not.
    return {(x.template cast<double>() * std::ldexp(1.0, exponent)).template cast<float>(),
            std::ldexp(1.0, -2 * exponent)};
}

/// Per row r, ||x (a_r - b_r)^T||^2 / samples for weights a, b [out, in] and inputs x [samples, in]: the
/// output error of replacing weight a by b. The difference and the product run in float; where either
/// overflows (weights and inputs near float's limits) both are computed again in double, so every error
/// that a double holds comes out finite.
template <class DerivedA, class DerivedB>
Eigen::VectorXd row_output_errors(const Eigen::Ref<const Eigen::MatrixXf>& x, const Eigen::MatrixBase<DerivedA>& a,
                                  const Eigen::MatrixBase<DerivedB>& b) {
    const Eigen::MatrixXf difference = a - b;
    const Eigen::MatrixXf outputs = difference * x.transpose();  // [out, samples]
    const auto samples = static_cast<double>(x.rows());
    if (outputs.allFinite()) return outputs.cast<double>().rowwise().squaredNorm() / samples;
    const Eigen::MatrixXd exact = a.template cast<double>() - b.template cast<double>();
    return (exact * x.cast<double>().transpose()).rowwise().squaredNorm() / samples;
}

}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
