// qgemm_f32 panel packing: the codes of a slice of groups of NR output columns, unpacked and scaled
// into a float panel block with the columns' biases (zeros in a format without biases), for
// QgemmF32Ukernel, any format (values by F32Codes<Format> and Format::value, scales by
// Format::group_scale). The code words are turned into columns first, so every unpack step shifts and masks NR
// columns with the same constants, W per vector: word by word for codes in whole words, 32 codes (Bits words) at a time
// for codes that straddle words. The driver builds one block at a time, right before its register blocks read it, or
// (fuses_panel_build) unpacks it word by word inside the last register block over the block before, in place. The
// scales and biases are turned into rows once per tile of NC columns (gather_tile_scales), the code words once per
// block (gather_panel_words). Layout: per group of the slice, GroupSize rows of scaled codes s * q then one row of
// biases b, each NR floats, so a register block streams its block in order (no stride that maps its rows onto a few L1
// sets):
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
#include <numeric>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../unroll.hpp"
#include "f32_codes.hpp"
#include "f32_ukernel.hpp"
#include "group_sums.hpp"

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

/// Whether qgemm_f32 unpacks the next panel block inside the last register block over this one
/// (unpack_panel_word between its steps): the formats whose codes fill whole words, where the registers
/// hold the register block and the unpacking both (32 vector registers: AVX-512).
template <class Arch, class Format>
inline constexpr bool fuses_panel_build = Format::codes_in_whole_words&& QgemmF32Ukernel<Arch>::W >= 16;

/// out[c * out_stride + r] = src[r * src_stride + c] for r < rows, c < cols (32-bit elements): squares of
/// W x W through simd::transpose_words, the row and column tails element by element. Each square's rows
/// are prefetched into L2 prefetch_ahead elements on (W rows a stride apart defeat the hardware
/// prefetcher; a prefetch past the matrix never faults). out is Arch::alignment()-aligned, out_stride a
/// multiple of W.
template <class Arch, class T>
void transpose_block(const T* src, Index src_stride, Index rows, Index cols, T* out, Index out_stride,
                     Index prefetch_ahead) {
    static_assert(sizeof(T) == 4, "transpose_block: 32-bit elements");
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr Index W = static_cast<Index>(ubatch::size);
    const Index square_rows = rows / W * W, square_cols = cols / W * W;
    std::array<ubatch, W> square;
    for (Index r0 = 0; r0 < square_rows; r0 += W)
        for (Index c0 = 0; c0 < square_cols; c0 += W) {
            const T* from = src + r0 * src_stride + c0;
            for (Index r = 0; r < W; ++r) {
                square[r] = simd::bit_cast<std::uint32_t>(xsimd::batch<T, Arch>::load_unaligned(from + r * src_stride));
                if (prefetch_ahead != 0) __builtin_prefetch(from + r * src_stride + prefetch_ahead, 0, 2);
            }
            simd::transpose_words(square);
            for (Index c = 0; c < W; ++c) simd::bit_cast<T>(square[c]).store_aligned(out + (c0 + c) * out_stride + r0);
        }
    for (Index r = 0; r < rows; ++r)
        for (Index c = r < square_rows ? square_cols : 0; c < cols; ++c)
            out[c * out_stride + r] = src[r * src_stride + c];
}

/// The scratch of qgemm_f32's panel builds, Arch::alignment()-aligned:
///   scales_t, biases_t: the tile's scales and biases turned into rows of NC columns,
///     scales_t[g * NC + c] = scale of group g in column n0 + c (zero from column nc on), all groups;
///   words_t: one panel block's code words turned into columns,
///     words_t[w * NR + j] = word w of the slice in column j (zero from column nc on);
///   decoded (byte scales that decode as vectors): the tile's scales decoded row by row before they are
///     turned, decoded[c * groups + g] = scale of group g in column n0 + c.
template <class Arch, class Format>
struct PanelScratch {
    template <class T>
    using aligned_vector = std::vector<T, xsimd::aligned_allocator<T, Arch::alignment()>>;
    static constexpr Index NR = QgemmF32Ukernel<Arch>::NR, NC = QgemmF32Ukernel<Arch>::NC;
    static constexpr int words_per_group = Format::words_per_group;
    static constexpr bool decodes_scale_rows = DecodesScaleVectors<Format, Arch>;

    PanelScratch(Index groups, Index slice_groups)
        : scales_t(static_cast<std::size_t>(groups * NC)),
          biases_t(static_cast<std::size_t>(groups * NC)),
          words_t(static_cast<std::size_t>(slice_groups * words_per_group * NR)),
          decoded(decodes_scale_rows ? static_cast<std::size_t>(groups * NC) : 0) {}
    aligned_vector<float> scales_t, biases_t;
    aligned_vector<std::uint32_t> words_t;
    aligned_vector<float> decoded;
};

