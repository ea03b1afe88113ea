// Linear, QuantizedLinear and quantized_matmul: an MLX-format quantized linear layer for Eigen users
// (docs/numerics.md N9, N10 and, for Activations::int8, N11).
//
// Shapes follow MLX's QuantizedLinear: weight [out, in] (quantized along `in` in groups), input
// [M, in] or a tensor [..., in], output [M, out] or [..., out]. `biases` (per-group offsets inside the
// QuantizedMatrix) and `bias` (the layer's additive [out] vector, kept in float) are different things.
#pragma once

#include "detail/config.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include <Eigen/Core>

#include "activations.hpp"
#include "detail/dispatch/formats.hpp"
#include "detail/tensor_like.hpp"
#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail {

/// Row-major view of any float dense expression; copies only when the layout is not row-major.
using RowMatrixRef = Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>>;

/// Views a tensor [..., last] as a [rows, last] matrix of its layout (no copy).
template <int Rank, int Options, class IndexType>
auto tensor_as_matrix(const Eigen::Tensor<float, Rank, Options, IndexType>& t) {
    const Eigen::Index last = static_cast<Eigen::Index>(t.dimension(Rank - 1));
    const Eigen::Index rows = last == 0 ? 0 : static_cast<Eigen::Index>(t.size()) / last;
    if constexpr ((Options & Eigen::RowMajor) != 0)
        return Eigen::Map<const RowMatrixXf>(t.data(), rows, last);
    else
        return Eigen::Map<const Eigen::MatrixXf>(t.data(), rows, last);
}

/// The tensor [..., out] holding `result` [rows, out] where x was [..., in].
template <int Rank, int Options, class IndexType>
Eigen::Tensor<float, Rank, Options, IndexType> matrix_as_tensor(const RowMatrixXf& result,
                                                                const Eigen::Tensor<float, Rank, Options, IndexType>& x) {
    std::array<IndexType, Rank> dimensions;
    for (int d = 0; d < Rank; ++d) dimensions[static_cast<std::size_t>(d)] = x.dimension(d);
    dimensions[Rank - 1] = static_cast<IndexType>(result.cols());
    Eigen::Tensor<float, Rank, Options, IndexType> y(dimensions);
    if constexpr ((Options & Eigen::RowMajor) != 0)
        Eigen::Map<RowMatrixXf>(y.data(), result.rows(), result.cols()) = result;
    else
        Eigen::Map<Eigen::MatrixXf>(y.data(), result.rows(), result.cols()) = result;
    return y;
}

/// The public quantized_matmul with errors naming `function`, for the activations Kind. Kind is a
/// template parameter so that a program (or a layer's forward(x)) that never asks for int8 activations
/// does not compile the int8 kernels of every format it uses. `panels`: q's layer cache for the int8
/// GEMM (dispatch/mlx_affine.hpp), or null.
template <Activations Kind, class Derived, class Format>
RowMatrixXf quantized_matmul_named(const char* function, const Eigen::MatrixBase<Derived>& x,
                                   const QuantizedMatrixOf<Format>& q, Int8PanelCache* panels = nullptr) {
    q.check_shapes(function);
    const RowMatrixRef input(x.derived());
    if (input.cols() != q.cols())
        throw std::invalid_argument(std::string(function) + ": x is " + shape_text(input.rows(), input.cols()) +
                                    " but the quantized matrix is " + shape_text(q.rows(), q.cols()) +
                                    " (x's last dimension must be " + std::to_string(q.cols()) + ")");
    RowMatrixXf out(input.rows(), q.rows());
    if (input.rows() == 0) return out;  // an empty batch gives an empty result (as Eigen, PyTorch and MLX)
    if constexpr (Kind == Activations::int8) {
        // N11 quantizes x by its group maxima: a NaN or Inf has no int8 code (the f32 path propagates it).
        // x * 0 is NaN exactly for NaN and +-Inf, so the sum is 0 unless one is there: a vectorized
        // reduction, where allFinite() tests element by element (about 1 ns each).
        if (!((input.array() * 0.0f).sum() == 0.0f)) {
            for (Eigen::Index r = 0; r < input.rows(); ++r)
                for (Eigen::Index c = 0; c < input.cols(); ++c)
                    if (!std::isfinite(input(r, c)))
                        throw std::invalid_argument(std::string(function) + ": x(" + std::to_string(r) + ", " +
                                                    std::to_string(c) + ") = " + float_text(input(r, c)) +
                                                    " is not finite (Activations::int8 needs finite x)");
        }
        quantized_matmul_int8(input.data(), input.outerStride(), input.rows(), q.view(), out.data(), out.cols(),
                              MatmulKernel::automatic, panels);
    } else {
        quantized_matmul(input.data(), input.outerStride(), input.rows(), q.view(), out.data(), out.cols());
    }
    return out;
}

