// BitNet b1.58 quantizers (docs/numerics.md N8).
//
//   weights:     gamma = mean |w| over a group of `group_size` consecutive inputs of one output row
//                (default 64, as bitnet-quantize) or over the whole tensor (as the paper); gamma == 0
//                gives scale 1; codes t = clamp(R(w / gamma), -1, 1) in {-1, 0, 1}; w ~ t * gamma
//   activations: per row (token), s = max |x| / 127 (1 when the row is all zero, or when max |x| is so
//                small, below about 9e-44, that max |x| / 127 underflows to 0; codes are then 0; lowered
//                by an ulp or two when max |x| is so near FLT_MAX that 127 s would overflow);
//                codes clamp(R(x / s), -127, 127); x ~ q * s
// R is half away from zero unless a Rounding is given (Rounding::stochastic is not offered here).
// Sums of |w| are accumulated in double and rounded once, so gamma is the float nearest the mean.
//
// Weights are [rows = out, cols = in]: an Eigen dense matrix (any storage order) or a row-major span
// with its rows and cols. Errors (std::invalid_argument): empty input, a NaN or infinite element,
// cols not a multiple of group_size, group_size < 1, negative rows or cols or a product that overflows,
// span size != rows * cols, Rounding::stochastic. Hand-built TernaryWeights / Int8Activations are
// checked by check_shapes() before dequantize() reads them.
//
// Layouts (row-major, as the rows of the weight matrix):
//   TernaryWeights::codes   int8  [rows, cols]                 one code per weight
//   TernaryWeights::scales  float [rows, cols / group_size]    gamma of group g of row r at (r, g);
//                                  per tensor: [1, 1]
//   Int8Activations::codes  int8  [rows, cols];  Int8Activations::scales float [rows]
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "detail/checks.hpp"
#include "detail/tensor_like.hpp"
#include "fake_quantize.hpp"
#include "matrix_types.hpp"
#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE


/// Ternary weights with their absmean scales (layout above).
struct TernaryWeights {
    RowMatrixXi8 codes;
    RowMatrixXf scales;
    int group_size = 64;  ///< columns per scale; equals cols for per-tensor quantization (scales 1 x 1)
    bool per_tensor = false;

    /// Throws std::invalid_argument (message starting with `function`) unless codes is non-empty and
    /// scales and group_size describe it: per tensor, scales 1 x 1 and group_size == cols; per group,
    /// group_size >= 1 dividing cols and scales [rows, cols / group_size].
    void check_shapes(const char* function) const {
        const std::string shapes = "codes " + detail::shape_text(codes.rows(), codes.cols()) + ", scales " +
                                   detail::shape_text(scales.rows(), scales.cols()) +
                                   ", group_size = " + std::to_string(group_size);
        if (codes.size() == 0) throw std::invalid_argument(std::string(function) + ": empty ternary weights (" + shapes + ")");
        const bool consistent =
            per_tensor ? (scales.rows() == 1 && scales.cols() == 1 && group_size == codes.cols())
                       : (group_size >= 1 && codes.cols() % group_size == 0 && scales.rows() == codes.rows() &&
                          scales.cols() == codes.cols() / group_size);
        if (!consistent)
            throw std::invalid_argument(std::string(function) + ": " + shapes + " do not describe one " +
                                        (per_tensor ? "per-tensor" : "per-group") + " ternary matrix");
    }

    /// codes * scale, [rows, cols]. Throws as check_shapes.
    RowMatrixXf dequantize() const {
        check_shapes("lowbit::TernaryWeights::dequantize");
        RowMatrixXf weights(codes.rows(), codes.cols());
        for (Eigen::Index r = 0; r < codes.rows(); ++r)
            for (Eigen::Index c = 0; c < codes.cols(); ++c) {
                const float scale = per_tensor ? scales(0, 0) : scales(r, c / group_size);
                weights(r, c) = static_cast<float>(codes(r, c)) * scale;
            }
        return weights;
    }
};

/// Per-row int8 activations with their absmax scales (layout above).
struct Int8Activations {
    RowMatrixXi8 codes;
    Eigen::VectorXf scales;

    /// Throws std::invalid_argument (message starting with `function`) unless scales has one value per
    /// row of codes.
    void check_shapes(const char* function) const {
        if (scales.size() != codes.rows())
            throw std::invalid_argument(std::string(function) + ": codes " +
                                        detail::shape_text(codes.rows(), codes.cols()) + " need " +
                                        std::to_string(codes.rows()) + " scales, got " + std::to_string(scales.size()));
    }

    /// codes * scale of the row, [rows, cols]. Throws as check_shapes.
    RowMatrixXf dequantize() const {
        check_shapes("lowbit::Int8Activations::dequantize");
        RowMatrixXf values(codes.rows(), codes.cols());
        for (Eigen::Index r = 0; r < codes.rows(); ++r)
            for (Eigen::Index c = 0; c < codes.cols(); ++c) values(r, c) = static_cast<float>(codes(r, c)) * scales(r);
        return values;
    }
};

