// QuantizedMatrix, quantize, dequantize: MLX's affine group-wise weight format (docs/numerics.md N9).
//
// A float weight matrix w [out, in] is cut along `in` into groups of GroupSize values. Each group gets
// a scale s and a bias b (both float) and each value a Bits-bit code q in [0, 2^Bits - 1], with
// w ~ s * q + b. Codes are stored as MLX stores them: each row one little-endian bit stream of
// uint32 words, first code in the lowest bits.
//
//   Bits = 4 (8 codes per word):      word 0 of a row
//     bit 31                                          bit 0
//     | q7 | q6 | q5 | q4 | q3 | q2 | q1 | q0 |
//   Bits = 3 (codes straddle words):  code 10 = bits 30..31 of word 0 + bit 0 of word 1
//     word 0: | q10(lo 2) | q9 | q8 | ... | q1 | q0 |   word 1: | ... | q11 | q10(hi 1) |
//
//   codes  uint32 [out, in*Bits/32]   (one 32-code block = Bits words, so groups are whole words)
//   scales float  [out, in/GroupSize] (may be negative: see quantize)
//   biases float  [out, in/GroupSize] (the group's larger-magnitude extreme, or 0)
//
// Hand-built matrices: check_shapes() refuses parts that disagree; scales and biases are not
// inspected on every call (that would cost a pass over them per GEMV), so a NaN or Inf placed in them
// by hand comes out as NaN or Inf in the affected outputs. quantize never produces one.
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "detail/checks.hpp"
#include "detail/dispatch/formats.hpp"
#include "detail/input_types.hpp"
#include "detail/mlx_affine/packing.hpp"
#include "detail/quantized_view.hpp"
#include "detail/threading/parallel.hpp"
#include "formats/formats.hpp"
#include "formats/mlx_affine.hpp"
#include "matrix_types.hpp"
#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail {
/// The biases member of a format without biases: nothing.
struct NoBiases {};
}  // namespace detail

/// A group-wise quantized matrix [rows, cols] in Format (formats/): packed codes and per-group
/// parameters. QuantizedMatrix<GroupSize, Bits> below is the MLX affine one (layout drawn at the top of
/// this file).
template <class Format>
struct QuantizedMatrixOf {
    using format = Format;
    using CodeMatrix = Eigen::Matrix<std::uint32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ScaleMatrix = Eigen::Matrix<typename Format::scale_type, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using BiasMatrix = std::conditional_t<Format::has_biases, RowMatrixXf, detail::NoBiases>;

    static constexpr int group_size = Format::group_size;
    static constexpr int bits = Format::bits;
    static constexpr int words_per_group = Format::words_per_group;
    static constexpr std::uint32_t max_code = Format::max_code;

    CodeMatrix codes;                         ///< [rows, cols*bits/32] packed codes
    ScaleMatrix scales;                       ///< [rows, cols/group_size]
    [[no_unique_address]] BiasMatrix biases;  ///< [rows, cols/group_size] when the format has biases

    Eigen::Index rows() const { return codes.rows(); }
    Eigen::Index cols() const { return codes.cols() * 32 / bits; }
    Eigen::Index groups_per_row() const { return scales.cols(); }

    /// The kernels' view of this matrix (valid while it lives and is not resized).
    detail::QuantizedView<Format> view() const noexcept {
        detail::QuantizedView<Format> v;
        v.codes = detail::RowMajorView<std::uint32_t>::of(codes);
        v.scales = detail::RowMajorView<typename Format::scale_type>::of(scales);
        if constexpr (Format::has_biases) v.biases = detail::RowMajorView<float>::of(biases);
        return v;
    }

