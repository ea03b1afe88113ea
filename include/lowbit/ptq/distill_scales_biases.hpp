// distill_scales_biases: a quantized layer's group scales and biases fitted to a float layer's outputs on
// calibration inputs, the codes frozen (the layer-wise, closed-form optimum of what mlx-lm's DWQ trains
// by gradient descent; docs/numerics.md N13).
//
// For weight row n the layer's output on input row m is linear in the row's 2G parameters (G groups):
//
//   y[m, n] = sum_g s[n,g] * P[m,g]  +  b[n,g] * S[m,g]      P[m,g] = sum_{k in g} x[m,k] q[n,k]
//                                                             S[m,g] = sum_{k in g} x[m,k]
//
// so minimising sum_m (y[m, n] - t[m, n])^2 is a least-squares problem per row, A theta = t with
// A = [P | S] (samples x 2G). It is solved from the normal equations in double with a ridge toward the
// current parameters, (A^T A + lambda I) theta = A^T t + lambda theta_0, lambda = ridge * trace(A^T A) / 2G:
// a direction the inputs leave undetermined (a group of zero inputs, or one whose codes are all equal,
// which makes P a multiple of S) keeps its current value. There the gradient of the squared output
// error (quantized_matmul_parameter_grads' scales and biases of dy = 2 (y - t)) is zero up to the ridge,
// the point DwqLinear's training converges to on the same objective.
#pragma once

#include "../detail/config.hpp"

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "../detail/checks.hpp"
#include "../detail/mlx_affine/packing.hpp"
#include "../detail/mlx_affine/quantize.hpp"
#include "../detail/ptq/calibration.hpp"
#include "../detail/threading/parallel.hpp"
#include "../quantized_matrix.hpp"
#include "options.hpp"

LOWBIT_BEGIN_NAMESPACE