/// quantized_matmul_named with the activations chosen at run time.
template <class Derived, class Format>
RowMatrixXf quantized_matmul_named(const char* function, const Eigen::MatrixBase<Derived>& x,
                                   const QuantizedMatrixOf<Format>& q, Activations activations,
                                   Int8PanelCache* panels = nullptr) {
    if (activations == Activations::int8) return quantized_matmul_named<Activations::int8>(function, x, q, panels);
    return quantized_matmul_named<Activations::f32>(function, x, q);
}

}  // namespace detail

/// x * dequantize(q)^T as RowMatrixXf [M, out] for x [M, in] (any float dense expression; copied only if
/// not row-major), computed on the packed codes without forming the float weights: per group
/// s * sum(x*q) + b * sum(x), f32 accumulation (within lowbit's sqrt(K) bound of the float product, not
/// bitwise equal to it). Threads: lowbit::num_threads(). x with no rows gives [0, out] (every layer's
/// forward follows this rule). Throws std::invalid_argument for x.cols() != q.cols(), or inconsistent q.
template <class Derived, class Format>
RowMatrixXf quantized_matmul(const Eigen::MatrixBase<Derived>& x, const QuantizedMatrixOf<Format>& q) {
    static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::quantized_matmul takes a float x");
    return detail::quantized_matmul_named<Activations::f32>("lowbit::quantized_matmul", x, q);
}

/// quantized_matmul(x, q) with the activations chosen: Activations::f32 is exactly the two-argument
/// form; Activations::int8 quantizes x per row and weight group to int8 and sums codes in int32
/// (docs/numerics.md N11: per output within sum_g |s| * (a / 2) * sum_{k in g} q of the f32 result,
/// plus float rounding). Throws as the two-argument form, and for int8 also for a NaN or Inf in x
/// (naming its row and column).
template <class Derived, class Format>
RowMatrixXf quantized_matmul(const Eigen::MatrixBase<Derived>& x, const QuantizedMatrixOf<Format>& q,
                             Activations activations) {
    static_assert(std::is_same_v<typename Derived::Scalar, float>, "lowbit::quantized_matmul takes a float x");
    return detail::quantized_matmul_named("lowbit::quantized_matmul", x, q, activations);
}

/// A float linear layer: forward(x) = x * weight^T + bias, weight [out, in], bias [out].
struct Linear {
    RowMatrixXf weight;
    std::optional<Eigen::VectorXf> bias;

    /// x [M, in] (any float dense expression) -> [M, out]; M = 0 gives [0, out]. Throws
    /// std::invalid_argument on a shape mismatch.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) const {
        if (x.cols() != weight.cols())
            throw std::invalid_argument("lowbit::Linear::forward: x is " + detail::shape_text(x.rows(), x.cols()) +
                                        " but the weight is " + detail::shape_text(weight.rows(), weight.cols()));
        if (bias && bias->size() != weight.rows())
            throw std::invalid_argument("lowbit::Linear::forward: bias has " + std::to_string(bias->size()) +
                                        " values for " + std::to_string(weight.rows()) + " outputs");
        RowMatrixXf out = x * weight.transpose();
        if (bias) out.rowwise() += bias->transpose();
        return out;
    }
};

/// MLX's QuantizedLinear with its weight in Format (formats/): weight quantized group-wise (group_size
/// values per group's parameters, bits-bit codes; for MLX affine bit-identical to mx.quantize),
/// optional float bias [out] kept unquantized. forward(x) = quantized_matmul(x, weight()) + bias.
/// QuantizedLinear<GroupSize, Bits> below is the MLX affine one.
template <class Format>
class QuantizedLinearOf {
public:
    using format = Format;
    static constexpr int group_size = Format::group_size;
    static constexpr int bits = Format::bits;
    using Matrix = QuantizedMatrixOf<Format>;

    /// Weights drawn from U(-1/sqrt(in), 1/sqrt(in)) by std::mt19937_64(seed) in row-major order, then
    /// quantized; bias zero when requested (as MLX). Throws std::invalid_argument for a non-positive
    /// size or input_dims % GroupSize != 0.
    QuantizedLinearOf(int input_dims, int output_dims, bool bias = true, std::uint64_t seed = 0) {
        if (input_dims <= 0 || output_dims <= 0)
            throw std::invalid_argument("lowbit::QuantizedLinear: input_dims = " + std::to_string(input_dims) +
                                        " and output_dims = " + std::to_string(output_dims) + " must be positive");
        if (input_dims % group_size != 0)
            throw std::invalid_argument("lowbit::QuantizedLinear: in = " + std::to_string(input_dims) +
                                        " is not a multiple of GroupSize = " + std::to_string(group_size));
        const float limit = 1.0f / std::sqrt(static_cast<float>(input_dims));
        std::mt19937_64 generator(seed);
        std::uniform_real_distribution<float> uniform(-limit, limit);
        RowMatrixXf weight(output_dims, input_dims);
        for (Eigen::Index r = 0; r < weight.rows(); ++r)
            for (Eigen::Index c = 0; c < weight.cols(); ++c) weight(r, c) = uniform(generator);
        weight_ = detail::quantize_format(detail::FormatTag<Format>{}, "lowbit::quantize", weight);
        if (bias) bias_ = Eigen::VectorXf::Zero(output_dims);
    }