/// Fills scratch.scales_t and biases_t for the tile of columns [n0, n0 + nc), nc <= NC (once per tile:
/// the panel blocks of every slice read their scales and biases from there).
template <class Arch, class Format>
void gather_tile_scales(const QuantizedView<Format>& q, Index n0, Index nc, PanelScratch<Arch, Format>& scratch) {
    constexpr Index NC = QgemmF32Ukernel<Arch>::NC;
    const Index groups = q.scales.cols();
    if constexpr (std::is_same_v<typename Format::scale_type, float>) {
        transpose_block<Arch>(&q.scales(n0, 0), groups, nc, groups, scratch.scales_t.data(), NC, 0);
    } else if constexpr (PanelScratch<Arch, Format>::decodes_scale_rows) {  // decoded as vectors, then turned
        for (Index c = 0; c < nc; ++c)
            decode_row_scales<Arch, Format>(&q.scales(n0 + c, 0), groups, scratch.decoded.data() + c * groups);
        transpose_block<Arch>(scratch.decoded.data(), groups, nc, groups, scratch.scales_t.data(), NC, 0);
    } else {  // stored scales decoded (Format::group_scale) once per tile
        for (Index c = 0; c < nc; ++c)
            for (Index g = 0; g < groups; ++g)
                scratch.scales_t[static_cast<std::size_t>(g * NC + c)] = Format::group_scale(q.scales(n0 + c, g));
    }
    if constexpr (Format::has_biases)
        transpose_block<Arch>(&q.biases(n0, 0), groups, nc, groups, scratch.biases_t.data(), NC, 0);
    for (Index g = 0; g < groups; ++g)
        for (Index c = Format::has_biases ? nc : 0; c < NC; ++c) {
            if (c >= nc) scratch.scales_t[static_cast<std::size_t>(g * NC + c)] = 0.0f;
            scratch.biases_t[static_cast<std::size_t>(g * NC + c)] = 0.0f;
        }
}

/// Fills scratch.words_t with the code words of groups [g0, g0 + groups) of columns [n0, n0 + nc), nc <=
/// NR, prefetching the same columns' next slice.
template <class Arch, class Format>
void gather_panel_words(const QuantizedView<Format>& q, Index g0, Index groups, Index n0, Index nc,
                        PanelScratch<Arch, Format>& scratch) {
    constexpr Index NR = QgemmF32Ukernel<Arch>::NR;
    constexpr int words_per_group = Format::words_per_group;
    const Index slice_words = groups * words_per_group;
    transpose_block<Arch>(&q.codes(n0, g0 * words_per_group), q.codes.cols(), nc, slice_words, scratch.words_t.data(),
                          NR, slice_words);
    for (Index w = 0; w < slice_words; ++w)
        for (Index j = nc; j < NR; ++j) scratch.words_t[static_cast<std::size_t>(w * NR + j)] = 0u;
}

/// Where one panel block reads its scales and biases: scratch.scales_t and biases_t at the slice's first
/// group and the block's first column (rows NC apart).
struct PanelBlockScales {
    const float* scales;
    const float* biases;
};

/// The panel rows of code word w of group i of the slice (rows w * codes_per_word ..), fl(s * q) for all
/// NR columns, W per vector, from scratch.words_t (codes in whole words).
template <class Arch, class Format>
LOWBIT_ALWAYS_INLINE inline void unpack_panel_word(const PanelScratch<Arch, Format>& scratch, PanelBlockScales block,
                                                   Index i, int w, float* panel) {
    static_assert(Format::codes_in_whole_words, "unpack_panel_word: codes must fill whole words");
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    using fbatch = xsimd::batch<float, Arch>;
    constexpr Index NR = QgemmF32Ukernel<Arch>::NR, NC = QgemmF32Ukernel<Arch>::NC;
    constexpr Index W = static_cast<Index>(ubatch::size);
    constexpr int GroupSize = Format::group_size, Bits = Format::bits;
    constexpr int words_per_group = Format::words_per_group, codes_per_word = 32 / Bits;
    const ubatch mask((std::uint32_t{1} << Bits) - 1);
    static_for<static_cast<int>(NR / W)>([&](auto column_vector) LOWBIT_ALWAYS_INLINE {
        constexpr Index j = decltype(column_vector)::value * W;
        const fbatch scales = fbatch::load_aligned(block.scales + i * NC + j);
        const ubatch words = ubatch::load_aligned(scratch.words_t.data() + (i * words_per_group + w) * NR + j);
        static_for<codes_per_word>([&](auto step) LOWBIT_ALWAYS_INLINE {
            constexpr int t = decltype(step)::value;
            const ubatch code = (words >> (t * Bits)) & mask;
            (F32Codes<Format>::template value<Arch>(code) * scales)
                .store_aligned(panel + panel_offset<Arch, GroupSize>(i, w * codes_per_word + t, j));
        });
    });
}