/// q with each row's group scales and biases refitted so that x * dequantize(result)^T is closest to
/// `targets` in squared error, the codes unchanged (see the top of this file). x [samples, in] are the
/// layer's calibration inputs, targets [samples, out] what the layer should output on them (without its
/// float bias; typically x_float * W^T, the float layer's product on the inputs the float model gives
/// it, or x * W^T). A row whose fitted parameters would give a non-finite level keeps its current
/// ones. Rows in parallel (lowbit::num_threads()); the result does not depend on the thread count.
/// Throws std::invalid_argument for x or targets of the wrong shape, no rows, a NaN or Inf in either,
/// or options.ridge outside [0, 1].
template <int GroupSize, int Bits>
QuantizedMatrix<GroupSize, Bits> distill_scales_biases(const QuantizedMatrix<GroupSize, Bits>& q, const RowMatrixXf& x,
                                                       const RowMatrixXf& targets,
                                                       const ScaleBiasDistillOptions& options = {}) {
    using Format = MlxAffine<GroupSize, Bits>;
    constexpr const char* function = "lowbit::distill_scales_biases";
    q.check_shapes(function);
    detail::ptq::require_calibration(function, x, q.cols(), 1);
    if (targets.rows() != x.rows() || targets.cols() != q.rows())
        throw std::invalid_argument(std::string(function) + ": targets are " +
                                    detail::shape_text(targets.rows(), targets.cols()) + " but must be [" +
                                    std::to_string(x.rows()) + ", " + std::to_string(q.rows()) +
                                    "] (x's rows, the layer's outputs)");
    for (Eigen::Index r = 0; r < targets.rows(); ++r)
        for (Eigen::Index c = 0; c < targets.cols(); ++c)
            if (!std::isfinite(targets(r, c)))
                throw std::invalid_argument(std::string(function) + ": targets(" + std::to_string(r) + ", " +
                                            std::to_string(c) + ") = " + detail::float_text(targets(r, c)) +
                                            " is not finite");
    if (!(options.ridge >= 0.0 && options.ridge <= 1.0))
        throw std::invalid_argument(std::string(function) + ": ScaleBiasDistillOptions::ridge = " +
                                    std::to_string(options.ridge) + " must lie in [0, 1]");

    const Eigen::Index rows = q.rows(), groups = q.cols() / GroupSize, samples = x.rows(), unknowns = 2 * groups;
    // S[m, g]: the group sums of x, shared by every row.
    Eigen::MatrixXd group_sums(samples, groups);
    for (Eigen::Index g = 0; g < groups; ++g)
        group_sums.col(g) = x.middleCols(g * GroupSize, GroupSize).rowwise().sum().cast<double>();
    const Eigen::MatrixXd sums_gram = group_sums.transpose() * group_sums;

    QuantizedMatrix<GroupSize, Bits> result = q;
    detail::parallel_for(static_cast<std::size_t>(rows), 1, [&](std::size_t begin, std::size_t end) {
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(q.cols()));
        Eigen::MatrixXf values(q.cols(), 1);
        Eigen::MatrixXd products(samples, groups), gram(unknowns, unknowns);
        Eigen::VectorXd right(unknowns), current(unknowns);
        for (auto n = static_cast<Eigen::Index>(begin); n < static_cast<Eigen::Index>(end); ++n) {
            detail::kernels::unpack_codes<Bits>(&q.codes(n, 0), static_cast<std::size_t>(q.cols()), codes.data());
            for (Eigen::Index k = 0; k < q.cols(); ++k)
                values(k, 0) = Format::value(codes[static_cast<std::size_t>(k)]);
            for (Eigen::Index g = 0; g < groups; ++g)  // P[:, g] = x_g * q_g, in float (Eigen), then double
                products.col(g) = (x.middleCols(g * GroupSize, GroupSize) * values.middleRows(g * GroupSize, GroupSize))
                                      .cast<double>();
            const Eigen::VectorXd target = targets.col(n).cast<double>();
            gram.topLeftCorner(groups, groups) = products.transpose() * products;
            gram.topRightCorner(groups, groups) = products.transpose() * group_sums;
            gram.bottomLeftCorner(groups, groups) = gram.topRightCorner(groups, groups).transpose();
            gram.bottomRightCorner(groups, groups) = sums_gram;
            right.head(groups) = products.transpose() * target;
            right.tail(groups) = group_sums.transpose() * target;
            for (Eigen::Index g = 0; g < groups; ++g) {
                current(g) = q.scales(n, g);
                current(groups + g) = q.biases(n, g);
            }
            const double lambda = options.ridge * gram.trace() / static_cast<double>(unknowns);
            if (!(lambda > 0.0)) continue;  // no input reaches this layer: nothing to fit
            gram.diagonal().array() += lambda;
            right += lambda * current;
            const Eigen::VectorXd fitted = gram.ldlt().solve(right);
            bool finite = fitted.allFinite();
            for (Eigen::Index g = 0; finite && g < groups; ++g)
                finite = detail::group_levels_finite<Bits>(static_cast<float>(fitted(g)),
                                                           static_cast<float>(fitted(groups + g)));
            if (!finite) continue;
            for (Eigen::Index g = 0; g < groups; ++g) {
                result.scales(n, g) = static_cast<float>(fitted(g));
                result.biases(n, g) = static_cast<float>(fitted(groups + g));
            }
        }
    });
    return result;
}

/// distill_scales_biases with targets = x * weight^T: the float layer's own product on the same inputs.
/// Throws as it does, and for a weight of another shape than q.
template <int GroupSize, int Bits>
QuantizedMatrix<GroupSize, Bits> distill_scales_biases_to(const QuantizedMatrix<GroupSize, Bits>& q,
                                                          const RowMatrixXf& weight, const RowMatrixXf& x,
                                                          const ScaleBiasDistillOptions& options = {}) {
    if (weight.rows() != q.rows() || weight.cols() != q.cols())
        throw std::invalid_argument("lowbit::distill_scales_biases_to: weight is " +
                                    detail::shape_text(weight.rows(), weight.cols()) + " but q is " +
                                    detail::shape_text(q.rows(), q.cols()));
    detail::ptq::require_calibration("lowbit::distill_scales_biases_to", x, q.cols(), 1);
    return distill_scales_biases(q, x, RowMatrixXf(x * weight.transpose()), options);
}

LOWBIT_END_NAMESPACE
