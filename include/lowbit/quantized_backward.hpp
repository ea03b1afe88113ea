// Gradients through the quantized product y = x * dequantize(q)^T with q's codes frozen
// (docs/numerics.md N20): with respect to x, computed on the packed codes (detail/gemm/f32_dx.hpp),
// and with respect to each group's scale and bias (the parameters QLoRA-style fine-tuning and scale /
// bias distillation train). A NaN or Inf in dy propagates into the gradients, as in the forward.
#pragma once

#include "detail/config.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "detail/checks.hpp"
#include "detail/dispatch/formats.hpp"
#include "detail/mlx_affine/packing_reference.hpp"
#include "matrix_types.hpp"
#include "quantized_linear.hpp"
#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

/// dy * dequantize(q) as RowMatrixXf [M, in] for dy [M, out] (any float dense expression; copied only
/// if not row-major): the gradient of quantized_matmul(x, q) with respect to x, computed on the packed
/// codes without forming the float weights: per input, sum over weight rows of fl(dy * s) * q plus, with
/// biases, sum of dy * b (f32, within lowbit's sqrt(N) bound of the float product). Threads:
/// lowbit::num_threads() at M = 1. dy with no rows gives [0, in]. Throws std::invalid_argument for
/// dy.cols() != q.rows(), or inconsistent q.
template <class Derived, class Format>
RowMatrixXf quantized_matmul_dx(const Eigen::MatrixBase<Derived>& dy, const QuantizedMatrixOf<Format>& q) {
    static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::quantized_matmul_dx takes a float dy");
    constexpr const char* function = "lowbit::quantized_matmul_dx";
    q.check_shapes(function);
    const detail::RowMatrixRef grad(dy.derived());
    if (grad.cols() != q.rows())
        throw std::invalid_argument(std::string(function) + ": dy is " + detail::shape_text(grad.rows(), grad.cols()) +
                                    " but the quantized matrix is " + detail::shape_text(q.rows(), q.cols()) +
                                    " (dy's last dimension must be " + std::to_string(q.rows()) + ")");
    RowMatrixXf dx(grad.rows(), q.cols());
    if (grad.rows() == 0) return dx;
    detail::FormatKernels<Format>::matmul_dx(grad.data(), grad.outerStride(), grad.rows(), q.view(), dx.data(),
                                             dx.cols());
    return dx;
}

/// The gradients of quantized_matmul(x, q) with respect to q's group parameters, [out, groups] each.
struct QuantizedParameterGrads {
    /// scales(n, g) = sum_m dy(m, n) * sum_{k in g} x(m, k) * q(n, k), q the code's value
    /// (Format::value): the gradient with respect to the group's scale as the kernels apply it
    /// (Format::group_scale; for the float formats the decoded scale, not its stored byte).
    RowMatrixXf scales;
    /// biases(n, g) = sum_m dy(m, n) * sum_{k in g} x(m, k); no columns in a format without biases.
    RowMatrixXf biases;
};

/// QuantizedParameterGrads of y = quantized_matmul(x, q) for x [M, in] and dy [M, out] (any float dense
/// expressions). Per group, the inner sums over k are one float matrix product (Eigen's) of x's group
/// columns with the codes' values, then weighted by dy and summed over m in float (N20). Throws
/// std::invalid_argument for x.cols() != q.cols(), dy.cols() != q.rows(), x.rows() != dy.rows(), or
/// inconsistent q.
template <class DerivedX, class DerivedDy, class Format>
QuantizedParameterGrads quantized_matmul_parameter_grads(const Eigen::MatrixBase<DerivedX>& x,
                                                         const Eigen::MatrixBase<DerivedDy>& dy,
                                                         const QuantizedMatrixOf<Format>& q) {
    static_assert(std::is_same_v<typename DerivedX::Scalar, float> && std::is_same_v<typename DerivedDy::Scalar, float>,
                  "lowbit::quantized_matmul_parameter_grads takes float x and dy");
    constexpr const char* function = "lowbit::quantized_matmul_parameter_grads";
    constexpr int GroupSize = Format::group_size;
    q.check_shapes(function);
    const detail::RowMatrixRef input(x.derived()), grad(dy.derived());
    if (input.cols() != q.cols() || grad.cols() != q.rows() || input.rows() != grad.rows())
        throw std::invalid_argument(std::string(function) + ": x is " + detail::shape_text(input.rows(), input.cols()) +
                                    " and dy is " + detail::shape_text(grad.rows(), grad.cols()) +
                                    " but the quantized matrix is " + detail::shape_text(q.rows(), q.cols()) +
                                    " (x must be [M, " + std::to_string(q.cols()) + "] and dy [M, " +
                                    std::to_string(q.rows()) + "])");
    const Eigen::Index N = q.rows(), groups = q.cols() / GroupSize;
    QuantizedParameterGrads grads{RowMatrixXf::Zero(N, groups), RowMatrixXf::Zero(N, Format::has_biases ? groups : 0)};
    if (input.rows() == 0) return grads;
    RowMatrixXf values(N, GroupSize);
    std::vector<std::uint8_t> codes(GroupSize);
    for (Eigen::Index g = 0; g < groups; ++g) {
        for (Eigen::Index n = 0; n < N; ++n) {
            detail::kernels::unpack_codes<Format::bits>(&q.codes(n, g * Format::words_per_group), GroupSize,
                                                        codes.data());
            for (int k = 0; k < GroupSize; ++k) values(n, k) = Format::value(codes[static_cast<std::size_t>(k)]);
        }
        const auto x_group = input.middleCols(g * GroupSize, GroupSize);
        const RowMatrixXf x_dot_q = x_group * values.transpose();  // [M, N]
        grads.scales.col(g) = (grad.array() * x_dot_q.array()).colwise().sum().transpose();
        if constexpr (Format::has_biases) grads.biases.col(g) = grad.transpose() * x_group.rowwise().sum();
    }
    return grads;
}

LOWBIT_END_NAMESPACE
