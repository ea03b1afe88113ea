// The element types quantize reads and dequantize writes: float, Eigen::half (IEEE binary16) and
// Eigen::bfloat16, MLX's float32, float16 and bfloat16. A half or bfloat16 value widens to float
// exactly; round_to<T> is the nearest T (ties to even, as MLX's casts: Eigen's conversions, which
// tests/io/test_float16.cpp checks bit for bit against the checkpoint readers' own), read back as the
// float it stands for. MLX computes some steps of its quantize and dequantize in the input's type; the
// formats' rules call round_to<T> where it does (docs/numerics.md N19).
#pragma once

#include "config.hpp"

#include <type_traits>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Whether T is an element type quantize reads (float, Eigen::half, Eigen::bfloat16).
template <class T>
inline constexpr bool is_input_type =
    std::is_same_v<T, float> || std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>;

/// An empty value whose type names the element type a matrix was quantized from.
template <class T>
struct InputTag {
    static_assert(is_input_type<T>, "lowbit: the element type must be float, Eigen::half or Eigen::bfloat16");
};

/// The T nearest to v (ties to even; beyond T's range +-Inf), as a float: exact, since every T value is
/// a float. The identity for float.
template <class T>
inline float round_to(float v) noexcept {
    if constexpr (std::is_same_v<T, float>)
        return v;
    else
        return static_cast<float>(T(v));
}

/// T's name as MLX's dtypes spell it, for messages.
template <class T>
constexpr const char* input_type_name() noexcept {
    if constexpr (std::is_same_v<T, float>)
        return "float32";
    else if constexpr (std::is_same_v<T, Eigen::half>)
        return "float16";
    else
        return "bfloat16";
}

}  // namespace detail
LOWBIT_END_NAMESPACE
