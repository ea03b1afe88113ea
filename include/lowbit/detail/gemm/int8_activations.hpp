// The activations of the int8-activation GEMM (docs/numerics.md N11; layout in int8_panels.hpp),
// quantized per row and weight group and packed into row blocks, with the per-group sums the format's
// epilogue needs: MLX affine the f32 sums of the dequantized activations (its bias term), the formats whose codes the
// panels hold offset by a constant (mxfp4, nvfp4: e2m1/int8_gemm.hpp) the int32 sums of the quantized codes.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "../threading/parallel.hpp"
#include "int8_panels.hpp"
#include "int8_quantize_x.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The per-group row sums an epilogue reads: Int8RowBlocks::x_sum (f32, fl(a * sum of xq):
/// dequantized_group_sums) or code_sums (int32, sum of the quantized codes xq).
enum class Int8RowSums { x, codes };

/// Quantizes x [M, K] (finite, row stride x_stride) and packs it for the microkernel, S codes per panel
/// byte (Int8PanelLayout::steps); rows split across threads (each row's work is independent, so the
/// result does not depend on the thread count). With Replicas > 1 each group of GroupSize inputs is
/// packed Replicas times in a row, as virtual groups g * Replicas .. g * Replicas + Replicas - 1 of a
/// row of Replicas * K inputs, each with the group's codes, scale and sums (for weights whose group is
/// several digit planes: mxfp8/int8_gemm.hpp); each row is still quantized once.
template <class Arch, int GroupSize, int S, Int8RowSums Sums, int Replicas = 1>
Int8RowBlocks pack_activations_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, Eigen::Index K,
                                    Int8RowSplit split) {
    static_assert(Replicas >= 1, "pack_activations_int8: at least one copy of each group");
    const Eigen::Index wide = Replicas * K;  // packed inputs per row
    Int8RowBlocks blocks;
    blocks.split(M, split);
    blocks.quads_per_row = wide / 4;
    blocks.groups = wide / GroupSize;
    blocks.quads.resize(static_cast<std::size_t>(M * wide));
    blocks.a.resize(static_cast<std::size_t>(M * blocks.groups));
    if constexpr (Sums == Int8RowSums::x) {
        blocks.x_sum.resize(static_cast<std::size_t>(M * blocks.groups));
    } else {
        blocks.sum_groups = blocks.groups;
        blocks.code_sums.resize(static_cast<std::size_t>(M * blocks.groups));
    }
    const Eigen::Index groups = K / GroupSize, packed_groups = blocks.groups, words = wide / (4 * S);
    parallel_for(static_cast<std::size_t>(blocks.count), 1, [&](std::size_t begin, std::size_t end) {
        std::vector<std::int8_t> xq(static_cast<std::size_t>(K));
        std::vector<std::int8_t> replicated(Replicas > 1 ? static_cast<std::size_t>(wide) : 0);
        std::vector<float> a(static_cast<std::size_t>(groups)), sums(static_cast<std::size_t>(groups));
        for (auto block = static_cast<Eigen::Index>(begin); block < static_cast<Eigen::Index>(end); ++block) {
            const Eigen::Index r_count = blocks.rows(block), m0 = blocks.first_row(block);
            std::int8_t* quads = blocks.quads.data() + m0 * wide;
            // The group-g value of row r into every copy of group g.
            const auto put = [&](auto* out, Eigen::Index r, Eigen::Index g, auto value) {
                for (Eigen::Index copy = 0; copy < Replicas; ++copy) out[(g * Replicas + copy) * r_count + r] = value;
            };
            for (Eigen::Index r = 0; r < r_count; ++r) {
                const float* row = x + (m0 + r) * x_stride;
                quantize_x_int8_groups<Arch, GroupSize>(row, K, xq.data(), a.data());
                for (Eigen::Index g = 0; g < groups; ++g)
                    put(blocks.a.data() + m0 * packed_groups, r, g, a[static_cast<std::size_t>(g)]);
                if constexpr (Sums == Int8RowSums::x) {
                    dequantized_group_sums<GroupSize>(xq.data(), a.data(), K, sums.data());
                    for (Eigen::Index g = 0; g < groups; ++g)
                        put(blocks.x_sum.data() + m0 * packed_groups, r, g, sums[static_cast<std::size_t>(g)]);
                } else {
                    for (Eigen::Index g = 0; g < groups; ++g)
                        put(blocks.code_sums.data() + m0 * packed_groups, r, g,
                            group_code_sum<GroupSize>(xq.data() + g * GroupSize));
                }
                if constexpr (Replicas == 1) {
                    pack_row_quads<S>(xq.data(), words, r, r_count, quads);
                } else {
                    for (Eigen::Index g = 0; g < groups; ++g)
                        for (Eigen::Index copy = 0; copy < Replicas; ++copy)
                            std::copy(xq.begin() + g * GroupSize, xq.begin() + (g + 1) * GroupSize,
                                      replicated.begin() + (g * Replicas + copy) * GroupSize);
                    pack_row_quads<S>(replicated.data(), words, r, r_count, quads);
                }
            }
        }
    });
    return blocks;
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