    /// Throws std::invalid_argument (message starting with `function`) unless the parts agree and the
    /// matrix is non-empty.
    void check_shapes(const char* function) const {
        const auto text = [](Eigen::Index rows, Eigen::Index cols) { return detail::shape_text(rows, cols); };
        if (codes.rows() == 0 || codes.cols() == 0)
            throw std::invalid_argument(std::string(function) + ": empty quantized matrix (codes " +
                                        text(codes.rows(), codes.cols()) + ")");
        bool biases_agree = true;
        std::string biases_text;
        if constexpr (Format::has_biases) {
            biases_agree = biases.rows() == codes.rows() && biases.cols() == scales.cols();
            biases_text = " and biases " + text(biases.rows(), biases.cols());
        }
        if (scales.rows() != codes.rows() || !biases_agree || scales.cols() * words_per_group != codes.cols())
            throw std::invalid_argument(std::string(function) + ": codes " + text(codes.rows(), codes.cols()) +
                                        ", scales " + text(scales.rows(), scales.cols()) + biases_text +
                                        " do not describe one " + std::to_string(bits) +
                                        "-bit matrix with GroupSize = " + std::to_string(group_size));
    }
};

/// The MLX affine matrix: QuantizedMatrixOf<MlxAffine<GroupSize, Bits>>, members codes, scales and
/// biases (layout at the top of this file).
template <int GroupSize = 64, int Bits = 4>
using QuantizedMatrix = QuantizedMatrixOf<MlxAffine<GroupSize, Bits>>;

