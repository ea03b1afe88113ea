// The mxfp4 quantization rule of MLX 0.32's CPU `mx.quantize(w, mode="mxfp4")` on float32, float16 and
// bfloat16 weights (docs/numerics.md N16, N19), scalar: a group's E8M0 exponent, a value's E2M1 code, one row; and what
// quantize_named (quantized_matrix.hpp) and FormatKernels<Mxfp4> reach by the format's tag.
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../formats/mxfp4.hpp"
#include "../dispatch/format_kernels.hpp"
#include "../input_types.hpp"
#include "../kernel_paths.hpp"
#include "../minifloat_rounding.hpp"
#include "../mlx_affine/packing.hpp"
#include "../row_fault.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The scale exponent MLX gives a group of weights of type Input whose largest magnitude is amax
/// (finite): e8m0_exponent for E2M1's largest value 6, E = ceil(log2(fl(amax / 6))) with the quotient
/// rounded to Input; 0 for an all-zero group. The byte is E + 127.
template <class Input = float>
int mxfp4_exponent(float amax) {
    return e8m0_exponent<Input>(amax, 6.0f);
}

/// Quantizes one row of `groups` groups of 32 values of type Input (read exactly as floats) into packed
/// words and exponent bytes (code_bytes: scratch for groups * 32 bytes): per group E, then each value's
/// e2m1_code(w / 2^E) (exact: MLX's quotient in Input is the same number). Returns
/// RowFault::non_finite_value for a NaN or Inf (outputs unspecified), RowFault::group_out_of_range when
/// a group's exponent is below -127 (its byte is then 0 and its codes those of 2^-127; quantize
/// refuses the matrix), else none.
template <class Input>
RowFault quantize_mxfp4_row(const float* values, std::size_t groups, std::uint8_t* code_bytes, std::uint32_t* words,
                            std::uint8_t* scales) {
    constexpr std::size_t group_size = Mxfp4::group_size;
    for (std::size_t i = 0; i < groups * group_size; ++i)
        if (!std::isfinite(values[i])) return RowFault::non_finite_value;
    RowFault found = RowFault::none;
    for (std::size_t g = 0; g < groups; ++g) {
        const float* group = values + g * group_size;
        int exponent = e8m0_group_exponent<Input>(group, Mxfp4::group_size, 6.0f);
        if (exponent < e8m0_min_exponent) {
            found = RowFault::group_out_of_range;
            exponent = e8m0_min_exponent;
        }
        scales[g] = static_cast<std::uint8_t>(exponent + 127);
        const float scale = std::ldexp(1.0f, exponent);  // exact: 2^-127 is a float
        for (std::size_t i = 0; i < group_size; ++i) code_bytes[g * group_size + i] = e2m1_code(group[i] / scale);
    }
    kernels::pack_code_bytes<Mxfp4::bits>(code_bytes, groups * group_size, words);
    return found;
}

/// quantize_mxfp4_row of float weights: what FormatKernels<Mxfp4>::quantize_row runs.
inline RowFault run_quantize_row(FormatTag<Mxfp4>, const float* values, std::size_t groups, std::uint8_t* code_bytes,
                                 std::uint32_t* words, std::uint8_t* scales, float* /*biases*/) {
    return quantize_mxfp4_row<float>(values, groups, code_bytes, words, scales);
}

/// quantize_mxfp4_row of weights read from Input (half or bfloat16), recorded.
template <class Input>
RowFault quantize_row(FormatTag<Mxfp4>, InputTag<Input>, const float* values, std::size_t groups,
                      std::uint8_t* code_bytes, std::uint32_t* words, std::uint8_t* scales, float* /*biases*/) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return quantize_mxfp4_row<Input>(values, groups, code_bytes, words, scales);
}

/// FormatKernels<Mxfp4>::quantize_row, recorded (the scalar rule is its only path).
inline RowFault quantize_row(FormatTag<Mxfp4>, const float* values, std::size_t groups, std::uint8_t* code_bytes,
                             std::uint32_t* words, std::uint8_t* scales, float* biases) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return FormatKernels<Mxfp4>::quantize_row(values, groups, code_bytes, words, scales, biases);
}

/// The first group of a row of Input weights whose exponent is below E8M0's range.
template <class Input = float>
std::size_t first_group_out_of_range(FormatTag<Mxfp4>, InputTag<Input>, const float* values, const std::uint8_t*,
                                     const float*, std::size_t groups) {
    for (std::size_t g = 0; g < groups; ++g)
        if (e8m0_group_exponent<Input>(values + g * Mxfp4::group_size, Mxfp4::group_size, 6.0f) < e8m0_min_exponent)
            return g;
    return groups;
}

/// Why such a group cannot be stored.
inline std::string group_out_of_range_text(FormatTag<Mxfp4>) {
    return "is too small for mxfp4: its largest magnitude / 6 is at most 2^-128, below E8M0's smallest scale "
           "2^-127 (MLX stores a wrapped exponent there)";
}

}  // namespace detail
LOWBIT_END_NAMESPACE
