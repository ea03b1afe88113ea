// GPTQ's per-column step on a panel of rows (W stored column-major, so a column of the panel is
// contiguous): code every row's value of column j with its group's (scale, bias), replace the value by
// its level and write the error fed forward, e = (w - level) / U[j, j]. Written as plain loops over
// contiguous arrays that the compiler vectorizes (no -ffast-math needed: the rounding is the exact
// 1.5 * 2^23 trick after clamping, group_squared_error_fast's form). The reference codes each value by
// group_code (MLX's clamp(RNE((w - b) / s))); both give the same codes, levels and errors bit for bit
// when neither contracts the level s * q + b into an fma (the compiler may do so in both, or either).
//
// Also the per-row range of a group of columns (min and max over GroupSize contiguous columns), the
// start of MLX's scale and bias rule.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

#include "group_fit.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

/// For rows r < count: q = code of values[r] under (scales[r], biases[r]); codes[r] = q;
/// values[r] = level = s * q + b; errors[r] = (old values[r] - level) / pivot. A NaN value (error
/// feedback gone wrong, which the caller detects in `errors`) gets code 0, never a NaN converted to int.
template <int Bits>
inline void gptq_code_column(float* values, const float* scales, const float* biases, float pivot, Eigen::Index count,
                             std::uint8_t* codes, float* errors) noexcept {
    constexpr float max_code = static_cast<float>((1 << Bits) - 1);
    for (Eigen::Index r = 0; r < count; ++r) {
        const float v = values[r], s = scales[r], b = biases[r];
        // std::max(0, NaN) is 0: the clamp maps NaN into the code range (other values as either order)
        const float q = round_small_nonnegative(std::min(max_code, std::max(0.0f, (v - b) / s)));
        const float level = s * q + b;
        codes[r] = static_cast<std::uint8_t>(static_cast<std::int32_t>(q));
        values[r] = level;
        errors[r] = (v - level) / pivot;
    }
}

/// Per row r < count, low[r] and high[r]: the min and max of column[c][r] over the `group` columns
/// column[c] = first + c * stride (finite or not: a NaN propagates as std::min/std::max order it).
inline void group_column_range(const float* first, Eigen::Index stride, Eigen::Index group, Eigen::Index count,
                               float* low, float* high) noexcept {
    std::copy(first, first + count, low);
    std::copy(first, first + count, high);
    for (Eigen::Index c = 1; c < group; ++c) {
        const float* column = first + c * stride;
        for (Eigen::Index r = 0; r < count; ++r) {
            low[r] = std::min(low[r], column[r]);
            high[r] = std::max(high[r], column[r]);
        }
    }
}

namespace reference {

/// gptq_code_column by group_code, one value at a time.
template <int Bits>
inline void gptq_code_column(float* values, const float* scales, const float* biases, float pivot, Eigen::Index count,
                             std::uint8_t* codes, float* errors) noexcept {
    for (Eigen::Index r = 0; r < count; ++r) {
        const float q = group_code<Bits>(values[r], scales[r], biases[r]);
        const float level = scales[r] * q + biases[r];
        codes[r] = static_cast<std::uint8_t>(q);
        errors[r] = (values[r] - level) / pivot;
        values[r] = level;
    }
}

}  // namespace reference
}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