namespace detail {

/// Rows per thread range for row-parallel work on rows of `cols` values: about 64K values each.
inline std::size_t rows_per_range(Eigen::Index cols) {
    return std::max<std::size_t>(1, std::size_t{1 << 16} / static_cast<std::size_t>(std::max<Eigen::Index>(cols, 1)));
}

/// One row of weights read from Input (half or bfloat16; values widened exactly to float) quantized as
/// MLX quantizes that dtype, for a format whose rule MLX computes in float32 on the widened values
/// (affine): the float rule, then float per-group parameters rounded to Input, as MLX returns affine
/// scales and biases in the input's dtype. A parameter that overflows Input puts its group out of
/// range. A format whose rule rounds to the input's type on the way (mxfp4, mxfp8, nvfp4) overloads
/// this for its tag (docs/numerics.md N19).
template <class Format, class Input>
RowFault quantize_row(FormatTag<Format> format, InputTag<Input>, const float* values, std::size_t groups,
                      std::uint8_t* code_bytes, std::uint32_t* words, typename Format::scale_type* scales,
                      float* biases) {
    RowFault fault = quantize_row(format, values, groups, code_bytes, words, scales, biases);
    if constexpr (std::is_same_v<typename Format::scale_type, float>) {
        for (std::size_t g = 0; g < groups; ++g) {
            scales[g] = round_to<Input>(scales[g]);
            if (biases != nullptr) biases[g] = round_to<Input>(biases[g]);
            const bool finite = std::isfinite(scales[g]) && (biases == nullptr || std::isfinite(biases[g]));
            if (!finite && fault == RowFault::none) fault = RowFault::group_out_of_range;
        }
    }
    return fault;
}

/// The first group of a row that quantize_row for Input put out of range: the format's own answer
/// for its stored parameters (rounded to Input), unless the format overloads this for its tag.
template <class Format, class Input>
std::size_t first_group_out_of_range(FormatTag<Format> format, InputTag<Input>, const float* values,
                                     const typename Format::scale_type* scales, const float* biases,
                                     std::size_t groups) {
    return first_group_out_of_range(format, values, scales, biases, groups);
}

/// The format's row quantizer for weights of element type Input, found by overload on
/// FormatTag<Format>: quantize_row (one row, recorded; with an InputTag for the narrower types, above).
template <class Format, class Input>
struct FormatRowQuantizer {
    RowFault operator()(const float* values, std::size_t groups, std::uint8_t* code_bytes, std::uint32_t* words,
                        typename Format::scale_type* scales, float* biases) const {
        if constexpr (std::is_same_v<Input, float>)
            return quantize_row(FormatTag<Format>{}, values, groups, code_bytes, words, scales, biases);
        else
            return quantize_row(FormatTag<Format>{}, InputTag<Input>{}, values, groups, code_bytes, words, scales,
                                biases);
    }
};

/// quantize<Format> (below) with errors naming `function`, for the public entry points built on it,
/// on weights of element type Input (float, or half / bfloat16 widened exactly into `w`), each row
/// quantized by quantize_one_row (FormatRowQuantizer's signature; nvfp4_global_scale.hpp passes its
/// own). The format supplies, found by overload on FormatTag<Format>: first_group_out_of_range (which
/// group of a row the row quantizer reported as RowFault::group_out_of_range) and
/// group_out_of_range_text (why, for the message).
template <class Format, class Input, class Derived, class RowQuantizer = FormatRowQuantizer<Format, Input>>
QuantizedMatrixOf<Format> quantize_rows(const char* function, const Eigen::MatrixBase<Derived>& w,
                                        const RowQuantizer& quantize_one_row = {}) {
    static_assert(std::is_same_v<typename Derived::Scalar, float>, "quantize_rows reads float values");
    constexpr int group_size = Format::group_size;
    using Result = QuantizedMatrixOf<Format>;
    const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>> weights(w.derived());
    const Eigen::Index rows = weights.rows(), cols = weights.cols();
    if (rows == 0 || cols == 0)
        throw std::invalid_argument(std::string(function) + ": empty weight matrix (" + shape_text(rows, cols) + ")");
    if (cols % group_size != 0)
        throw std::invalid_argument(std::string(function) + ": in = " + std::to_string(cols) +
                                    " is not a multiple of GroupSize = " + std::to_string(group_size));
    Result result;
    const Eigen::Index groups = cols / group_size;
    result.codes.resize(rows, cols * Format::bits / 32);
    result.scales.resize(rows, groups);
    if constexpr (Format::has_biases) result.biases.resize(rows, groups);
    const auto biases_of = [&](Eigen::Index row) -> float* {
        if constexpr (Format::has_biases)
            return &result.biases(row, 0);
        else
            return nullptr;
    };
    // Faults are collected per range and the first in row-major order is reported after the pass, so the
    // message does not depend on thread timing: a NaN/Inf anywhere first, then a group out of the
    // format's range. Indices are row * groups + group; npos means none.
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    struct Faults {
        std::size_t non_finite_group = none;
        std::size_t out_of_range_group = none;
    };
    const Faults faults = parallel_reduce(
        static_cast<std::size_t>(rows), rows_per_range(cols), Faults{},
        [&](std::size_t begin, std::size_t end) {
            Faults found;
            std::vector<std::uint8_t> code_bytes(static_cast<std::size_t>(cols));
            for (std::size_t r = begin; r < end; ++r) {
                const auto row = static_cast<Eigen::Index>(r);
                const float* values = weights.data() + row * weights.outerStride();
                const std::size_t first_index = r * static_cast<std::size_t>(groups);
                const RowFault fault = quantize_one_row(values, static_cast<std::size_t>(groups), code_bytes.data(),
                                                        &result.codes(row, 0), &result.scales(row, 0), biases_of(row));
                if (fault == RowFault::non_finite_value) {
                    Eigen::Index column = 0;
                    while (std::isfinite(values[column])) ++column;
                    found.non_finite_group =
                        std::min(found.non_finite_group, first_index + static_cast<std::size_t>(column / group_size));
                } else if (fault == RowFault::group_out_of_range) {
                    const std::size_t g =
                        first_group_out_of_range(FormatTag<Format>{}, InputTag<Input>{}, values, &result.scales(row, 0),
                                                 biases_of(row), static_cast<std::size_t>(groups));
                    found.out_of_range_group = std::min(found.out_of_range_group, first_index + g);
                }
            }
            return found;
        },
        [](Faults total, const Faults& part) {
            total.non_finite_group = std::min(total.non_finite_group, part.non_finite_group);
            total.out_of_range_group = std::min(total.out_of_range_group, part.out_of_range_group);
            return total;
        });
    if (faults.non_finite_group != none) {
        const auto row = static_cast<Eigen::Index>(faults.non_finite_group / static_cast<std::size_t>(groups));
        const auto group = static_cast<Eigen::Index>(faults.non_finite_group % static_cast<std::size_t>(groups));
        Eigen::Index column = group * group_size;
        while (std::isfinite(weights(row, column))) ++column;
        throw std::invalid_argument(std::string(function) + ": weight at row " + std::to_string(row) + ", column " +
                                    std::to_string(column) + " is " + float_text(weights(row, column)) +
                                    " (NaN and Inf cannot be quantized)");
    }
    if (faults.out_of_range_group != none) {
        const auto row = faults.out_of_range_group / static_cast<std::size_t>(groups);
        const auto group = static_cast<Eigen::Index>(faults.out_of_range_group % static_cast<std::size_t>(groups));
        throw std::invalid_argument(
            std::string(function) + ": row " + std::to_string(row) + ", group " + std::to_string(group) + " (columns " +
            std::to_string(group * group_size) + " to " + std::to_string((group + 1) * group_size - 1) + ") " +
            group_out_of_range_text(FormatTag<Format>{}) +
            (std::is_same_v<Input, float> ? std::string()
                                          : std::string(" (") + input_type_name<Input>() + " weights)"));
    }
    return result;
}

/// body(InputTag<T>{}, values) for w of element type T: values is w itself for float, and w widened to
/// float (exactly) for half and bfloat16.
template <class Derived, class Body>
decltype(auto) with_widened(const Eigen::MatrixBase<Derived>& w, Body&& body) {
    using Input = typename Derived::Scalar;
    static_assert(is_input_type<Input>, "lowbit::quantize takes a float, Eigen::half or Eigen::bfloat16 matrix");
    if constexpr (std::is_same_v<Input, float>) {
        return body(InputTag<float>{}, w);
    } else {
        const RowMatrixXf widened = w.template cast<float>();
        return body(InputTag<Input>{}, widened);
    }
}

/// quantize<Format> (below) with errors naming `function`: quantize_rows on w's element type.
template <class Format, class Derived>
QuantizedMatrixOf<Format> quantize_named(const char* function, const Eigen::MatrixBase<Derived>& w) {
    return with_widened(w, [function]<class Input>(InputTag<Input>, const auto& values) {
        return quantize_rows<Format, Input>(function, values);
    });
}

/// The quantizer of every format, found by overload on the format's tag: the generic quantize<Format>
/// and QuantizedLinearOf<Format> call quantize_format(FormatTag<Format>{}, ...); a format whose
/// quantizer is not quantize_named's row-by-row scheme adds its own overload.
template <class Format, class Derived>
QuantizedMatrixOf<Format> quantize_format(FormatTag<Format>, const char* function,
                                          const Eigen::MatrixBase<Derived>& w) {
    return quantize_named<Format>(function, w);
}

}  // namespace detail

