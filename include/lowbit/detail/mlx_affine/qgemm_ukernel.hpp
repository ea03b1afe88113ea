// QgemmF32Ukernel: the register-blocked microkernel of qgemm_f32 (f32 activations on MLX affine codes
// unpacked into a float panel by qgemm_panel.hpp), any xsimd Arch. Epilogue: out = (first ? 0 : out)
// + s * acc + b * sum(x). f32 accumulation, no integer arithmetic.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>

#include <Eigen/Core>

#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// The qgemm_f32 microkernel: an MR x NR register block of x rows times one panel of NR output columns,
/// over one group, with broadcast-x fmas (2 accumulators of W lanes per row). Its tile sizes are declared
/// here and read by the driver and by the tests' shape loops.
template <class Arch>
struct QgemmF32Ukernel {
    static constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
    static constexpr int NR = 2 * W;                 ///< panel columns per register block
    static constexpr int MR = W >= 16 ? 8 : 6;       ///< x rows per register block (MR * 2 accumulators)
    static constexpr Index NC = (256 / NR) * NR;     ///< output columns per tile (one panel)
    static constexpr Index MC = 256;                 ///< x rows per tile

    /// One Rows x NR register block over one group: out = (first ? 0 : out) + s * sum(x*q) + b * sum(x).
    /// Writes only the first `cols` columns of out.
    template <int Rows, int GroupSize>
    static void run(const float* panel, Index panel_stride, const float* x, Index x_stride, const float* x_sum,
                    Index x_sum_stride, const float* scales, const float* biases, float* out, Index out_stride, Index cols,
                    bool first) {
        using fbatch = xsimd::batch<float, Arch>;
        std::array<fbatch, Rows> acc0, acc1;
        acc0.fill(fbatch(0.0f));
        acc1.fill(fbatch(0.0f));
        for (int k = 0; k < GroupSize; ++k) {
            const fbatch b0 = fbatch::load_unaligned(panel + k * panel_stride);
            const fbatch b1 = fbatch::load_unaligned(panel + k * panel_stride + W);
            for (int r = 0; r < Rows; ++r) {
                const fbatch a(x[r * x_stride + k]);
                acc0[r] = simd::fma(a, b0, acc0[r]);
                acc1[r] = simd::fma(a, b1, acc1[r]);
            }
        }
        const fbatch s0 = fbatch::load_unaligned(scales), s1 = fbatch::load_unaligned(scales + W);
        const fbatch c0 = fbatch::load_unaligned(biases), c1 = fbatch::load_unaligned(biases + W);
        for (int r = 0; r < Rows; ++r) {
            const fbatch sum_x(x_sum[r * x_sum_stride]);
            fbatch v0 = simd::fma(acc0[r], s0, c0 * sum_x);
            fbatch v1 = simd::fma(acc1[r], s1, c1 * sum_x);
            float* o = out + r * out_stride;
            if (cols == NR) {
                if (!first) {
                    v0 += fbatch::load_unaligned(o);
                    v1 += fbatch::load_unaligned(o + W);
                }
                v0.store_unaligned(o);
                v1.store_unaligned(o + W);
            } else {
                alignas(64) std::array<float, 2 * 64> lanes{};
                v0.store_unaligned(lanes.data());
                v1.store_unaligned(lanes.data() + W);
                for (Index j = 0; j < cols; ++j) o[j] = (first ? 0.0f : o[j]) + lanes[static_cast<std::size_t>(j)];
            }
        }
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
