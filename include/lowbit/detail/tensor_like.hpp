// "Tensor-like" inputs of the QAT API, seen as one contiguous float span:
//   * Eigen dense objects: Matrix / Array (dynamic or fixed, either storage order), Map and Ref of them,
//     and any dense expression (evaluated first);
//   * Eigen::Tensor<float, N> of any rank and layout, and Eigen::TensorMap of one.
// Eigen's Tensor module is declared here, not included: everything that touches a tensor is a template
// that only a caller holding one instantiates, and that caller has included
// <unsupported/Eigen/CXX11/Tensor> (about a third of a second of parsing saved in every other unit).
// Results are the plain evaluated type of the input (X::PlainObject, or Eigen::Tensor<float, N,
// Options, Index>) with the input's shape, stored in the same order as the span the kernels read, so
// element i of the input span maps to element i of the output span.
#pragma once

#include "config.hpp"

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Eigen/Core>

namespace Eigen {
template <typename Scalar_, int NumIndices_, int Options_, typename IndexType_>
class Tensor;
template <typename PlainObjectType, int Options_, template <class> class MakePointer_>
class TensorMap;
}  // namespace Eigen

LOWBIT_BEGIN_NAMESPACE
namespace detail {

template <class T>
struct tensor_info {
    static constexpr bool value = false;
};
template <class Scalar, int Rank, int Options, class Index>
struct tensor_info<Eigen::Tensor<Scalar, Rank, Options, Index>> {
    static constexpr bool value = true;
    using scalar = Scalar;
    using plain = Eigen::Tensor<std::remove_const_t<Scalar>, Rank, Options, Index>;
    static constexpr int rank = Rank;
    static constexpr bool row_major = (Options & Eigen::RowMajor) != 0;
};
template <class Plain, int MapOptions, template <class> class MakePointer>
struct tensor_info<Eigen::TensorMap<Plain, MapOptions, MakePointer>> : tensor_info<std::remove_const_t<Plain>> {};

template <class T>
concept EigenDense = std::is_base_of_v<Eigen::DenseBase<std::remove_cvref_t<T>>, std::remove_cvref_t<T>>;

template <class T>
concept EigenTensor = tensor_info<std::remove_cvref_t<T>>::value;

/// What the QAT API accepts besides spans.
template <class T>
concept TensorLike = EigenDense<T> || EigenTensor<T>;

template <class X>
struct tensor_like_traits;

template <EigenDense X>
struct tensor_like_traits<X> {
    using plain = typename X::PlainObject;
    static_assert(std::is_same_v<typename X::Scalar, float>, "lowbit: tensor-like inputs must hold float");
    static constexpr bool row_major = plain::IsRowMajor;
    static constexpr int rank = 2;
    static plain make_result(const X& x) {
        plain result;
        result.resize(x.rows(), x.cols());
        return result;
    }
    /// Logical extents: {rows, cols}.
    static Eigen::Index extent(const X& x, int axis) { return axis == 0 ? x.rows() : x.cols(); }
};

template <EigenTensor X>
struct tensor_like_traits<X> {
    using info = tensor_info<X>;
    using plain = typename info::plain;
    static_assert(std::is_same_v<std::remove_const_t<typename info::scalar>, float>,
                  "lowbit: tensor-like inputs must hold float");
    static constexpr bool row_major = info::row_major;
    static constexpr int rank = info::rank;
    static plain make_result(const X& x) { return plain(x.dimensions()); }
    static Eigen::Index extent(const X& x, int axis) { return static_cast<Eigen::Index>(x.dimension(axis)); }
};

template <class X>
using result_t = typename tensor_like_traits<std::remove_cvref_t<X>>::plain;

/// Shape of x as text, e.g. "[3, 4]" (for error messages).
template <TensorLike X>
std::string shape_text(const X& x) {
    using traits = tensor_like_traits<std::remove_cvref_t<X>>;
    std::string text = "[";
    for (int axis = 0; axis < traits::rank; ++axis) {
        if (axis > 0) text += ", ";
        text += std::to_string(traits::extent(x, axis));
    }
    return text + "]";
}

/// True when x and y have the same logical shape.
template <TensorLike X, TensorLike Y>
bool same_shape(const X& x, const Y& y) {
    using tx = tensor_like_traits<std::remove_cvref_t<X>>;
    using ty = tensor_like_traits<std::remove_cvref_t<Y>>;
    if constexpr (tx::rank != ty::rank) {
        return false;
    } else {
        for (int axis = 0; axis < tx::rank; ++axis)
            if (tx::extent(x, axis) != ty::extent(y, axis)) return false;
        return true;
    }
}

/// The floats of a tensor-like x, contiguous, in the storage order of `Target` (a plain dense or
/// Tensor type). Borrows x's memory when it already is laid out that way, else holds a copy.
template <class X, class Target = result_t<X>>
class ContiguousInput {
public:
    explicit ContiguousInput(const X& x) {
        if constexpr (EigenDense<X>) {
            constexpr bool direct = (X::Flags & Eigen::DirectAccessBit) != 0;
            if constexpr (direct) {
                const bool is_vector = x.rows() == 1 || x.cols() == 1;
                const bool same_order = static_cast<bool>(X::IsRowMajor) == static_cast<bool>(Target::IsRowMajor);
                const bool dense_inner = x.innerStride() == 1 && (x.outerStride() == x.innerSize() || x.outerSize() <= 1);
                const bool dense_vector = is_vector && (x.size() <= 1 || x.innerStride() == 1) &&
                                          (x.outerSize() <= 1 || x.outerStride() == x.innerSize());
                if ((dense_inner && (same_order || is_vector)) || dense_vector) {
                    data_ = x.data();
                    size_ = static_cast<std::size_t>(x.size());
                    return;
                }
            }
            copy_ = x;
            data_ = copy_.data();
            size_ = static_cast<std::size_t>(copy_.size());
        } else {
            static_assert(tensor_info<X>::row_major == tensor_info<Target>::row_major,
                          "lowbit: both tensors must have the same layout (RowMajor or ColMajor)");
            data_ = x.data();
            size_ = static_cast<std::size_t>(x.size());
        }
    }
    ContiguousInput(const ContiguousInput&) = delete;
    ContiguousInput& operator=(const ContiguousInput&) = delete;