/// Quantizes w [out, in] (any float Eigen dense expression, either storage order) exactly as MLX's CPU
/// `mx.quantize(w, group_size, bits)` in affine mode: same codes, packed words, scales and biases.
/// Scales are negative when the group's larger-magnitude extreme is its max. An all-zero group gets
/// scale -1e-7, bias 0 and codes 0. A constant group c gets bias c and codes 0, and dequantizes to c,
/// when c / 1e-7 rounds (half to even) to a non-zero code, i.e. |c| > fl(5e-8); otherwise the bias is
/// 0 and the group dequantizes to 0 (as in MLX).
/// An Eigen::half or Eigen::bfloat16 w is quantized as MLX quantizes float16 / bfloat16 weights: the
/// same codes as its float values, and scales and biases rounded to w's type (docs/numerics.md N19).
/// Throws std::invalid_argument for an empty w, in % GroupSize != 0, a NaN/Inf (naming row and column),
/// or a group whose levels overflow float (max - min, or s * (2^Bits - 1) + b, is infinite: e.g. a group
/// holding FLT_MAX and -FLT_MAX; naming row and group: MLX returns an infinite scale and NaN or Inf
/// weights there), or, for half weights, whose scale or bias overflows half (a 1-bit group spanning
/// more than 65520). So every matrix quantize returns dequantizes to finite float values.
template <int GroupSize = 64, int Bits = 4, class Derived>
QuantizedMatrix<GroupSize, Bits> quantize(const Eigen::MatrixBase<Derived>& w) {
    return detail::quantize_named<MlxAffine<GroupSize, Bits>>("lowbit::quantize", w);
}

