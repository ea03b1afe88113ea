// The nvfp4 quantization rule of MLX 0.32's CPU `mx.quantize(w, mode="nvfp4")` on float32, float16 and
// bfloat16 weights without a global scale (docs/numerics.md N17, N19), scalar: a group's E4M3 scale byte, one row; and
// what quantize_named (quantized_matrix.hpp) and FormatKernels<Nvfp4> reach by the format's tag.
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../formats/nvfp4.hpp"
#include "../dispatch/format_kernels.hpp"
#include "../input_types.hpp"
#include "../kernel_paths.hpp"
#include "../minifloat_rounding.hpp"
#include "../mlx_affine/packing.hpp"
#include "../row_fault.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The scale byte MLX gives a group of 16 weights of type Input whose largest magnitude is amax
/// (finite): e4m3_byte(fl(r * encode)) for r = fl(amax / 6) rounded to Input and encode = 2688 / the
/// global scale (N17.6; 1 without one, which leaves r as it is).
template <class Input = float>
std::uint8_t nvfp4_scale_byte(float amax, float encode = 1.0f) {
    return e4m3_byte(round_to<Input>(amax / 6.0f) * encode);
}

/// Quantizes one row of `groups` groups of 16 values of type Input (read exactly as floats) into packed
/// words and scale bytes (code_bytes: scratch for groups * 16 bytes): per group the scale byte s, then
/// each value's E2M1 code of fl(w / E4M3(s)) rounded to Input (MLX divides in the input's type) and
/// multiplied by `encode` (2688 / global scale, N17.6: positive and finite; 1 without one, exactly the
/// quotient). A group whose scale rounds to 0 (largest magnitude below 2^-10 * 6 without a global scale)
/// gets code 0 for every value, as in MLX (where w / 0 is Inf or NaN); one beyond 6 * 448 saturates at
/// scale 448 and codes +-6 (bfloat16 quotients beyond 2^24 excepted: there e2m1_code's float distances
/// tie, as MLX's do). Returns RowFault::non_finite_value for a NaN or Inf (outputs unspecified), else none.
template <class Input>
RowFault quantize_nvfp4_row(const float* values, std::size_t groups, std::uint8_t* code_bytes, std::uint32_t* words,
                            std::uint8_t* scales, float encode = 1.0f) {
    constexpr std::size_t group_size = Nvfp4::group_size;
    for (std::size_t i = 0; i < groups * group_size; ++i)
        if (!std::isfinite(values[i])) return RowFault::non_finite_value;
    for (std::size_t g = 0; g < groups; ++g) {
        const float* group = values + g * group_size;
        float amax = 0.0f;
        for (std::size_t i = 0; i < group_size; ++i) amax = std::fmax(amax, std::fabs(group[i]));
        scales[g] = nvfp4_scale_byte<Input>(amax, encode);
        const float scale = e4m3_value(scales[g]);
        // A zero scale gives code 0 everywhere (what e2m1_code gives MLX's quotients w / 0, Inf or NaN),
        // without dividing by zero.
        for (std::size_t i = 0; i < group_size; ++i)
            code_bytes[g * group_size + i] =
                scale == 0.0f ? std::uint8_t{0} : e2m1_code(round_to<Input>(group[i] / scale) * encode);
    }
    kernels::pack_code_bytes<Nvfp4::bits>(code_bytes, groups * group_size, words);
    return RowFault::none;
}

/// quantize_nvfp4_row of float weights: what FormatKernels<Nvfp4>::quantize_row runs.
inline RowFault run_quantize_row(FormatTag<Nvfp4>, const float* values, std::size_t groups, std::uint8_t* code_bytes,
                                 std::uint32_t* words, std::uint8_t* scales, float* /*biases*/) {
    return quantize_nvfp4_row<float>(values, groups, code_bytes, words, scales);
}

/// quantize_nvfp4_row of weights read from Input (half or bfloat16), recorded.
template <class Input>
RowFault quantize_row(FormatTag<Nvfp4>, InputTag<Input>, const float* values, std::size_t groups,
                      std::uint8_t* code_bytes, std::uint32_t* words, std::uint8_t* scales, float* /*biases*/) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return quantize_nvfp4_row<Input>(values, groups, code_bytes, words, scales);
}

/// FormatKernels<Nvfp4>::quantize_row, recorded (the scalar rule is its only path).
inline RowFault quantize_row(FormatTag<Nvfp4>, const float* values, std::size_t groups, std::uint8_t* code_bytes,
                             std::uint32_t* words, std::uint8_t* scales, float* biases) {
    record(KernelOp::quantize_group, KernelPath::reference);
    return FormatKernels<Nvfp4>::quantize_row(values, groups, code_bytes, words, scales, biases);
}

/// nvfp4 stores every finite group (run_quantize_row never reports one out of range).
inline std::size_t first_group_out_of_range(FormatTag<Nvfp4>, const float*, const std::uint8_t*, const float*,
                                            std::size_t groups) {
    return groups;
}
inline std::string group_out_of_range_text(FormatTag<Nvfp4>) {
    return "cannot be out of range in nvfp4";
}

}  // namespace detail
LOWBIT_END_NAMESPACE
