// The mxfp8 quantization rule of MLX 0.32's CPU `mx.quantize(w, mode="mxfp8")` on float32 weights
// (docs/numerics.md N18), scalar: a group's E8M0 exponent, one row; and what quantize_named
// (quantized_matrix.hpp) and FormatKernels<Mxfp8> reach by the format's tag.
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../formats/mxfp8.hpp"
#include "../dispatch/format_kernels.hpp"
#include "../kernel_paths.hpp"
#include "../minifloat_rounding.hpp"
#include "../row_fault.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The E8M0 exponent of the group of 32 values starting at `group` (E4M3's largest value is 448).
inline int mxfp8_group_exponent(const float* group) {
    float amax = 0.0f;
    for (int i = 0; i < Mxfp8::group_size; ++i) amax = std::fmax(amax, std::fabs(group[i]));
    return e8m0_exponent(amax, 448.0f);
}

/// Quantizes one row of `groups` groups of 32 values into words (one E4M3 code per byte, the first in
/// the lowest) and exponent bytes: per group E, then each value's e4m3_code(fl(w / 2^E)), never beyond
/// 448 since E rounds up. code_bytes is unused (the codes are the words' bytes). Returns
/// RowFault::non_finite_value for a NaN or Inf (outputs unspecified), RowFault::group_out_of_range when
/// a group's exponent is below -127 (its byte is then 0 and its codes those of 2^-127), else none.
inline RowFault run_quantize_row(FormatTag<Mxfp8>, const float* values, std::size_t groups,
                                 std::uint8_t* /*code_bytes*/, std::uint32_t* words, std::uint8_t* scales,
                                 float* /*biases*/) {
    constexpr std::size_t group_size = Mxfp8::group_size;
    for (std::size_t i = 0; i < groups * group_size; ++i)
        if (!std::isfinite(values[i])) return RowFault::non_finite_value;
    RowFault found = RowFault::none;
    for (std::size_t g = 0; g < groups; ++g) {
        const float* group = values + g * group_size;
        int exponent = mxfp8_group_exponent(group);
        if (exponent < e8m0_min_exponent) {
            found = RowFault::group_out_of_range;
            exponent = e8m0_min_exponent;
        }
        scales[g] = static_cast<std::uint8_t>(exponent + 127);
        const float scale = std::ldexp(1.0f, exponent);  // exact: 2^-127 is a float
        for (std::size_t w = 0; w < group_size / 4; ++w) {
            std::uint32_t word = 0;
            for (std::size_t i = 0; i < 4; ++i) word |= std::uint32_t{e4m3_code(group[w * 4 + i] / scale)} << (8 * i);
            words[g * Mxfp8::words_per_group + w] = word;
        }
    }
    return found;
}

/// FormatKernels<Mxfp8>::quantize_row, recorded (the scalar rule is its only path).
inline RowFault quantize_row(FormatTag<Mxfp8>, const float* values, std::size_t groups, std::uint8_t* code_bytes,
                             std::uint32_t* words, std::uint8_t* scales, float* biases) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return FormatKernels<Mxfp8>::quantize_row(values, groups, code_bytes, words, scales, biases);
}

/// The first group of a row whose exponent is below E8M0's range.
inline std::size_t first_group_out_of_range(FormatTag<Mxfp8>, const float* values, const std::uint8_t*, const float*,
                                            std::size_t groups) {
    for (std::size_t g = 0; g < groups; ++g)
        if (mxfp8_group_exponent(values + g * Mxfp8::group_size) < e8m0_min_exponent) return g;
    return groups;
}

/// Why such a group cannot be stored.
inline std::string group_out_of_range_text(FormatTag<Mxfp8>) {
    return "is too small for mxfp8: its largest magnitude / 448 is at most 2^-128, below E8M0's smallest scale "
           "2^-127 (MLX stores a wrapped exponent there)";
}

}  // namespace detail
LOWBIT_END_NAMESPACE
