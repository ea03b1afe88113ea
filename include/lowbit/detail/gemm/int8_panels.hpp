// Packed panels of the int8-activation GEMM (docs/numerics.md N11, N14; microkernel in int8_ukernel.hpp),
// for every format that runs on it: the panel layout, the activation row blocks and the word transpose.
// A format packs its own panels and activations with these (mlx_affine/int8_panels.hpp,
// ternary/int8_gemm.hpp).
//
// The microkernel computes an MR x NR tile of outputs, NR = NJ * Ops::lanes weight rows, one weight row
// per int32 lane. Its unit is a 32-bit word of codes at byte_bits bits each (code j in bits j*byte_bits, so
// byte b holds codes b*S .. b*S+S-1, S = 8 / byte_bits): for Bits in {2, 4, 8} the MLX word itself
// (byte_bits = Bits), for other widths the codes repacked at the next of those widths (1 -> 2, 3 -> 4,
// 5 and 6 -> 8 bits) when the panel is built. Step t of a word, (word >> t*byte_bits) & mask per byte,
// holds in byte b the code b*S + t; one dot instruction on it sums 4 codes against the activation quad (xq at those 4
// positions) broadcast to every lane.
//   weight panel: one record per weight group, in group order, in 32-bit units (rows past N zero):
//
//                   record g, at g * record_units(NR), record_units(NR) = (WPG + P) * NR units
//                   +---------------------------------------+------------+------------+
//                   | words [WPG][NR] (u32)                 | scales[NR] | biases[NR] |
//                   | word w of group g of each of NR rows  | f32 bits   | f32 bits   |
//                   +---------------------------------------+------------+------------+
//
//                 (WPG = words per group; P = the epilogue's parameter slots per group: MLX affine's
//                 scale and bias, P = 2; ternary per group its scale, P = 1; per tensor none, P = 0). A panel is one
//                 sequential stream, which the hardware prefetcher follows from DRAM or L3 (words, scales and biases in
//                 three arrays were three streams: benchmarks/README.md). Built per call, per thread, for a few panels
//                 at a time, or once per layer for all of them (Int8WeightPanels, int8_weight_panels.hpp).
//   x block:      quads [w][t][r][4 bytes] for the r rows of a row block, a and xsum [g][r]; built once
//                 per call for every row block.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <Eigen/Core>

#include "int8_weight_panels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The word layout of the int8 GEMM for GroupSize codes of Bits bits per group and ParamSlots float
/// parameters per group and row (the record above).
template <int GroupSize, int Bits, int ParamSlots = 2>
struct Int8PanelLayout {
    static constexpr bool packed = Bits == 2 || Bits == 4 || Bits == 8;  ///< words read straight from q.codes
    static constexpr int byte_bits = Bits <= 2 ? 2 : Bits <= 4 ? 4 : 8;  ///< bits per code in a panel byte
    static constexpr int steps = 8 / byte_bits;                          ///< S: codes per byte
    static constexpr int word_codes = 4 * steps;                         ///< codes per word
    static constexpr int words_per_group = GroupSize / word_codes;
    static_assert(GroupSize % word_codes == 0, "Int8PanelLayout: a group must be whole words");
    static Eigen::Index words(Eigen::Index K) { return K / word_codes; }
    /// 32-bit units of one group's record in a panel of NR rows: its words, then its parameter slots
    /// (slot 0: scales, slot 1: biases).
    static constexpr Eigen::Index record_units(int NR) { return Eigen::Index{words_per_group + ParamSlots} * NR; }
    static constexpr Eigen::Index param_offset(int NR, int slot) { return Eigen::Index{words_per_group + slot} * NR; }
    static constexpr Eigen::Index scales_offset(int NR) { return param_offset(NR, 0); }
    static constexpr Eigen::Index biases_offset(int NR) { return param_offset(NR, 1); }
    /// 32-bit units of a panel of NR rows over K codes.
    static Eigen::Index panel_units(Eigen::Index K, int NR) { return K / GroupSize * record_units(NR); }
};

