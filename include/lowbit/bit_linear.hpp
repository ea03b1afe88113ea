// BitLinear: the BitNet b1.58 linear layer for training (docs/numerics.md N8, N14).
//
// Holds float master weights W [out, in] and an optional bias [out]; the caller's optimiser updates them
// from the gradients of backward(). forward(x [M, in]) -> [M, out]:
//   weights      t, gamma = quantize_ternary_per_tensor(W)  (absmean, R half away from zero), or per
//                group of 64 inputs (quantize_ternary(W, 64)) in the per-group mode
//   activations  xq, a = quantize_activations_int8(x)       (per token absmax / 127)
//   output       isum = sum_k t[n,k] xq[m,k] (exact, int32), then TernaryLinear's arithmetic:
//                per tensor y = fma(fl(float(isum) * gamma), a[m], bias[n]); per group the fma chain
//                over the groups (ternary_linear.hpp), so deploy()'s TernaryLinear gives the same bits.
// backward(x, grad_output [M, out]) uses the straight-through estimators (ste_backward, the identity)
// through both quantizers, i.e. the gradients of y = x^ w^T + b with x^ = a xq and w^ = gamma t:
//   input = grad_output * w^  [M, in],  weight = grad_output^T * x^  [out, in],  bias = column sums [out].
// Errors (std::invalid_argument naming the value): NaN or infinite weights, bias or inputs, shapes that
// disagree, in not a multiple of 64 in the per-group mode, in > 2^22.
#pragma once

#include "detail/config.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include <Eigen/Core>

#include "bitnet.hpp"
#include "detail/checks.hpp"
#include "detail/ternary/reference.hpp"
#include "matrix_types.hpp"
#include "ternary_linear.hpp"

LOWBIT_BEGIN_NAMESPACE

/// How BitLinear scales its ternary weights.
enum class TernaryScales {
    per_tensor,  ///< one absmean for the whole matrix (the paper)
    per_group,   ///< one absmean per 64 consecutive inputs of a row (bitnet-quantize's default)
};

/// Gradients of BitLinear::backward.
struct BitLinearGradients {
    RowMatrixXf input;     ///< [M, in]
    RowMatrixXf weight;    ///< [out, in]
    Eigen::VectorXf bias;  ///< [out]; empty when the layer has no bias
};

class BitLinear {
public:
    static constexpr int group_size = TernaryLinear::group_size;

    /// weight [out, in] (finite), bias [out] or none. Throws as the header says.
    explicit BitLinear(RowMatrixXf weight, std::optional<Eigen::VectorXf> bias = std::nullopt,
                       TernaryScales scales = TernaryScales::per_tensor)
        : weight_(std::move(weight)), bias_(std::move(bias)), scales_(scales) {
        constexpr const char* function = "lowbit::BitLinear";
        if (weight_.size() == 0)
            throw std::invalid_argument(std::string(function) + ": empty weight " +
                                        detail::shape_text(weight_.rows(), weight_.cols()));
        if (weight_.cols() > detail::ternary::max_cols)
            throw std::invalid_argument(std::string(function) + ": in = " + std::to_string(weight_.cols()) +
                                        " exceeds " + std::to_string(detail::ternary::max_cols));
        if (scales_ == TernaryScales::per_group && weight_.cols() % group_size != 0)
            throw std::invalid_argument(std::string(function) + ": in = " + std::to_string(weight_.cols()) +
                                        " is not a multiple of the group size 64");
        if (bias_ && bias_->size() != weight_.rows())
            throw std::invalid_argument(std::string(function) + ": bias has " + std::to_string(bias_->size()) +
                                        " elements, out = " + std::to_string(weight_.rows()));
    }

    Eigen::Index in_features() const { return weight_.cols(); }
    Eigen::Index out_features() const { return weight_.rows(); }
    TernaryScales scales() const { return scales_; }
    /// The master weights, for the optimiser.
    RowMatrixXf& weight() { return weight_; }
    const RowMatrixXf& weight() const { return weight_; }
    /// The bias (none when the layer was built without one).
    std::optional<Eigen::VectorXf>& bias() { return bias_; }
    const std::optional<Eigen::VectorXf>& bias() const { return bias_; }

    /// The ternary codes and scales of the current master weights.
    TernaryWeights ternary_weights() const {
        return scales_ == TernaryScales::per_tensor ? quantize_ternary_per_tensor(weight_)
                                                    : quantize_ternary(weight_, group_size);
    }