/// The panel rows of group i of the slice, fl(s * q) for all NR columns, W per vector, from scratch.words_t, for
/// codes that straddle words (3, 5 and 6 bits). Every block of 32 / gcd(Bits, 32) codes (32 for 3 and 5 bits,
/// 16 for 6) fills whole words (a group holds whole such blocks), so code t of a block starts at bit t * Bits of
/// the block: in word t * Bits / 32, shifted down by t * Bits % 32, with the next word's low bits above it where
/// it straddles; the same shifts in every column.
template <class Arch, class Format>
void unpack_panel_group(const PanelScratch<Arch, Format>& scratch, PanelBlockScales block, Index i, float* panel) {
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    using fbatch = xsimd::batch<float, Arch>;
    constexpr Index NR = QgemmF32Ukernel<Arch>::NR, NC = QgemmF32Ukernel<Arch>::NC;
    constexpr Index W = static_cast<Index>(ubatch::size);
    constexpr int GroupSize = Format::group_size, Bits = Format::bits;
    constexpr int words_per_group = Format::words_per_group;
    constexpr int block_codes = 32 / std::gcd(Bits, 32), block_words = block_codes * Bits / 32;
    static_assert(GroupSize % block_codes == 0, "unpack_panel_group: a group holds whole blocks of codes");
    const ubatch mask((std::uint32_t{1} << Bits) - 1);
    for (int b = 0; b < GroupSize / block_codes; ++b)
        static_for<static_cast<int>(NR / W)>([&](auto column_vector) LOWBIT_ALWAYS_INLINE {
            constexpr Index j = decltype(column_vector)::value * W;
            const fbatch scales = fbatch::load_aligned(block.scales + i * NC + j);
            const std::uint32_t* words = scratch.words_t.data() + (i * words_per_group + b * block_words) * NR + j;
            static_for<block_codes>([&](auto step) LOWBIT_ALWAYS_INLINE {
                constexpr int t = decltype(step)::value;
                constexpr int word = t * Bits / 32, shift = t * Bits % 32;
                ubatch code = ubatch::load_aligned(words + word * NR) >> shift;
                if constexpr (shift + Bits > 32)
                    code = code | (ubatch::load_aligned(words + (word + 1) * NR) << (32 - shift));
                (F32Codes<Format>::template value<Arch>(code & mask) * scales)
                    .store_aligned(panel + panel_offset<Arch, GroupSize>(i, b * block_codes + t, j));
            });
        });
}

/// The bias row of group i of the slice.
template <class Arch, int GroupSize>
LOWBIT_ALWAYS_INLINE inline void store_panel_biases(PanelBlockScales block, Index i, float* panel) {
    using fbatch = xsimd::batch<float, Arch>;
    constexpr Index NR = QgemmF32Ukernel<Arch>::NR, NC = QgemmF32Ukernel<Arch>::NC;
    constexpr Index W = static_cast<Index>(fbatch::size);
    float* row = panel + panel_offset<Arch, GroupSize>(i, GroupSize, 0);
    for (Index j = 0; j < NR; j += W) fbatch::load_aligned(block.biases + i * NC + j).store_aligned(row + j);
}

/// Writes groups [g0, g0 + groups) of columns [n0, n0 + nc), nc <= NR, into panel (panel_floats(groups)
/// floats, Arch::alignment()-aligned), the layout above: per group GroupSize rows of fl(s * q), then the
/// biases; columns nc .. NR-1 are zero. Scales and biases from block (gather_tile_scales). The words turned
/// into columns (gather_panel_words), then unpack_panel_word for every word of codes in whole words,
/// unpack_panel_group for codes that straddle words.
template <class Arch, class Format>
void build_panel(const QuantizedView<Format>& q, Index g0, Index groups, Index n0, Index nc, float* panel,
                 PanelScratch<Arch, Format>& scratch, PanelBlockScales block) {
    constexpr int GroupSize = Format::group_size;
    constexpr int words_per_group = Format::words_per_group;
    gather_panel_words<Arch>(q, g0, groups, n0, nc, scratch);
    for (Index i = 0; i < groups; ++i) {
        if constexpr (Format::codes_in_whole_words) {
            for (int w = 0; w < words_per_group; ++w) unpack_panel_word<Arch>(scratch, block, i, w, panel);
        } else {
            unpack_panel_group<Arch>(scratch, block, i, panel);
        }
        store_panel_biases<Arch, GroupSize>(block, i, panel);
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
