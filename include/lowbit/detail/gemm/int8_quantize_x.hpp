// Activation quantization of the int8 matmul path (docs/numerics.md N11), vectorized with xsimd and
// run once per call: per row m and weight group g, a[m,g] = fl(max |x| / 127) and
// xq = clamp(RNE(fl(x / a)), -127, 127) (0 where a = 0), bit-identical to
// reference::quantize_x_int8_groups (the same IEEE divisions and round-to-nearest-even); and the sums
// of the dequantized activations per group that MLX affine's bias term multiplies (xsum).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// One row x[0, K) (finite) to codes xq[0, K) and scales a[0, K / GroupSize).
template <class Arch, int GroupSize>
void quantize_x_int8_groups(const float* x, Eigen::Index K, std::int8_t* xq, float* a) {
    using batch = xsimd::batch<float, Arch>;
    constexpr Eigen::Index W = static_cast<Eigen::Index>(batch::size);
    static_assert(GroupSize % W == 0, "quantize_x_int8_groups: GroupSize must be a multiple of the lanes");
    for (Eigen::Index g = 0; g < K / GroupSize; ++g) {
        const float* group = x + g * GroupSize;
        batch largest(0.0f);
        for (Eigen::Index k = 0; k < GroupSize; k += W)
            largest = xsimd::max(largest, xsimd::abs(batch::load_unaligned(group + k)));
        const float scale = simd::reduce_max(largest) / 127.0f;
        a[g] = scale;
        std::int8_t* out = xq + g * GroupSize;
        if (!(scale > 0.0f)) {
            std::fill(out, out + GroupSize, std::int8_t{0});
            continue;
        }
        const batch divisor(scale), high(127.0f), low(-127.0f);
        for (Eigen::Index k = 0; k < GroupSize; k += W) {
            const batch code = xsimd::min(
                xsimd::max(simd::nearbyint(simd::div(batch::load_unaligned(group + k), divisor)), low), high);
            simd::store_bytes(xsimd::batch_cast<std::int32_t>(code), out + k);
        }
    }
}

/// The sum of one group's GroupSize activation codes, exact (|sum| <= 127 * GroupSize).
template <int GroupSize>
std::int32_t group_code_sum(const std::int8_t* codes) {
    std::int32_t sum = 0;
    for (int k = 0; k < GroupSize; ++k) sum += codes[k];
    return sum;
}

/// xsum[g] = fl(a[g] * float(sum of xq over group g)) for g < K / GroupSize: the sum of the activations
/// the codes stand for. The integer sum is exact (|sum| <= 127 * GroupSize < 2^24), so this is one
/// rounding and every kernel's xsum is the reference's bit for bit.
template <int GroupSize>
void dequantized_group_sums(const std::int8_t* xq, const float* a, Eigen::Index K, float* x_sum) {
    for (Eigen::Index g = 0; g < K / GroupSize; ++g)
        x_sum[g] = a[g] * static_cast<float>(group_code_sum<GroupSize>(xq + g * GroupSize));
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