/// Quantizes w into Format (formats/): quantize<MlxAffine<GroupSize, Bits>>(w) is quantize<GroupSize,
/// Bits>(w) above. w's elements are float, Eigen::half or Eigen::bfloat16, each read as MLX reads
/// that dtype (docs/numerics.md N19). Throws as that format's quantizer says.
template <class Format, class Derived>
QuantizedMatrixOf<Format> quantize(const Eigen::MatrixBase<Derived>& w) {
    return detail::quantize_format(detail::FormatTag<Format>{}, "lowbit::quantize", w);
}

/// The matrix [rows, cols] that q stands for, by its format's rule, in element type T (float by
/// default; Eigen::half or Eigen::bfloat16 as MLX's `mx.dequantize(..., dtype=)`): every operation
/// rounded to T, its operands read as T. For MLX affine w = s * q + b per group, computed as fl(fl(s *
/// q) + b) with no fused multiply-add, so MLX's CPU values are reproduced (for half and bfloat16 when
/// s and b are values of that type, as quantize of such weights and MLX's checkpoints give them); for
/// the float formats one rounding of the exact value to T. A value beyond T's range is +-Inf, as in
/// MLX (which gives NaN instead of 0 where an mxfp4 scale overflows T). Throws std::invalid_argument
/// for inconsistent or empty parts.
template <class T = float, class Format>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> dequantize(const QuantizedMatrixOf<Format>& q) {
    static_assert(detail::is_input_type<T>, "lowbit::dequantize writes float, Eigen::half or Eigen::bfloat16");
    q.check_shapes("lowbit::dequantize");
    constexpr int group_size = Format::group_size;
    const Eigen::Index rows = q.rows(), cols = q.cols();
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> w(rows, cols);
    const auto group_scale = [&](Eigen::Index row, Eigen::Index group) {
        if constexpr (Format::has_biases)
            return detail::round_to<T>(Format::group_scale(q.scales(row, group)));
        else
            return Format::group_scale(q.scales(row, group));
    };
    detail::parallel_for(static_cast<std::size_t>(rows), detail::rows_per_range(cols),
                         [&](std::size_t begin, std::size_t end) {
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(cols));
        std::vector<float> products(static_cast<std::size_t>(cols));
        for (std::size_t r = begin; r < end; ++r) {
            const auto row = static_cast<Eigen::Index>(r);
            detail::kernels::unpack_codes<Format::bits>(&q.codes(row, 0), static_cast<std::size_t>(cols), codes.data());
            // Two passes on purpose: the product is stored before the bias is added, so no compiler
            // contraction setting can fuse them into an fma (MLX's CPU values are the unfused ones).
            for (Eigen::Index c = 0; c < cols; ++c)
                products[static_cast<std::size_t>(c)] = detail::round_to<T>(
                    group_scale(row, c / group_size) * Format::value(codes[static_cast<std::size_t>(c)]));
            for (Eigen::Index c = 0; c < cols; ++c) {
                float value = products[static_cast<std::size_t>(c)];
                if constexpr (Format::has_biases)
                    value = detail::round_to<T>(value + detail::round_to<T>(q.biases(row, c / group_size)));
                w(row, c) = T(value);
            }
        }
    });
    return w;
}

LOWBIT_END_NAMESPACE