/// How a batch of activation rows is cut into the microkernel's row blocks: blocks of at most `rows`
/// (as even as they can be), except that a batch of at most `one_block` rows is one block. A short batch
/// split in two runs the tiles twice over the panels, each time with too few rows to pay for the code
/// unpacking they share (the measurement: benchmarks/README.md).
struct Int8RowSplit {
    int rows = 1;       ///< MR, the tile's rows
    int one_block = 1;  ///< the most rows run as one block (>= rows)
    constexpr int widest() const { return one_block > rows ? one_block : rows; }
};

/// Activations of one call, quantized and packed in row blocks as Int8RowSplit cuts them: one block of
/// M rows up to one_block, else ceil(M / MR) blocks whose sizes differ by at most one (M = 13, MR = 6:
/// 5, 4, 4). MLX affine (N11) fills a and x_sum; ternary (N14) fills code_sums, per group
/// ([block][g][r], sum_groups = groups) or per row (sum_groups = 1).
struct Int8RowBlocks {
    Eigen::Index count = 0, base_rows = 0, extra = 0;  ///< blocks; rows = base_rows + (block < extra)
    Eigen::Index quads_per_row = 0, groups = 0;        ///< per row: K / 4 quads, K / GroupSize groups
    Eigen::Index sum_groups = 0;                       ///< code sums per row
    std::vector<std::int8_t> quads;                    ///< [block][w][t][r][4], block b at b's first row * K
    std::vector<float> a, x_sum;                       ///< [block][g][r], block b at its first row * groups
    std::vector<std::int32_t> code_sums;               ///< [block][g][r], block b at first row * sum_groups

    Eigen::Index rows(Eigen::Index block) const { return base_rows + (block < extra ? 1 : 0); }
    Eigen::Index first_row(Eigen::Index block) const { return block * base_rows + std::min(block, extra); }
    /// Sets count, base_rows and extra for M rows cut as `rows` says.
    void split(Eigen::Index M, Int8RowSplit rows) {
        count = M <= rows.one_block ? 1 : (M + rows.rows - 1) / rows.rows;
        base_rows = M / count;
        extra = M % count;
    }
};

/// The per-row data of row block `block` as the microkernel reads it (the epilogue's inputs).
struct Int8BlockData {
    const std::int8_t* quads = nullptr;
    const float* a = nullptr;                 ///< [g][r] (MLX affine)
    const float* x_sum = nullptr;             ///< [g][r] (MLX affine)
    const std::int32_t* code_sums = nullptr;  ///< [g][r] or [r] (ternary)

    static Int8BlockData of(const Int8RowBlocks& blocks, Eigen::Index block) {
        const Eigen::Index m0 = blocks.first_row(block);
        Int8BlockData data;
        data.quads = blocks.quads.data() + m0 * blocks.quads_per_row * 4;
        if (!blocks.a.empty()) data.a = blocks.a.data() + m0 * blocks.groups;
        if (!blocks.x_sum.empty()) data.x_sum = blocks.x_sum.data() + m0 * blocks.groups;
        if (!blocks.code_sums.empty()) data.code_sums = blocks.code_sums.data() + m0 * blocks.sum_groups;
        return data;
    }
};

