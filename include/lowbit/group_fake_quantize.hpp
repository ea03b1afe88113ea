// GroupFakeQuantize: the training-time twin of QuantizedLinear's weight format.
#pragma once

#include "detail/config.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include <Eigen/Core>

#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Group-wise fake quantization of a weight matrix w [out, in] in exactly the format Format (formats/:
/// MLX affine, mxfp4, nvfp4, mxfp8) that QuantizedLinearOf<Format> deploys: forward(w) is
/// dequantize(quantize<Format>(w)) bit for bit, so a model trained through it and converted with
/// QuantizedLinearOf<Format>::from_linear computes what training computed (up to float summation order
/// in the matmul).
///
/// backward(grad, w) is the straight-through estimator: the gradient passes unchanged. No mask is
/// needed: every group's grid spans that group's own range (affine: [min, max], the far end clipped by
/// at most one step, docs/numerics.md N9; mxfp4 and mxfp8: the exponent rounds up, so nothing clips;
/// nvfp4: the E4M3 scale rounds to nearest, so the largest values may pass 6 * scale by part of one
/// scale step, or saturate beyond 6 * 448), so no weight lies in a saturated region the way
/// activations can.
///
/// Errors (std::invalid_argument): those of quantize<Format> (empty w, in % GroupSize != 0, NaN/Inf
/// naming row and column, a group out of the format's range); a grad whose shape differs from w's.
template <class Format>
class GroupFakeQuantizeOf {
public:
    using format = Format;
    static constexpr int group_size = Format::group_size;
    static constexpr int bits = Format::bits;

    /// w [out, in] (any float dense expression) -> dequantize(quantize<Format>(w)) [out, in], in w's own
    /// matrix type (Derived::PlainObject: a column-major w gives a column-major result), as
    /// FakeQuantize::forward returns its input's type.
    template <class Derived>
    typename Derived::PlainObject forward(const Eigen::MatrixBase<Derived>& w) const {
        static_assert(std::is_same_v<typename Derived::Scalar, float>,
                      "lowbit::GroupFakeQuantize::forward takes a float matrix");
        return dequantize(
            detail::quantize_format(detail::FormatTag<Format>{}, "lowbit::GroupFakeQuantize::forward", w));
    }

    /// Straight-through gradient with respect to w: grad itself (in grad's matrix type), after checking
    /// it has w's shape.
    template <class GradDerived, class WeightDerived>
    typename GradDerived::PlainObject backward(const Eigen::MatrixBase<GradDerived>& grad,
                                               const Eigen::MatrixBase<WeightDerived>& w) const {
        static_assert(std::is_same_v<typename GradDerived::Scalar, float> &&
                          std::is_same_v<typename WeightDerived::Scalar, float>,
                      "lowbit::GroupFakeQuantize::backward takes float matrices");
        if (grad.rows() != w.rows() || grad.cols() != w.cols()) {
            throw std::invalid_argument("lowbit::GroupFakeQuantize::backward: grad is " +
                                        detail::shape_text(grad.rows(), grad.cols()) + " but w is " +
                                        detail::shape_text(w.rows(), w.cols()));
        }
        return grad;
    }
};

/// GroupFakeQuantizeOf the MLX affine format <GroupSize, Bits> (docs/numerics.md N9).
template <int GroupSize = 64, int Bits = 4>
class GroupFakeQuantize : public GroupFakeQuantizeOf<MlxAffine<GroupSize, Bits>> {
    static_assert(is_supported_quantization<GroupSize, Bits>,
                  "lowbit::GroupFakeQuantize supports Bits in {1, 2, 3, 4, 5, 6, 8} and GroupSize in {32, 64, 128}");
};

LOWBIT_END_NAMESPACE
