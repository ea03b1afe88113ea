// The min and max of one group of Count finite values, with xsimd lane-wise min / max then the lanes':
// exactly the scalar loop's result (min and max of finite floats do not depend on the order, up to the
// sign of a zero extreme, which MLX's scale and bias rule does not see: quantize_kernel.hpp says why).
// The reference is reference::group_range, the loop clip search used before.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <utility>

#include "../mlx_affine/quantize_kernel.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

namespace reference {

/// {min, max} of values[0 .. Count), one value at a time.
template <int Count>
inline std::pair<float, float> group_range(const float* values) noexcept {
    float low = values[0], high = values[0];
    for (int i = 1; i < Count; ++i) {
        low = std::min(low, values[i]);
        high = std::max(high, values[i]);
    }
    return {low, high};
}

}  // namespace reference

/// {min, max} of values[0 .. Count) (finite), in the lanes of the translation unit's instruction set
/// (kernels::lane_extremes, the first pass of the quantize kernel; its unused poison is optimised away).
template <int Count>
inline std::pair<float, float> group_range(const float* values) noexcept {
    if constexpr (simd::enabled && Count % simd::width<float> == 0) {
        const auto lanes = kernels::lane_extremes<simd::arch, Count>(values);
        return {simd::reduce_min(lanes.low), simd::reduce_max(lanes.high)};
    } else {
        return reference::group_range<Count>(values);
    }
}

}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