/// The S activation quads of one panel word: quad t holds codes[t], codes[t + S], codes[t + 2S],
/// codes[t + 3S] (the codes that byte 0..3 of step t of the word multiplies), as 4 bytes in memory
/// order. On a little-endian host through 64-bit registers, keeping every S-th byte by halving steps
/// (S = 2: 8 codes per register; S = 4: 16 codes in two registers, two bytes of the quad from each);
/// elsewhere byte by byte.
template <int S>
inline void gather_quads(const std::int8_t* codes, std::uint32_t* quads) {
    static_assert(S == 2 || S == 4, "gather_quads: 2 or 4 codes per byte");
    if constexpr (std::endian::native != std::endian::little) {
        for (int t = 0; t < S; ++t) {
            std::int8_t quad[4];
            for (int b = 0; b < 4; ++b) quad[b] = codes[b * S + t];
            std::memcpy(&quads[t], quad, 4);
        }
    } else {
        std::uint64_t eight[S / 2];  // the word's 4S codes
        std::memcpy(eight, codes, sizeof eight);
        for (int t = 0; t < S; ++t) {
            if constexpr (S == 2) {
                std::uint64_t x = (eight[0] >> (8 * t)) & 0x00FF00FF00FF00FFull;  // bytes t, t+2, t+4, t+6
                x = (x | x >> 8) & 0x0000FFFF0000FFFFull;
                quads[t] = static_cast<std::uint32_t>(x | x >> 16);
            } else {
                std::uint32_t halves[2];
                for (int h = 0; h < 2; ++h) {
                    const std::uint64_t x = (eight[h] >> (8 * t)) & 0x000000FF000000FFull;  // bytes t, t+4
                    halves[h] = static_cast<std::uint32_t>((x | x >> 24) & 0xFFFFu);
                }
                quads[t] = halves[0] | halves[1] << 16;
            }
        }
    }
}

/// Row r of a block of r_count rows into the block's quads ([w][t][r][4]): the S quads of each of the
/// `words` words of codes (4 * S codes each).
template <int S>
inline void pack_row_quads(const std::int8_t* codes, Eigen::Index words, Eigen::Index r, Eigen::Index r_count,
                           std::int8_t* quads) {
    if constexpr (S == 1) {
        // The quad of word w is codes 4w .. 4w+3: a 4-byte copy.
        for (Eigen::Index w = 0; w < words; ++w) std::memcpy(quads + (w * r_count + r) * 4, codes + w * 4, 4);
    } else {
        for (Eigen::Index w = 0; w < words; ++w) {
            std::uint32_t word_quads[S];
            gather_quads<S>(codes + w * 4 * S, word_quads);
            for (int t = 0; t < S; ++t) std::memcpy(quads + ((w * S + t) * r_count + r) * 4, &word_quads[t], 4);
        }
    }
}

/// out_row(w)[r] = 32-bit word w of row r, for r < NR and w < words, where out_row(w) = out +
/// (w / per_record) * record_units + (w % per_record) * NR (a panel's records: per_record of the words
/// in each): rows[r] holds `words` words for r < rows, rows past that are zeros. Whole blocks of L rows
/// x L words (L = Ops::lanes) go through Ops::transpose_words, the rest word by word. Word w of every
/// row, then the next: the rows are read as sequential streams and the panel written in order.
template <class Ops, int NR>
void transpose_to_panel_int8(const std::uint8_t* const* rows_in, Eigen::Index rows, Eigen::Index words,
                             Eigen::Index per_record, Eigen::Index record_units, std::uint32_t* out) {
    constexpr int L = Ops::lanes;
    static_assert(NR % L == 0, "transpose_to_panel_int8: a panel must be whole vectors");
    auto out_row = [&](Eigen::Index w) { return out + w / per_record * record_units + w % per_record * NR; };
    const Eigen::Index whole_rows = rows / L * L, whole_words = words / L * L;
    for (Eigen::Index w0 = 0; w0 < whole_words; w0 += L)
        for (Eigen::Index r0 = 0; r0 < whole_rows; r0 += L) {
            const std::uint8_t* block_rows[L];
            std::uint32_t* block_out[L];
            for (int i = 0; i < L; ++i) {
                block_rows[i] = rows_in[r0 + i] + 4 * w0;
                block_out[i] = out_row(w0 + i) + r0;
            }
            Ops::transpose_words(block_rows, block_out);
        }
    for (Eigen::Index w = 0; w < words; ++w) {
        std::uint32_t* panel_row = out_row(w);
        for (Eigen::Index r = (w < whole_words ? whole_rows : 0); r < NR; ++r) {
            if (r < rows)
                std::memcpy(panel_row + r, rows_in[r] + 4 * w, 4);
            else
                std::memset(panel_row + r, 0, 4);  // the panel may hold floats (scales, biases)
        }
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