namespace detail {

inline void require_deterministic(const char* function, Rounding rounding) {
    if (rounding == Rounding::stochastic)
        throw std::invalid_argument(std::string(function) + ": rounding = stochastic is not supported here");
}

/// mean |x| of finite values, 1 when it is 0.
inline float absmean_of(std::span<const float> values) {
    double sum = 0.0;
    for (float value : values) sum += std::fabs(static_cast<double>(value));
    const float mean = static_cast<float>(sum / static_cast<double>(values.size()));
    return mean > 0.0f ? mean : 1.0f;
}

/// max |x| / 127; 1 when that is 0 (all zero, or max |x| so small the quotient underflows); lowered by
/// the fewest ulps that keep 127 s finite when max |x| is within rounding of FLT_MAX.
inline float absmax_scale_of(std::span<const float> values) {
    float largest = 0.0f;
    for (float value : values) largest = std::fmax(largest, std::fabs(value));
    float scale = largest / 127.0f;
    if (!(scale > 0.0f)) return 1.0f;
    while (!std::isfinite(127.0f * scale)) scale = std::nextafter(scale, 0.0f);
    return scale;
}

/// clamp(R(x / scale), -limit, limit) as an integer code.
inline std::int8_t symmetric_code(float x, float scale, float limit, Rounding rounding) {
    return static_cast<std::int8_t>(clamp_code(round_deterministic(rounding, x / scale), -limit, limit));
}

/// Row-major [rows, cols] copy of an Eigen dense matrix (borrowed when it already is one).
template <class Derived>
using RowMajorInput = ContiguousInput<Derived, RowMatrixXf>;

inline TernaryWeights quantize_ternary_rows(std::span<const float> weights, Eigen::Index rows, Eigen::Index cols,
                                            int group_size, bool per_tensor, Rounding rounding, const char* function) {
    require_deterministic(function, rounding);
    if (checked_element_count(function, rows, cols) != weights.size())
        throw std::invalid_argument(std::string(function) + ": " + std::to_string(weights.size()) +
                                    " elements are not rows * cols = " + std::to_string(rows) + " * " +
                                    std::to_string(cols));
    require_finite_data(function, weights);
    if (!per_tensor) {
        if (group_size < 1)
            throw std::invalid_argument(std::string(function) + ": group_size = " + std::to_string(group_size) +
                                        " must be >= 1");
        if (cols % group_size != 0)
            throw std::invalid_argument(std::string(function) + ": cols = " + std::to_string(cols) +
                                        " is not a multiple of group_size = " + std::to_string(group_size));
    }
    TernaryWeights result;
    result.per_tensor = per_tensor;
    result.group_size = per_tensor ? static_cast<int>(cols) : group_size;
    result.codes.resize(rows, cols);
    const Eigen::Index groups = per_tensor ? 1 : cols / group_size;
    result.scales.resize(per_tensor ? 1 : rows, groups);
    if (per_tensor) result.scales(0, 0) = absmean_of(weights);
    for (Eigen::Index r = 0; r < rows; ++r) {
        for (Eigen::Index g = 0; g < groups; ++g) {
            const Eigen::Index width = per_tensor ? cols : group_size;
            const std::span<const float> group = weights.subspan(static_cast<std::size_t>(r * cols + g * width),
                                                                 static_cast<std::size_t>(width));
            const float gamma = per_tensor ? result.scales(0, 0) : absmean_of(group);
            if (!per_tensor) result.scales(r, g) = gamma;
            for (Eigen::Index j = 0; j < width; ++j)
                result.codes(r, g * width + j) = symmetric_code(group[static_cast<std::size_t>(j)], gamma, 1.0f, rounding);
        }
    }
    return result;
}

inline Int8Activations quantize_int8_rows(std::span<const float> values, Eigen::Index rows, Eigen::Index cols,
                                          Rounding rounding, const char* function) {
    require_deterministic(function, rounding);
    if (checked_element_count(function, rows, cols) != values.size())
        throw std::invalid_argument(std::string(function) + ": " + std::to_string(values.size()) +
                                    " elements are not rows * cols = " + std::to_string(rows) + " * " +
                                    std::to_string(cols));
    require_finite_data(function, values);
    Int8Activations result;
    result.codes.resize(rows, cols);
    result.scales.resize(rows);
    for (Eigen::Index r = 0; r < rows; ++r) {
        const std::span<const float> row = values.subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols));
        const float scale = absmax_scale_of(row);
        result.scales(r) = scale;
        for (Eigen::Index c = 0; c < cols; ++c)
            result.codes(r, c) = symmetric_code(row[static_cast<std::size_t>(c)], scale, 127.0f, rounding);
    }
    return result;
}

}  // namespace detail

/// gamma = mean |x| (1 when it is 0). Throws for empty or non-finite input.
inline float absmean_scale(std::span<const float> x) {
    detail::require_finite_data("lowbit::absmean_scale", x);
    return detail::absmean_of(x);
}
template <detail::TensorLike X>
float absmean_scale(const X& x) {
    const detail::ContiguousInput<X> input(x);
    return absmean_scale(input.span());
}

