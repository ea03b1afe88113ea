// dispatch/: kernel selection for quantizing weights into the MLX affine format (the table is at the
// top of fake_quant.hpp in this folder).
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "../../formats/mlx_affine.hpp"
#include "../kernel_paths.hpp"
#include "../mlx_affine/packing.hpp"
#include "../mlx_affine/quantize.hpp"
#include "../mlx_affine/quantize_kernel.hpp"
#include "../simd.hpp"
#include "format_kernels.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Packs one row of `count` codes (a multiple of 32, each < 2^Bits) into MLX words: byte codes eight at
/// a time (pack_code_bytes), other code types one 32-code block at a time (pack_codes).
template <int Bits, class Code>
void pack_row_codes(const Code* codes, std::size_t count, std::uint32_t* words) {
    if constexpr (std::is_same_v<Code, std::uint8_t>) {
        kernels::pack_code_bytes<Bits>(codes, count, words);
    } else {
        kernels::pack_codes<Bits>(codes, count, words);
    }
}

/// Quantizes one row of `groups` groups of GroupSize values (MLX's rule) into its packed words, scales
/// and biases; code_bytes is scratch for groups * GroupSize bytes. Returns what it found (RowFault; with a
/// non-finite value the outputs are unspecified and the caller finds the value). What
/// FormatKernels<MlxAffine<GroupSize, Bits>>::quantize_row runs; records no kernel path (quantize_row
/// does), so one compiled copy serves every translation unit (format_instances.hpp).
template <int GroupSize, int Bits>
RowFault run_quantize_row(FormatTag<MlxAffine<GroupSize, Bits>>, const float* values, std::size_t groups,
                          std::uint8_t* code_bytes, std::uint32_t* words, float* scales, float* biases) {
    RowFault found = RowFault::none;
    if constexpr (simd::enabled) {
        if constexpr (kernels::quantize_row_packs<Bits>)
            return kernels::quantize_row_f32<simd::arch, GroupSize, Bits>(
                values, groups, reinterpret_cast<std::uint8_t*>(words), scales, biases);
        found = kernels::quantize_row_f32<simd::arch, GroupSize, Bits>(values, groups, code_bytes, scales, biases);
        if (found == RowFault::non_finite_value) return found;
    } else {
        for (std::size_t i = 0; i < groups * GroupSize; ++i)
            if (!std::isfinite(values[i])) return RowFault::non_finite_value;
        for (std::size_t g = 0; g < groups; ++g) {
            std::tie(scales[g], biases[g]) =
                reference::quantize_group<Bits>(values + g * GroupSize, GroupSize, code_bytes + g * GroupSize);
            if (!group_levels_finite<Bits>(scales[g], biases[g])) found = RowFault::group_out_of_range;
        }
    }
    pack_row_codes<Bits>(code_bytes, groups * GroupSize, words);
    return found;
}

/// FormatKernels<MlxAffine<GroupSize, Bits>>::quantize_row, recording the path it takes (kernel_paths.hpp).
template <int GroupSize, int Bits>
RowFault quantize_row(const float* values, std::size_t groups, std::uint8_t* code_bytes, std::uint32_t* words,
                      float* scales, float* biases) {
    record(KernelOp::quantize_group, simd::enabled ? KernelPath::simd : KernelPath::reference);
    return FormatKernels<MlxAffine<GroupSize, Bits>>::quantize_row(values, groups, code_bytes, words, scales, biases);
}

// What quantize_named (quantized_matrix.hpp) reaches by the format's tag.

/// quantize_row above.
template <int GroupSize, int Bits>
RowFault quantize_row(FormatTag<MlxAffine<GroupSize, Bits>>, const float* values, std::size_t groups,
                      std::uint8_t* code_bytes, std::uint32_t* words, float* scales, float* biases) {
    return quantize_row<GroupSize, Bits>(values, groups, code_bytes, words, scales, biases);
}

/// The first group of a quantized row whose levels overflow (the kernel's test is group_levels_finite's).
template <int GroupSize, int Bits>
std::size_t first_group_out_of_range(FormatTag<MlxAffine<GroupSize, Bits>>, const float*, const float* scales,
                                     const float* biases, std::size_t groups) {
    std::size_t g = 0;
    while (g + 1 < groups && group_levels_finite<Bits>(scales[g], biases[g])) ++g;
    return g;
}

/// Why such a group cannot be stored.
template <int GroupSize, int Bits>
std::string group_out_of_range_text(FormatTag<MlxAffine<GroupSize, Bits>>) {
    return "spans a range too wide for float: max - min or its top level s * " + std::to_string((1 << Bits) - 1) +
           " + b overflows";
}

}  // namespace detail
LOWBIT_END_NAMESPACE
