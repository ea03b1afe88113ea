// QuantizedView<Format>: what every kernel takes in place of a public matrix type. A plain read-only
// view of one quantized matrix [rows, cols]: its packed code words and its per-group parameters, each a
// row-major 2-D array given by pointer, extent and row stride (in elements). The group size, code width
// and parameter types are the Format's (formats/). QuantizedMatrixOf<Format>::view() hands one down.
//
//   codes   uint32             [rows, cols * Format::bits / 32]   row r at codes.data() + r * stride
//   scales  Format::scale_type [rows, cols / Format::group_size]
//   biases  float              [rows, cols / Format::group_size]   (empty when !Format::has_biases)
#pragma once

#include "config.hpp"

#include <cstdint>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// A read-only row-major 2-D array: element (r, c) at data[r * stride + c]. The accessors are
/// Eigen's spelling (rows(), cols(), operator()), so kernels read it as they read a row-major matrix.
template <class T>
class RowMajorView {
public:
    RowMajorView() = default;
    RowMajorView(const T* data, Eigen::Index rows, Eigen::Index cols, Eigen::Index stride) noexcept
        : data_(data), rows_(rows), cols_(cols), stride_(stride) {}
    /// The view of a row-major Eigen matrix (its outer stride is the row stride).
    template <class Matrix>
    static RowMajorView of(const Matrix& m) noexcept {
        return RowMajorView(m.data(), m.rows(), m.cols(), m.outerStride());
    }

    const T* data() const noexcept { return data_; }
    Eigen::Index rows() const noexcept { return rows_; }
    Eigen::Index cols() const noexcept { return cols_; }
    Eigen::Index stride() const noexcept { return stride_; }
    const T& operator()(Eigen::Index r, Eigen::Index c) const noexcept { return data_[r * stride_ + c]; }

private:
    const T* data_ = nullptr;
    Eigen::Index rows_ = 0, cols_ = 0, stride_ = 0;
};

/// One quantized matrix in Format, as the kernels read it (layout above). The caller guarantees the
/// three arrays agree (QuantizedMatrixOf::check_shapes) and outlive the view.
template <class Format>
struct QuantizedView {
    using format = Format;
    RowMajorView<std::uint32_t> codes;
    RowMajorView<typename Format::scale_type> scales;
    RowMajorView<float> biases;

    Eigen::Index rows() const noexcept { return codes.rows(); }
    Eigen::Index cols() const noexcept { return codes.cols() * 32 / Format::bits; }
    Eigen::Index groups_per_row() const noexcept { return scales.cols(); }
};

}  // namespace detail
LOWBIT_END_NAMESPACE