/// s = max |x| / 127, the int8 activation scale (1 when x is all zero or max |x| / 127 underflows to 0).
/// Throws for empty or non-finite input.
inline float absmax_scale(std::span<const float> x) {
    detail::require_finite_data("lowbit::absmax_scale", x);
    return detail::absmax_scale_of(x);
}
template <detail::TensorLike X>
float absmax_scale(const X& x) {
    const detail::ContiguousInput<X> input(x);
    return absmax_scale(input.span());
}

/// Per-group absmean ternary quantization of a row-major [rows, cols] span.
inline TernaryWeights quantize_ternary(std::span<const float> weights, Eigen::Index rows, Eigen::Index cols,
                                       int group_size = 64, Rounding rounding = Rounding::half_away_from_zero) {
    return detail::quantize_ternary_rows(weights, rows, cols, group_size, false, rounding, "lowbit::quantize_ternary");
}
template <class Derived>
TernaryWeights quantize_ternary(const Eigen::DenseBase<Derived>& weights, int group_size = 64,
                                Rounding rounding = Rounding::half_away_from_zero) {
    const detail::RowMajorInput<Derived> input(weights.derived());
    return quantize_ternary(input.span(), weights.rows(), weights.cols(), group_size, rounding);
}

/// One absmean scale for the whole tensor (the paper's rule).
inline TernaryWeights quantize_ternary_per_tensor(std::span<const float> weights, Eigen::Index rows, Eigen::Index cols,
                                                  Rounding rounding = Rounding::half_away_from_zero) {
    return detail::quantize_ternary_rows(weights, rows, cols, 0, true, rounding, "lowbit::quantize_ternary_per_tensor");
}
template <class Derived>
TernaryWeights quantize_ternary_per_tensor(const Eigen::DenseBase<Derived>& weights,
                                           Rounding rounding = Rounding::half_away_from_zero) {
    const detail::RowMajorInput<Derived> input(weights.derived());
    return quantize_ternary_per_tensor(input.span(), weights.rows(), weights.cols(), rounding);
}

/// Training form: quantize per group then dequantize, same shape and type as the input (gradients:
/// ste_backward, the identity).
template <class Derived>
typename Derived::PlainObject fake_quantize_ternary(const Eigen::DenseBase<Derived>& weights, int group_size = 64,
                                                    Rounding rounding = Rounding::half_away_from_zero) {
    typename Derived::PlainObject result = quantize_ternary(weights, group_size, rounding).dequantize();
    return result;
}
template <class Derived>
typename Derived::PlainObject fake_quantize_ternary_per_tensor(const Eigen::DenseBase<Derived>& weights,
                                                               Rounding rounding = Rounding::half_away_from_zero) {
    typename Derived::PlainObject result = quantize_ternary_per_tensor(weights, rounding).dequantize();
    return result;
}

/// Span forms of the training quantizers: out (row-major [rows, cols], the size of w) = dequantize(quantize(w)).
inline void fake_quantize_ternary(std::span<const float> weights, std::span<float> out, Eigen::Index rows,
                                  Eigen::Index cols, int group_size = 64,
                                  Rounding rounding = Rounding::half_away_from_zero) {
    detail::require_same_size("lowbit::fake_quantize_ternary", "weights", weights.size(), "out", out.size());
    const RowMatrixXf result = quantize_ternary(weights, rows, cols, group_size, rounding).dequantize();
    std::copy(result.data(), result.data() + result.size(), out.begin());
}

/// Per-token (row) absmax int8 quantization of a row-major [rows, cols] span.
inline Int8Activations quantize_activations_int8(std::span<const float> x, Eigen::Index rows, Eigen::Index cols,
                                                 Rounding rounding = Rounding::half_away_from_zero) {
    return detail::quantize_int8_rows(x, rows, cols, rounding, "lowbit::quantize_activations_int8");
}
template <class Derived>
Int8Activations quantize_activations_int8(const Eigen::DenseBase<Derived>& x,
                                          Rounding rounding = Rounding::half_away_from_zero) {
    const detail::RowMajorInput<Derived> input(x.derived());
    return quantize_activations_int8(input.span(), x.rows(), x.cols(), rounding);
}

inline void fake_quantize_activations_int8(std::span<const float> x, std::span<float> out, Eigen::Index rows,
                                           Eigen::Index cols, Rounding rounding = Rounding::half_away_from_zero) {
    detail::require_same_size("lowbit::fake_quantize_activations_int8", "x", x.size(), "out", out.size());
    const RowMatrixXf result = quantize_activations_int8(x, rows, cols, rounding).dequantize();
    std::copy(result.data(), result.data() + result.size(), out.begin());
}

/// Training form of the activation quantizer: per-row quantize then dequantize, same shape and type.
template <class Derived>
typename Derived::PlainObject fake_quantize_activations_int8(const Eigen::DenseBase<Derived>& x,
                                                             Rounding rounding = Rounding::half_away_from_zero) {
    typename Derived::PlainObject result = quantize_activations_int8(x, rounding).dequantize();
    return result;
}

LOWBIT_END_NAMESPACE
