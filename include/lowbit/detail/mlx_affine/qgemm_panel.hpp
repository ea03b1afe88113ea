// qgemm_f32 panel packing: the codes of a slice of groups of NR output columns, unpacked and scaled
// into a float panel block with the columns' biases, for QgemmF32Ukernel. Vector unpack for Bits in
// {2, 4, 8}, the scalar block unpacker otherwise. The driver builds one block at a time, right before
// its register blocks read it. Layout: per group of the slice, GroupSize rows of scaled codes s * q
// then one row of biases b, each NR floats, so a register block streams its block in order (no stride
// that maps its rows onto a few L1 sets):
//
//   | g0: k = 0 | k = 1 | ... | k = G-1 | b | g0+1: k = 0 | ... | b | ...
//   element (group i of the slice, row k <= G, column j < NR) at panel_offset(i, k, j) =
//       (i * (G + 1) + k) * NR + j;   panel_floats(groups) = groups * (G + 1) * NR in all;
//   columns nc .. are zero. s * q is rounded once to float (docs/numerics.md N10).
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../../quantized_matrix.hpp"
#include "../simd.hpp"
#include "../unroll.hpp"
#include "matmul_common.hpp"
#include "packing.hpp"
#include "qgemm_ukernel.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// Offset of element (group i of the slice, row k <= GroupSize, column j < NR) in a panel block.
template <class Arch, int GroupSize>
constexpr Index panel_offset(Index i, Index k, Index j) noexcept {
    return (i * (GroupSize + 1) + k) * QgemmF32Ukernel<Arch>::NR + j;
}

/// Floats in a panel block of `groups` groups.
template <class Arch, int GroupSize>
constexpr Index panel_floats(Index groups) noexcept {
    return panel_offset<Arch, GroupSize>(groups, 0, 0);
}

/// Whether build_panel uses its words_t scratch (the formats whose codes fill whole words).
template <int GroupSize, int Bits>
inline constexpr bool panel_transposes_words = MlxAffine<GroupSize, Bits>::codes_in_whole_words;

/// Writes groups [g0, g0 + groups) of columns [n0, n0 + nc), nc <= NR, into panel (panel_floats(groups)
/// floats), the layout above: per group GroupSize rows of fl(s * q), then the biases; columns nc ..
/// NR-1 are zero. Scratch: slice_scales, groups * NR floats; words_t, groups * words_per_group * NR words
/// (Arch::alignment()-aligned) when panel_transposes_words, else unused. The codes are turned from
/// rows of q into columns W x W words at a time (simd::transpose_words), with the same columns' next
/// slice prefetched (about 0.3 ms of the 6.6 ms GEMM at M = 32, q4 4096 x 4096, twice that for q8;
/// benchmarks/README.md).
template <class Arch, int GroupSize, int Bits>
void build_panel(const QuantizedMatrix<GroupSize, Bits>& q, Index g0, Index groups, Index n0, Index nc, float* panel,
                 float* slice_scales, std::uint32_t* words_t) {
    constexpr Index NR = QgemmF32Ukernel<Arch>::NR;
    constexpr int words_per_group = QuantizedMatrix<GroupSize, Bits>::words_per_group;
    auto at = [panel](Index i, Index k, Index j) { return panel + panel_offset<Arch, GroupSize>(i, k, j); };
    for (Index j = 0; j < NR; ++j)
        for (Index i = 0; i < groups; ++i) {
            slice_scales[i * NR + j] = j < nc ? q.scales(n0 + j, g0 + i) : 0.0f;
            *at(i, GroupSize, j) = j < nc ? q.biases(n0 + j, g0 + i) : 0.0f;
        }
    if constexpr (panel_transposes_words<GroupSize, Bits>) {
        // words_t[w * NR + j] = word w of the slice in column j: squares of W columns x W words
        // through simd::transpose_words, the rest (column and word tails, zero columns) word by word.
        using ubatch = xsimd::batch<std::uint32_t, Arch>;
        constexpr Index W = static_cast<Index>(ubatch::size);
        const Index slice_words = groups * words_per_group;
        const Index square_columns = nc / W * W, square_words = slice_words / W * W;
        const Index row_words = q.codes.cols();
        std::array<ubatch, W> square;
        for (Index j = 0; j < square_columns; j += W)
            for (Index w = 0; w < square_words; w += W) {
                const std::uint32_t* words = &q.codes(n0 + j, g0 * words_per_group + w);
                for (Index r = 0; r < W; ++r) {
                    square[r] = ubatch::load_unaligned(words + r * row_words);
                    // The same words of the next slice, into L2: W rows a row of codes apart defeat the
                    // hardware prefetcher (a prefetch past the matrix never faults).
                    __builtin_prefetch(words + r * row_words + slice_words, 0, 2);
                }
                simd::transpose_words(square);
                for (Index c = 0; c < W; ++c) square[c].store_aligned(words_t + (w + c) * NR + j);
            }
        for (Index j = 0; j < NR; ++j)
            for (Index w = j < square_columns ? square_words : 0; w < slice_words; ++w)
                words_t[w * NR + j] = j < nc ? q.codes(n0 + j, g0 * words_per_group + w) : 0u;

        // Then unpack and scale W columns per vector.
        using fbatch = xsimd::batch<float, Arch>;
        constexpr int codes_per_word = 32 / Bits;
        const ubatch mask((std::uint32_t{1} << Bits) - 1);
        for (Index i = 0; i < groups; ++i)
            for (Index j = 0; j < NR; j += W) {
                const fbatch scales = fbatch::load_unaligned(slice_scales + i * NR + j);
                for (int w = 0; w < words_per_group; ++w) {
                    const ubatch words = ubatch::load_unaligned(words_t + (i * words_per_group + w) * NR + j);
                    static_for<codes_per_word>([&](auto step) {
                        constexpr int t = decltype(step)::value;
                        const ubatch code = (words >> (t * Bits)) & mask;
                        (xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(code)) * scales)
                            .store_unaligned(at(i, w * codes_per_word + t, j));
                    });
                }
            }
    } else {
        // Codes that straddle words: the scalar block unpacker, straight from the column's row of q.
        std::array<float, GroupSize> codes{};
        for (Index i = 0; i < groups; ++i)
            for (Index j = 0; j < NR; ++j) {
                if (j < nc) unpack_codes<Bits>(&q.codes(n0 + j, (g0 + i) * words_per_group), GroupSize, codes.data());
                else codes.fill(0.0f);
                const float scale = slice_scales[i * NR + j];
                for (int k = 0; k < GroupSize; ++k) *at(i, k, j) = scale * codes[static_cast<std::size_t>(k)];
            }
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