    /// From an already quantized weight (e.g. loaded from an MLX checkpoint) and an optional bias [out].
    /// Throws std::invalid_argument for inconsistent shapes.
    explicit QuantizedLinearOf(Matrix weight, std::optional<Eigen::VectorXf> bias = std::nullopt)
        : weight_(std::move(weight)), bias_(std::move(bias)) {
        weight_.check_shapes("lowbit::QuantizedLinear");
        if (bias_ && bias_->size() != weight_.rows())
            throw std::invalid_argument("lowbit::QuantizedLinear: bias has " + std::to_string(bias_->size()) +
                                        " values for " + std::to_string(weight_.rows()) + " outputs");
    }

    /// Quantizes linear.weight and copies linear.bias unquantized (MLX's from_linear).
    static QuantizedLinearOf from_linear(const Linear& linear) {
        if (linear.bias && linear.bias->size() != linear.weight.rows())
            throw std::invalid_argument("lowbit::QuantizedLinear::from_linear: bias has " +
                                        std::to_string(linear.bias->size()) + " values for " +
                                        std::to_string(linear.weight.rows()) + " outputs");
        return QuantizedLinearOf(
            detail::quantize_format(detail::FormatTag<Format>{}, "lowbit::quantize", linear.weight), linear.bias);
    }

    /// x [M, in] (any float dense expression) -> [M, out]; M = 0 gives [0, out]. Throws
    /// std::invalid_argument unless x.cols() == in.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) const {
        static_assert(std::is_same_v<typename Derived::Scalar, float>,
                      "lowbit::QuantizedLinear::forward takes a float x");
        RowMatrixXf out = detail::quantized_matmul_named<Activations::f32>("lowbit::QuantizedLinear::forward", x, weight_);
        if (bias_) out.rowwise() += bias_->transpose();
        return out;
    }

    /// forward(x) with the activations chosen (see quantized_matmul(x, q, activations)); f32 is forward(x).
    /// The first int8 call on an MLX affine layer also reorders the weights into the int8 GEMM's panels
    /// and keeps them (as much memory again as weight()'s codes, scales and biases; for 1, 3, 5 and 6
    /// bits the codes are repacked at 2, 4 or 8 bits, up to 8/5 of their memory; copies share them);
    /// later calls run on them at every batch size. Results are within the same N11 bound as
    /// quantized_matmul(x, weight(), Activations::int8), not necessarily bit-identical to it.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x, Activations activations) const {
        static_assert(std::is_same_v<typename Derived::Scalar, float>,
                      "lowbit::QuantizedLinear::forward takes a float x");
        RowMatrixXf out =
            detail::quantized_matmul_named("lowbit::QuantizedLinear::forward", x, weight_, activations, int8_panels_.get());
        if (bias_) out.rowwise() += bias_->transpose();
        return out;
    }

    /// x [..., in] -> [..., out], same layout (ColMajor or RowMajor) as x.
    template <int Rank, int Options, class IndexType>
    Eigen::Tensor<float, Rank, Options, IndexType> forward(const Eigen::Tensor<float, Rank, Options, IndexType>& x,
                                                           Activations activations = Activations::f32) const {
        static_assert(Rank >= 1, "lowbit::QuantizedLinear::forward needs a tensor of rank >= 1");
        if (static_cast<Eigen::Index>(x.dimension(Rank - 1)) != input_dims())
            throw std::invalid_argument("lowbit::QuantizedLinear::forward: the tensor's last dimension is " +
                                        std::to_string(x.dimension(Rank - 1)) + ", expected in = " +
                                        std::to_string(input_dims()));
        return detail::matrix_as_tensor(forward(detail::tensor_as_matrix(x), activations), x);
    }

    const Matrix& weight() const { return weight_; }
    const std::optional<Eigen::VectorXf>& bias() const { return bias_; }
    RowMatrixXf dequantize() const { return lowbit::dequantize(weight_); }
    /// in and out, as Eigen::Index (64-bit: no narrowing for large layers).
    Eigen::Index input_dims() const { return weight_.cols(); }
    Eigen::Index output_dims() const { return weight_.rows(); }

private:
    Matrix weight_;
    std::optional<Eigen::VectorXf> bias_;
    // The int8 GEMM's panels of weight_, built by the first int8 forward (about as many bytes as
    // weight_'s codes, scales and biases; more for repacked widths) and shared by copies; null only
    // when moved from.
    std::shared_ptr<detail::Int8PanelCache> int8_panels_ = std::make_shared<detail::Int8PanelCache>();
};

/// MLX's affine QuantizedLinear: QuantizedLinearOf<MlxAffine<GroupSize, Bits>>.
template <int GroupSize = 64, int Bits = 4>
using QuantizedLinear = QuantizedLinearOf<MlxAffine<GroupSize, Bits>>;

LOWBIT_END_NAMESPACE