    std::span<const float> span() const noexcept { return {data_, size_}; }

private:
    Target copy_{};
    const float* data_ = nullptr;
    std::size_t size_ = 0;
};

/// Contiguous storage of a plain result object.
template <class Plain>
std::span<float> result_span(Plain& result) noexcept {
    return {result.data(), static_cast<std::size_t>(result.size())};
}

/// result = fn(input span, output span) with x's shape.
template <TensorLike X, class Fn>
result_t<X> map_tensor(const X& x, Fn&& fn) {
    using traits = tensor_like_traits<std::remove_cvref_t<X>>;
    const ContiguousInput<std::remove_cvref_t<X>> input(x);
    auto result = traits::make_result(x);
    fn(input.span(), result_span(result));
    return result;
}

/// result = fn(a span, b span, output span), a and b the same shape (else std::invalid_argument from
/// `function` naming both shapes); b is read in a's storage order.
template <TensorLike A, TensorLike B, class Fn>
result_t<A> map_tensor2(const A& a, const B& b, const char* function, Fn&& fn) {
    static_assert(EigenDense<A> == EigenDense<B>,
                  "lowbit: both arguments must be Eigen dense objects, or both Eigen::Tensor / TensorMap");
    if (!same_shape(a, b))
        throw std::invalid_argument(std::string(function) + ": grad has shape " + shape_text(a) +
                                    " but input has shape " + shape_text(b));
    using traits = tensor_like_traits<std::remove_cvref_t<A>>;
    const ContiguousInput<std::remove_cvref_t<A>> first(a);
    const ContiguousInput<std::remove_cvref_t<B>, result_t<A>> second(b);
    auto result = traits::make_result(a);
    fn(first.span(), second.span(), result_span(result));
    return result;
}

/// Where a logical axis lies in the contiguous span of x (its result storage order): the element at
/// span index i has coordinate (i / stride) % extent along `axis`.
struct AxisLayout {
    std::size_t stride = 1;
    std::size_t extent = 1;
};

template <TensorLike X>
AxisLayout axis_layout(const X& x, int axis, const char* function) {
    using traits = tensor_like_traits<std::remove_cvref_t<X>>;
    if (axis < 0 || axis >= traits::rank)
        throw std::invalid_argument(std::string(function) + ": axis = " + std::to_string(axis) +
                                    " is outside a rank-" + std::to_string(traits::rank) + " input");
    AxisLayout layout;
    layout.extent = static_cast<std::size_t>(traits::extent(x, axis));
    if constexpr (traits::row_major) {
        for (int later = axis + 1; later < traits::rank; ++later)
            layout.stride *= static_cast<std::size_t>(traits::extent(x, later));
    } else {
        for (int earlier = 0; earlier < axis; ++earlier)
            layout.stride *= static_cast<std::size_t>(traits::extent(x, earlier));
    }
    return layout;
}

}  // namespace detail
LOWBIT_END_NAMESPACE
