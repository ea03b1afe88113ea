// The threaded ternary x int8 matmul (docs/numerics.md N14) on the SIMD raw-sum kernels of this folder:
// GEMV (M = 1) and GEMM (blocks of 4 activation rows share each load of codes). The outputs are the
// reference's (reference.hpp) bit for bit: the raw sums are exact integers and the same
// ternary_output_* turns them into floats.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../arch/x86_int8.hpp"
#include "../threading/parallel.hpp"
#include "kernel_avx2.hpp"
#include "kernel_avx512_vnni.hpp"
#include "reference.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ternary::kernels {

/// True for the structs of detail/arch/x86_int8.hpp that have ternary kernels in this build.
template <class Ops>
inline constexpr bool has_ternary_kernels =
#if defined(LOWBIT_HAS_INT8_AVX512_VNNI)
    std::is_same_v<Ops, simd::int8::avx512_vnni> ||
#endif
#if defined(LOWBIT_HAS_INT8_AVX2)
    std::is_same_v<Ops, simd::int8::avx2> ||
#endif
    false;

/// The raw-sum kernel of Ops.
template <class Ops, TernaryFormat Format, bool PerGroup, int MR>
LOWBIT_ALWAYS_INLINE inline void row_dots([[maybe_unused]] const std::uint8_t* row, [[maybe_unused]] Eigen::Index n_chunks,
                                          [[maybe_unused]] const std::int8_t* const* x,
                                          [[maybe_unused]] std::int32_t* sums, [[maybe_unused]] Eigen::Index stride) {
    // [[maybe_unused]]: a target with neither instruction set compiles no branch below (and no caller).
    static_assert(has_ternary_kernels<Ops>,
                  "ternary kernels: Ops must be an instruction set of detail/arch/x86_int8.hpp built for this target");
#if defined(LOWBIT_HAS_INT8_AVX512_VNNI)
    if constexpr (std::is_same_v<Ops, simd::int8::avx512_vnni>) {
        row_dots_avx512_vnni<Format, PerGroup, MR>(row, n_chunks, x, sums, stride);
        return;
    }
#endif
#if defined(LOWBIT_HAS_INT8_AVX2)
    if constexpr (std::is_same_v<Ops, simd::int8::avx2>) {
        row_dots_avx2<Format, PerGroup, MR>(row, n_chunks, x, sums, stride);
        return;
    }
#endif
}

template <class Ops, TernaryFormat Format, bool PerGroup>
void ternary_matmul_typed(const PackedTernaryView& w, const TernaryActivations& act, float* out,
                          Eigen::Index out_stride) {
    constexpr int S = steps(Format);
    const Eigen::Index N = w.rows, M = act.rows, n_chunks = chunks(Format, w.cols), groups = w.groups();
    const Eigen::Index stride = PerGroup ? n_chunks * S : 1;
    // About 256 KiB of codes per range (a worker's worth), walked in slices of about 128 KiB that stay
    // in L2 while every block of 4 activation rows (in L1) passes over them: the activations are then
    // read from memory once per slice, not once per 8 KiB (measured at M = 512, K = 4096: 2.5x faster).
    const std::size_t grain =
        static_cast<std::size_t>(std::max<Eigen::Index>(4, (Eigen::Index{1} << 18) / w.row_bytes));
    const Eigen::Index slice = std::max<Eigen::Index>(1, (Eigen::Index{1} << 17) / w.row_bytes);
    parallel_for(static_cast<std::size_t>(N), grain, [&](std::size_t begin, std::size_t end) {
        std::vector<std::int32_t> sums(static_cast<std::size_t>(4 * stride));
        auto rows = [&]<int MR>(std::integral_constant<int, MR>, Eigen::Index m0, Eigen::Index n0, Eigen::Index n1) {
            const std::int8_t* x[MR];
            for (int m = 0; m < MR; ++m) x[m] = act.row(m0 + m);
            for (Eigen::Index n = n0; n < n1; ++n) {
                row_dots<Ops, Format, PerGroup, MR>(w.codes + n * w.row_bytes, n_chunks, x, sums.data(), stride);
                const float bias = w.bias != nullptr ? w.bias[n] : 0.0f;
                for (int m = 0; m < MR; ++m) {
                    const std::size_t row = static_cast<std::size_t>(m0 + m);
                    std::int32_t* isum = sums.data() + m * stride;
                    if constexpr (PerGroup) {
                        const std::int32_t* xsum = act.group_sums.data() + row * static_cast<std::size_t>(groups);
                        for (Eigen::Index g = 0; g < groups; ++g) isum[g] -= xsum[g];
                        out[(m0 + m) * out_stride + n] =
                            ternary_output_per_group(isum, w.scales + n * groups, groups, act.scales[row], bias);
                    } else {
                        out[(m0 + m) * out_stride + n] =
                            ternary_output_per_tensor(isum[0] - act.sums[row], w.scales[0], act.scales[row], bias);
                    }
                }
            }
        };
        for (Eigen::Index n0 = static_cast<Eigen::Index>(begin); n0 < static_cast<Eigen::Index>(end); n0 += slice) {
            const Eigen::Index n1 = std::min<Eigen::Index>(n0 + slice, static_cast<Eigen::Index>(end));
            Eigen::Index m = 0;
            for (; m + 4 <= M; m += 4) rows(std::integral_constant<int, 4>{}, m, n0, n1);
            if (M - m == 3) rows(std::integral_constant<int, 3>{}, m, n0, n1);
            if (M - m == 2) rows(std::integral_constant<int, 2>{}, m, n0, n1);
            if (M - m == 1) rows(std::integral_constant<int, 1>{}, m, n0, n1);
        }
    });
}

/// out[m * out_stride + n] = the ternary matmul of act and w with the kernels of Ops; threads inside.
template <class Ops>
void ternary_matmul(const PackedTernaryView& w, const TernaryActivations& act, float* out, Eigen::Index out_stride) {
    if (w.format == TernaryFormat::i2) {
        if (w.per_tensor)
            ternary_matmul_typed<Ops, TernaryFormat::i2, false>(w, act, out, out_stride);
        else
            ternary_matmul_typed<Ops, TernaryFormat::i2, true>(w, act, out, out_stride);
    } else {
        if (w.per_tensor)
            ternary_matmul_typed<Ops, TernaryFormat::tq1, false>(w, act, out, out_stride);
        else
            ternary_matmul_typed<Ops, TernaryFormat::tq1, true>(w, act, out, out_stride);
    }
}

}  // namespace detail::ternary::kernels
LOWBIT_END_NAMESPACE
