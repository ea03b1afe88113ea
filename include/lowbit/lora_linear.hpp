// LoraLinearOf<Format>: a low-rank adapter trained on top of a frozen quantized layer (QLoRA), merged
// into a float layer or re-quantized when done.
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "detail/checks.hpp"
#include "dwq_linear.hpp"
#include "matrix_types.hpp"
#include "quantized_backward.hpp"
#include "quantized_linear.hpp"
#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

/// y = base(x) + (alpha / r) * (x A^T) B^T: a frozen QuantizedLinearOf<Format> (any format; its codes,
/// scales, biases and bias do not train) plus a LoRA adapter A [r, in], B [out, r] in float. A starts
/// U(-1/sqrt(in), 1/sqrt(in)) (std::mt19937_64(seed), row-major order, as mlx-lm's LoRA), B at zero, so
/// the layer starts as its base. The base's product runs on its packed codes in both directions
/// (quantized_matmul, quantized_matmul_dx); the adapter's in Eigen. With train_base_parameters (float
/// group scales only), backward also gives the base's scale and bias gradients (the DWQ setting).
template <class Format>
class LoraLinearOf {
public:
    using format = Format;
    using Base = QuantizedLinearOf<Format>;

    /// The gradients of one backward: x [M, in], A [r, in], B [out, r]; and, with
    /// train_base_parameters, the base's group scales and biases [out, groups].
    struct Grads {
        RowMatrixXf input;
        RowMatrixXf a;
        RowMatrixXf b;
        std::optional<QuantizedParameterGrads> base;
    };

    /// Throws std::invalid_argument for rank outside [1, min(in, out)] or a non-finite alpha.
    LoraLinearOf(Base base, int rank, float alpha, std::uint64_t seed = 0)
        : weight_(base.weight()), bias_(base.bias()), alpha_(alpha) {
        const Eigen::Index in = weight_.cols(), out = weight_.rows(), largest = std::min(in, out);
        if (rank < 1 || rank > largest)
            throw std::invalid_argument("lowbit::LoraLinear: rank = " + std::to_string(rank) +
                                        " must be in [1, min(in, out) = " + std::to_string(largest) + "]");
        if (!std::isfinite(alpha))
            throw std::invalid_argument("lowbit::LoraLinear: alpha = " + std::to_string(alpha) + " must be finite");
        const float limit = 1.0f / std::sqrt(static_cast<float>(in));
        std::mt19937_64 generator(seed);
        std::uniform_real_distribution<float> uniform(-limit, limit);
        a_.resize(rank, in);
        for (Eigen::Index r = 0; r < a_.rows(); ++r)
            for (Eigen::Index c = 0; c < a_.cols(); ++c) a_(r, c) = uniform(generator);
        b_ = RowMatrixXf::Zero(out, rank);
    }

