// DwqLinearOf<Format>: a quantized layer whose codes stay frozen while its group scales and biases
// train against a teacher (mlx-lm's DWQ, distilled weight quantization).
#pragma once

#include "detail/config.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "detail/checks.hpp"
#include "matrix_types.hpp"
#include "quantized_backward.hpp"
#include "quantized_linear.hpp"
#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

/// A QuantizedLinearOf<Format> (float group scales: the MLX affine formats) with its codes frozen and its
/// scales and biases trainable: forward(x) = quantized_matmul(x, weight()) + bias, on the packed codes;
/// backward(x, dy) gives the gradients of x and of every group's scale and bias (docs/numerics.md N20).
/// The layer's own bias [out] stays frozen. deploy() returns the QuantizedLinearOf with the trained
/// scales and biases; its forward equals this layer's bit for bit.
template <class Format>
class DwqLinearOf {
    static_assert(std::is_same_v<typename Format::scale_type, float>,
                  "lowbit::DwqLinearOf trains float group scales: the MLX affine formats");

public:
    using format = Format;
    using Deployed = QuantizedLinearOf<Format>;

    /// The gradients of one backward: x [M, in], and the scales and biases [out, groups].
    struct Grads {
        RowMatrixXf input;
        RowMatrixXf scales;
        RowMatrixXf biases;
    };

    /// Starts from a quantized layer (its codes, scales, biases and bias are copied).
    explicit DwqLinearOf(const Deployed& layer) : weight_(layer.weight()), bias_(layer.bias()) {}

    /// x [M, in] (any float dense expression) -> [M, out]. Throws std::invalid_argument unless x.cols() ==
    /// in, or for scales or biases resized to disagree with the codes.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) const {
        static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::DwqLinear::forward takes a float x");
        RowMatrixXf out = detail::quantized_matmul_named<Activations::f32>("lowbit::DwqLinear::forward", x, weight_);
        if (bias_) out.rowwise() += bias_->transpose();
        return out;
    }

    /// The gradients for x [M, in] and dy [M, out], the gradient of forward(x)'s result:
    /// quantized_matmul_dx and quantized_matmul_parameter_grads. Changes nothing in the layer. A NaN or
    /// Inf in dy propagates. Throws std::invalid_argument for x or dy of the wrong shape.
    template <class DerivedX, class DerivedDy>
    Grads backward(const Eigen::MatrixBase<DerivedX>& x, const Eigen::MatrixBase<DerivedDy>& dy) const {
        detail::check_backward_shapes("lowbit::DwqLinear::backward", x.rows(), x.cols(), dy.rows(), dy.cols(),
                                      input_dims(), output_dims());
        QuantizedParameterGrads parameters = quantized_matmul_parameter_grads(x, dy, weight_);
        return Grads{quantized_matmul_dx(dy, weight_), std::move(parameters.scales), std::move(parameters.biases)};
    }

    /// The deployed layer: the codes and the scales and biases as trained now, the bias copied.
    Deployed deploy() const { return Deployed(weight_, bias_); }

    /// The trained parameters, [out, groups] each, for an optimizer to update in place.
    RowMatrixXf& scales() noexcept { return weight_.scales; }
    RowMatrixXf& biases() noexcept { return weight_.biases; }
    const QuantizedMatrixOf<Format>& weight() const noexcept { return weight_; }
    const std::optional<Eigen::VectorXf>& bias() const noexcept { return bias_; }
    Eigen::Index input_dims() const noexcept { return weight_.cols(); }
    Eigen::Index output_dims() const noexcept { return weight_.rows(); }

private:
    QuantizedMatrixOf<Format> weight_;
    std::optional<Eigen::VectorXf> bias_;
};

/// DwqLinearOf the MLX affine format <GroupSize, Bits>.
template <int GroupSize = 64, int Bits = 4>
using DwqLinear = DwqLinearOf<MlxAffine<GroupSize, Bits>>;

LOWBIT_END_NAMESPACE
