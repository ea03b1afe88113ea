// Per-group sums of x, which every format with a per-group offset needs (MLX affine's b * sum(x) term
// of every group, in its f32 and int8 kernels).
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// x_sum[m * groups + g] = sum_{k in group g} x[m * x_stride + k].
template <class Arch, int GroupSize>
void group_sums(const float* x, Index x_stride, Index M, Index K, float* x_sum) {
    using batch = xsimd::batch<float, Arch>;
    constexpr Index W = static_cast<Index>(batch::size);
    static_assert(GroupSize % W == 0, "group_sums: GroupSize must be a multiple of the float lanes");
    const Index groups = K / GroupSize;
    for (Index m = 0; m < M; ++m) {
        const float* row = x + m * x_stride;
        for (Index g = 0; g < groups; ++g) {
            batch sum(0.0f);
            for (Index k = g * GroupSize; k < (g + 1) * GroupSize; k += W) sum += batch::load_unaligned(row + k);
            x_sum[m * groups + g] = simd::reduce_add(sum);
        }
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