    /// x [M, in] (any float dense expression) -> [M, out]: the base's product on its codes plus its bias,
    /// then (alpha / r) * (x A^T) B^T added. Throws std::invalid_argument unless x.cols() == in, or for
    /// an adapter resized to the wrong shape.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) const {
        static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::LoraLinear::forward takes a float x");
        constexpr const char* function = "lowbit::LoraLinear::forward";
        check_adapter(function, a_, b_);
        RowMatrixXf out = detail::quantized_matmul_named<Activations::f32>(function, x, weight_);
        if (bias_) out.rowwise() += bias_->transpose();
        const RowMatrixXf h = (x * a_.transpose()) * scale();
        out.noalias() += h * b_.transpose();
        return out;
    }

    /// The gradients for x [M, in] and dy [M, out], the gradient of forward(x)'s result, with h = x A^T
    /// and c = alpha / r: dB = c dy^T h, dA = (c dy B)^T x, dx = dy dequantize(base) (on the codes) + c
    /// dy B A. Changes nothing in the layer. A NaN or Inf in dy propagates. Throws std::invalid_argument
    /// for x or dy of the wrong shape, or an adapter resized to the wrong shape.
    template <class DerivedX, class DerivedDy>
    Grads backward(const Eigen::MatrixBase<DerivedX>& x, const Eigen::MatrixBase<DerivedDy>& dy) const {
        constexpr const char* function = "lowbit::LoraLinear::backward";
        check_adapter(function, a_, b_);
        detail::check_backward_shapes(function, x.rows(), x.cols(), dy.rows(), dy.cols(), input_dims(), output_dims());
        const RowMatrixXf dy_rows = dy;
        const RowMatrixXf h = (x * a_.transpose()) * scale();
        const RowMatrixXf dh = (dy_rows * b_) * scale();
        Grads grads;
        grads.b.noalias() = dy_rows.transpose() * h;
        grads.a.noalias() = dh.transpose() * x;
        grads.input = quantized_matmul_dx(dy_rows, weight_);
        grads.input.noalias() += dh * a_;
        if (train_base_parameters_) grads.base = quantized_matmul_parameter_grads(x, dy_rows, weight_);
        return grads;
    }

    /// The float layer the adapter merges into: dequantize(base) + (alpha / r) B A, and the base's bias.
    /// Throws std::invalid_argument for an adapter resized to the wrong shape.
    Linear merge() const {
        check_adapter("lowbit::LoraLinear::merge", a_, b_);
        RowMatrixXf weight = lowbit::dequantize(weight_);
        weight.noalias() += (b_ * scale()) * a_;
        return Linear{std::move(weight), bias_};
    }

    /// merge() quantized again in Format (quantize<Format>, round to nearest): the layer to deploy. For
    /// another quantizer (lowbit/ptq.hpp), quantize merge()'s weight with it instead.
    Base deploy() const { return Base::from_linear(merge()); }

    /// Replaces the adapter with a [r, in] and b [out, r] (any rank in [1, min(in, out)]): a trained
    /// adapter loaded back. Throws std::invalid_argument for other shapes, and then changes nothing.
    void set_adapter(RowMatrixXf a, RowMatrixXf b) {
        check_adapter("lowbit::LoraLinear::set_adapter", a, b);
        a_ = std::move(a);
        b_ = std::move(b);
    }

    /// Whether backward also gives the base's scale and bias gradients (Grads::base), which an optimizer
    /// may apply through base_scales() and base_biases(). Throws std::invalid_argument for a format
    /// whose scales are not floats (the microscaling formats' byte scales do not train).
    void train_base_parameters(bool on) {
        if (on && !std::is_same_v<typename Format::scale_type, float>)
            throw std::invalid_argument(
                "lowbit::LoraLinear::train_base_parameters: this format's group scales are bytes, not trainable");
        train_base_parameters_ = on;
    }

    /// The adapter, for an optimizer to update in place (forward, backward and merge check its shape).
    RowMatrixXf& a() noexcept { return a_; }
    RowMatrixXf& b() noexcept { return b_; }
    const RowMatrixXf& a() const noexcept { return a_; }
    const RowMatrixXf& b() const noexcept { return b_; }
    /// The base's group scales and biases [out, groups] (formats with float scales, with biases).
    auto& base_scales() noexcept { return weight_.scales; }
    auto& base_biases() noexcept { return weight_.biases; }
    const QuantizedMatrixOf<Format>& base_weight() const noexcept { return weight_; }
    const std::optional<Eigen::VectorXf>& bias() const noexcept { return bias_; }
    int rank() const noexcept { return static_cast<int>(a_.rows()); }
    float alpha() const noexcept { return alpha_; }
    /// The adapter's output scale, alpha / r.
    float scale() const noexcept { return alpha_ / static_cast<float>(a_.rows()); }
    Eigen::Index input_dims() const noexcept { return weight_.cols(); }
    Eigen::Index output_dims() const noexcept { return weight_.rows(); }
    /// The trainable values: the adapter's, plus the base's scales and biases when they train.
    Eigen::Index trainable_parameters() const noexcept {
        Eigen::Index count = a_.size() + b_.size();
        if constexpr (Format::has_biases)
            if (train_base_parameters_) count += weight_.biases.size();
        if (train_base_parameters_) count += weight_.scales.size();
        return count;
    }

private:
    void check_adapter(const char* function, const RowMatrixXf& a, const RowMatrixXf& b) const {
        const Eigen::Index in = weight_.cols(), out = weight_.rows();
        if (a.rows() < 1 || a.rows() > std::min(in, out) || a.cols() != in || b.rows() != out || b.cols() != a.rows())
            throw std::invalid_argument(
                std::string(function) + ": the adapter is A " + detail::shape_text(a.rows(), a.cols()) + " and B " +
                detail::shape_text(b.rows(), b.cols()) + " for a layer [" + std::to_string(out) + ", " +
                std::to_string(in) + "] (A must be [r, in] and B [out, r], r in [1, min(in, out)])");
    }

    QuantizedMatrixOf<Format> weight_;
    std::optional<Eigen::VectorXf> bias_;
    float alpha_;
    RowMatrixXf a_, b_;
    bool train_base_parameters_ = false;
};

/// LoraLinearOf the MLX affine format <GroupSize, Bits>.
template <int GroupSize = 64, int Bits = 4>
using LoraLinear = LoraLinearOf<MlxAffine<GroupSize, Bits>>;

LOWBIT_END_NAMESPACE
