// The min and max of one group of Count finite values, with xsimd lane-wise min / max then the lanes':
// exactly the scalar loop's result (min and max of finite floats do not depend on the order, up to the
// sign of a zero extreme, which MLX's scale and bias rule does not see: quantize_kernel.hpp says why).
// The reference is reference::group_range, the loop clip search used before.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../simd.hpp"
#include "../unroll.hpp"

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

/// {min, max} of values[0 .. Count) (finite), in the lanes of the translation unit's instruction set.
template <int Count>
inline std::pair<float, float> group_range(const float* values) noexcept {
    if constexpr (simd::enabled && Count % simd::width<float> == 0) {
        using fbatch = simd::batch<float>;
        constexpr int W = static_cast<int>(fbatch::size);
        fbatch low = fbatch::load_unaligned(values), high = low;
        static_for<Count / W - 1>([&](auto step) {
            const fbatch v = fbatch::load_unaligned(values + (decltype(step)::value + 1) * W);
            low = simd::min(v, low);
            high = simd::max(v, high);
        });
        // Lanes reduced from memory: xsimd 13's reduce_min / reduce_max swizzle from an undefined
        // register that GCC 12 reports once inlined here (GCC bug 105593).
        alignas(64) std::array<float, W> low_lanes{}, high_lanes{};
        low.store_aligned(low_lanes.data());
        high.store_aligned(high_lanes.data());
        return {*std::min_element(low_lanes.begin(), low_lanes.end()), *std::max_element(high_lanes.begin(), high_lanes.end())};
    } else {
        return reference::group_range<Count>(values);
    }
}

}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
