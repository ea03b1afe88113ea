// QatLinearOf<Format>: a quantization-aware training layer that trains in exactly the format it deploys.
#pragma once

#include "detail/config.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "activations.hpp"
#include "detail/checks.hpp"
#include "matrix_types.hpp"
#include "quantized_backward.hpp"
#include "quantized_linear.hpp"
#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

/// The gradients of one QatLinearOf::backward (and AnyQatLinear's): with respect to x [M, in], the
/// master weight [out, in] and the bias [out] (absent without a bias).
struct QatLinearGrads {
    RowMatrixXf input;
    RowMatrixXf weight;
    std::optional<Eigen::VectorXf> bias;
};

/// A linear layer y = x * fq(weight)^T + bias trained with its weight fake-quantized in Format
/// (formats/: MLX affine, mxfp4, nvfp4, mxfp8): float master weights [out, in] and an optional float
/// bias [out]. forward(x) quantizes the weights (quantize<Format>, GroupFakeQuantizeOf's rule) and runs
/// the deployed layer's own forward on the packed codes, with the activations() the layer was given:
/// Activations::f32 (the default) keeps x in float; Activations::int8 fake-quantizes x as the deployed
/// int8 path does (per row and weight group to int8, docs/numerics.md N11), because it is that path.
/// So deploy().forward(x, activations()) is the training forward bit for bit. backward(x, dy) passes
/// the gradient straight through both quantizers to the master weights (no mask: every weight group's
/// grid spans the group, see GroupFakeQuantizeOf, and the int8 activation scale is the group's
/// maximum, so nothing clips), and computes dx on the packed codes of the last forward
/// (quantized_matmul_dx).
template <class Format>
class QatLinearOf {
public:
    using format = Format;
    using Deployed = QuantizedLinearOf<Format>;

    using Grads = QatLinearGrads;

    /// Weights drawn as QuantizedLinearOf's (U(-1/sqrt(in), 1/sqrt(in)) by std::mt19937_64(seed), row-major
    /// order), kept in float; bias zero when requested. Throws std::invalid_argument for a non-positive
    /// size or input_dims % group size != 0.
    QatLinearOf(int input_dims, int output_dims, bool bias = true, std::uint64_t seed = 0) {
        if (input_dims <= 0 || output_dims <= 0)
            throw std::invalid_argument("lowbit::QatLinear: input_dims = " + std::to_string(input_dims) +
                                        " and output_dims = " + std::to_string(output_dims) + " must be positive");
        check_input_dims(input_dims);
        const float limit = 1.0f / std::sqrt(static_cast<float>(input_dims));
        std::mt19937_64 generator(seed);
        std::uniform_real_distribution<float> uniform(-limit, limit);
        weight_.resize(output_dims, input_dims);
        for (Eigen::Index r = 0; r < weight_.rows(); ++r)
            for (Eigen::Index c = 0; c < weight_.cols(); ++c) weight_(r, c) = uniform(generator);
        if (bias) bias_ = Eigen::VectorXf::Zero(output_dims);
    }

    /// From a float layer (its weight and bias become the master copies). Throws std::invalid_argument
    /// for in % group size != 0 or a bias of the wrong size.
    explicit QatLinearOf(const Linear& linear) : weight_(linear.weight), bias_(linear.bias) {
        check_input_dims(weight_.cols());
        if (bias_ && bias_->size() != weight_.rows())
            throw std::invalid_argument("lowbit::QatLinear: bias has " + std::to_string(bias_->size()) +
                                        " values for " + std::to_string(weight_.rows()) + " outputs");
    }

    /// x [M, in] (any float dense expression) -> [M, out], with the weights as they are now quantized
    /// (kept for backward) and x as activations() says. Throws std::invalid_argument unless x.cols() ==
    /// in, for a NaN or Inf in x with Activations::int8, and quantize<Format>'s errors for the weights
    /// (NaN or Inf, a group out of the format's range).
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) {
        static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::QatLinear::forward takes a float x");
        deployed_.emplace(quantize<Format>(weight_), bias_);
        return deployed_->forward(x, activations_);
    }

    /// The gradients for x [M, in] and dy [M, out], the gradient of forward(x)'s result: dx on the
    /// packed codes of the last forward (the weights quantized now if no forward ran; not formed, and
    /// left empty, when input_gradient is false, as for a network's first layer), d weight = dy^T x
    /// (straight through), d bias = the column sums of dy. Changes nothing in the layer. Throws
    /// std::invalid_argument for x or dy of the wrong shape.
    template <class DerivedX, class DerivedDy>
    Grads backward(const Eigen::MatrixBase<DerivedX>& x, const Eigen::MatrixBase<DerivedDy>& dy,
                   bool input_gradient = true) const {
        detail::check_backward_shapes("lowbit::QatLinear::backward", x.rows(), x.cols(), dy.rows(), dy.cols(),
                                      input_dims(), output_dims());
        Grads grads;
        const RowMatrixXf dy_rows = dy;
        if (input_gradient)
            grads.input = deployed_ ? quantized_matmul_dx(dy_rows, deployed_->weight())
                                    : quantized_matmul_dx(dy_rows, quantize<Format>(weight_));
        grads.weight.noalias() = dy_rows.transpose() * x;
        if (bias_) grads.bias = dy_rows.colwise().sum().transpose();
        return grads;
    }

    /// The deployed layer: the weights quantized in Format now, the bias copied. Its forward(x,
    /// activations()) equals this layer's forward(x) bit for bit.
    Deployed deploy() const { return Deployed(quantize<Format>(weight_), bias_); }

    RowMatrixXf& weight() noexcept { return weight_; }
    const RowMatrixXf& weight() const noexcept { return weight_; }
    std::optional<Eigen::VectorXf>& bias() noexcept { return bias_; }
    const std::optional<Eigen::VectorXf>& bias() const noexcept { return bias_; }
    Eigen::Index input_dims() const noexcept { return weight_.cols(); }
    Eigen::Index output_dims() const noexcept { return weight_.rows(); }
    /// What forward does with x: Activations::f32 (the default) or Activations::int8.
    Activations activations() const noexcept { return activations_; }
    void set_activations(Activations activations) noexcept { activations_ = activations; }

private:
    static void check_input_dims(Eigen::Index input_dims) {
        if (input_dims % Format::group_size != 0)
            throw std::invalid_argument("lowbit::QatLinear: in = " + std::to_string(input_dims) +
                                        " is not a multiple of the group size " + std::to_string(Format::group_size));
    }

    RowMatrixXf weight_;
    std::optional<Eigen::VectorXf> bias_;
    Activations activations_ = Activations::f32;
    std::optional<Deployed> deployed_;  // the quantized weights (and bias) of the last forward
};

/// QatLinearOf the MLX affine format <GroupSize, Bits>.
template <int GroupSize = 64, int Bits = 4>
using QatLinear = QatLinearOf<MlxAffine<GroupSize, Bits>>;

LOWBIT_END_NAMESPACE
