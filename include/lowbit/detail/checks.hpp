// The argument checks every public entry point shares, and the text they put in messages. Each check
// throws std::invalid_argument whose message starts with the public function's name and names the
// bad value; nothing here is called on a hot path (kernels assume checked arguments).
#pragma once

#include "config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// A float as "%.9g" (round-trips), or nan / inf / -inf.
inline std::string float_text(float value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char text[48];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
    return text;
}

/// "RxC", the one spelling of a matrix shape in messages.
inline std::string shape_text(std::int64_t rows, std::int64_t cols) {
    return std::to_string(rows) + "x" + std::to_string(cols);
}

/// Throws std::invalid_argument (message starting with `function`) unless x is [M, in] and dy [M, out].
inline void check_backward_shapes(const char* function, std::int64_t x_rows, std::int64_t x_cols, std::int64_t dy_rows,
                                  std::int64_t dy_cols, std::int64_t in, std::int64_t out) {
    if (x_cols != in || dy_cols != out || x_rows != dy_rows)
        throw std::invalid_argument(std::string(function) + ": x is " + shape_text(x_rows, x_cols) + " and dy is " +
                                    shape_text(dy_rows, dy_cols) + " for a layer [" + std::to_string(out) + ", " +
                                    std::to_string(in) + "] (x must be [M, in] and dy [M, out])");
}

inline void require_same_size(const char* function, const char* first, std::size_t first_size, const char* second,
                              std::size_t second_size) {
    if (first_size != second_size)
        throw std::invalid_argument(std::string(function) + ": " + first + " has " + std::to_string(first_size) +
                                    " elements but " + second + " has " + std::to_string(second_size));
}

/// A quantization scale: finite and at least FLT_MIN, the smallest normal float (1.17549435e-38). A
/// subnormal scale has no finite reciprocal once below about 2.9e-39 (x * (1 / s) is then inf for every
/// x != 0 and NaN for x = 0), and none is a meaningful step, so lowbit refuses the whole subnormal range.
inline void require_valid_scale(const char* function, float scale, const char* name = "scale") {
    if (!(std::isfinite(scale) && scale > 0.0f))
        throw std::invalid_argument(std::string(function) + ": " + name + " = " + float_text(scale) +
                                    " must be finite and > 0");
    if (scale < std::numeric_limits<float>::min())
        throw std::invalid_argument(std::string(function) + ": " + name + " = " + float_text(scale) +
                                    " is subnormal: scales must be at least FLT_MIN = " +
                                    float_text(std::numeric_limits<float>::min()) + " (so that 1 / scale is finite)");
}

/// rows * cols for sizes given as signed integers: throws for a negative size or a product that does
/// not fit in std::size_t (and in the signed index type).
inline std::size_t checked_element_count(const char* function, std::int64_t rows, std::int64_t cols) {
    if (rows < 0 || cols < 0)
        throw std::invalid_argument(std::string(function) + ": rows = " + std::to_string(rows) + " and cols = " +
                                    std::to_string(cols) + " must be >= 0");
    const auto max_count = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const auto r = static_cast<std::uint64_t>(rows), c = static_cast<std::uint64_t>(cols);
    if (c != 0 && r > max_count / c)
        throw std::invalid_argument(std::string(function) + ": rows * cols = " + std::to_string(rows) + " * " +
                                    std::to_string(cols) + " overflows");
    return static_cast<std::size_t>(r * c);
}

/// Every element finite (and at least one).
inline void require_finite_data(const char* function, std::span<const float> values) {
    if (values.empty()) throw std::invalid_argument(std::string(function) + ": the input is empty");
    for (std::size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i]))
            throw std::invalid_argument(std::string(function) + ": element " + std::to_string(i) + " = " +
                                        float_text(values[i]) + " is not finite");
}

}  // namespace detail
LOWBIT_END_NAMESPACE