    /// y [M, out] of x [M, in] (header).
    template <class Derived>
    RowMatrixXf forward(const Eigen::DenseBase<Derived>& x) const {
        constexpr const char* function = "lowbit::BitLinear::forward";
        require_input(function, x.rows(), x.cols());
        if (x.rows() == 0) return RowMatrixXf(0, out_features());
        const TernaryWeights w = ternary_weights();
        require_finite_bias(function);
        const Int8Activations xq = quantize_activations_int8(x);
        const Eigen::Index M = x.rows(), N = out_features(), K = in_features();
        using IntMatrix = Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        const IntMatrix x_codes = xq.codes.cast<std::int32_t>();
        const IntMatrix w_codes = w.codes.cast<std::int32_t>();
        RowMatrixXf y(M, N);
        if (w.per_tensor) {
            const IntMatrix isum = x_codes * w_codes.transpose();
            for (Eigen::Index m = 0; m < M; ++m)
                for (Eigen::Index n = 0; n < N; ++n)
                    y(m, n) = detail::ternary::ternary_output_per_tensor(isum(m, n), w.scales(0, 0), xq.scales(m),
                                                                         bias_at(n));
        } else {
            const Eigen::Index groups = K / group_size;
            std::vector<IntMatrix> isums;  // [groups] of [M, N]
            for (Eigen::Index g = 0; g < groups; ++g)
                isums.push_back(x_codes.middleCols(g * group_size, group_size) *
                                w_codes.middleCols(g * group_size, group_size).transpose());
            std::vector<std::int32_t> isum(static_cast<std::size_t>(groups));
            for (Eigen::Index m = 0; m < M; ++m)
                for (Eigen::Index n = 0; n < N; ++n) {
                    for (Eigen::Index g = 0; g < groups; ++g)
                        isum[static_cast<std::size_t>(g)] = isums[static_cast<std::size_t>(g)](m, n);
                    y(m, n) = detail::ternary::ternary_output_per_group(isum.data(), &w.scales(n, 0), groups,
                                                                        xq.scales(m), bias_at(n));
                }
        }
        return y;
    }

    /// Gradients for x [M, in] and grad_output [M, out] (header).
    template <class DerivedX, class DerivedG>
    BitLinearGradients backward(const Eigen::DenseBase<DerivedX>& x,
                                const Eigen::DenseBase<DerivedG>& grad_output) const {
        constexpr const char* function = "lowbit::BitLinear::backward";
        require_input(function, x.rows(), x.cols());
        if (grad_output.rows() != x.rows() || grad_output.cols() != out_features())
            throw std::invalid_argument(std::string(function) + ": grad_output " +
                                        detail::shape_text(grad_output.rows(), grad_output.cols()) + " should be " +
                                        detail::shape_text(x.rows(), out_features()));
        BitLinearGradients grads;
        if (bias_) grads.bias = Eigen::VectorXf::Zero(out_features());
        if (x.rows() == 0) {
            grads.input = RowMatrixXf::Zero(0, in_features());
            grads.weight = RowMatrixXf::Zero(out_features(), in_features());
            return grads;
        }
        const RowMatrixXf w_hat = ternary_weights().dequantize();
        const RowMatrixXf x_hat = quantize_activations_int8(x).dequantize();
        const RowMatrixXf grad = grad_output;
        grads.input = grad * w_hat;
        grads.weight = grad.transpose() * x_hat;
        if (bias_) grads.bias = grad.colwise().sum().transpose();
        return grads;
    }

    /// The deployed layer: the current ternary weights packed in `format`, the bias copied. Its forward
    /// equals this forward bit for bit.
    TernaryLinear deploy(TernaryFormat format = TernaryFormat::i2) const {
        require_finite_bias("lowbit::BitLinear::deploy");
        return TernaryLinear(ternary_weights(), bias_, format);
    }

private:
    float bias_at(Eigen::Index n) const { return bias_ ? (*bias_)(n) : 0.0f; }

    void require_input(const char* function, Eigen::Index rows, Eigen::Index cols) const {
        if (cols != in_features())
            throw std::invalid_argument(std::string(function) + ": x " + detail::shape_text(rows, cols) + " needs " +
                                        std::to_string(in_features()) + " columns (in_features)");
    }
    void require_finite_bias(const char* function) const {
        if (bias_)
            detail::require_finite_data(function,
                                        std::span<const float>(bias_->data(), static_cast<std::size_t>(bias_->size())));
    }

    RowMatrixXf weight_;
    std::optional<Eigen::VectorXf> bias_;
    TernaryScales scales_;
};

LOWBIT_END_NAMESPACE
