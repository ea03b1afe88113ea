// The mxfp8 quantization rule of MLX 0.32's CPU `mx.quantize(w, mode="mxfp8")` on float32, float16 and
// bfloat16 weights (docs/numerics.md N18, N19), scalar: a group's E8M0 exponent, one row; and what quantize_named
// (quantized_matrix.hpp) and FormatKernels<Mxfp8> reach by the format's tag.
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../formats/mxfp8.hpp"
#include "../dispatch/format_kernels.hpp"
#include "../input_types.hpp"
#include "../kernel_paths.hpp"
#include "../minifloat_rounding.hpp"
#include "../row_fault.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Quantizes one row of `groups` groups of 32 values of type Input (read exactly as floats) into words
/// (one E4M3 code per byte, the first in the lowest) and exponent bytes: per group E (e8m0_exponent
/// for E4M3's largest value 448, the quotient rounded to Input), then each value's e4m3_code(fl(w /
/// 2^E)), never beyond 448 since E rounds up. Returns RowFault::non_finite_value for a NaN or Inf
/// (outputs unspecified), RowFault::group_out_of_range when a group's exponent is below -127 (its byte
/// is then 0 and its codes those of 2^-127), else none.
template <class Input>
RowFault quantize_mxfp8_row(const float* values, std::size_t groups, std::uint32_t* words, std::uint8_t* scales) {
    constexpr std::size_t group_size = Mxfp8::group_size;
    for (std::size_t i = 0; i < groups * group_size; ++i)
        if (!std::isfinite(values[i])) return RowFault::non_finite_value;
    RowFault found = RowFault::none;
    for (std::size_t g = 0; g < groups; ++g) {
        const float* group = values + g * group_size;
        int exponent = e8m0_group_exponent<Input>(group, Mxfp8::group_size, 448.0f);
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

/// quantize_mxfp8_row of float weights: what FormatKernels<Mxfp8>::quantize_row runs (code_bytes is
/// unused: the codes are the words' bytes).
inline RowFault run_quantize_row(FormatTag<Mxfp8>, const float* values, std::size_t groups,
                                 std::uint8_t* /*code_bytes*/, std::uint32_t* words, std::uint8_t* scales,
                                 float* /*biases*/) {
    return quantize_mxfp8_row<float>(values, groups, words, scales);
}

/// quantize_mxfp8_row of weights read from Input (half or bfloat16), recorded.
template <class Input>
RowFault quantize_row(FormatTag<Mxfp8>, InputTag<Input>, const float* values, std::size_t groups,
                      std::uint8_t* /*code_bytes*/, std::uint32_t* words, std::uint8_t* scales, float* /*biases*/) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return quantize_mxfp8_row<Input>(values, groups, words, scales);
}

/// FormatKernels<Mxfp8>::quantize_row, recorded (the scalar rule is its only path).
inline RowFault quantize_row(FormatTag<Mxfp8>, const float* values, std::size_t groups, std::uint8_t* code_bytes,
                             std::uint32_t* words, std::uint8_t* scales, float* biases) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return FormatKernels<Mxfp8>::quantize_row(values, groups, code_bytes, words, scales, biases);
}

/// The first group of a row of Input weights whose exponent is below E8M0's range.
template <class Input = float>
std::size_t first_group_out_of_range(FormatTag<Mxfp8>, InputTag<Input>, const float* values, const std::uint8_t*,
                                     const float*, std::size_t groups) {
    for (std::size_t g = 0; g < groups; ++g)
        if (e8m0_group_exponent<Input>(values + g * Mxfp8::group_size, Mxfp8::group_size, 448.0f) < e8m0_min_exponent)
            return g;
    return groups;
}

/// Why such a group cannot be stored.
inline std::string group_out_of_range_text(FormatTag<Mxfp8>) {
    return "is too small for mxfp8: its largest magnitude / 448 is at most 2^-128, below E8M0's smallest scale "
           "2^-127 (MLX stores a wrapped exponent there)";
}

}  // namespace detail
LOWBIT_END_NAMESPACE
