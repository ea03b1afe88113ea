// dispatch/: kernel selection for quantizing weights into the MLX affine format (the table is at the
// top of fake_quant.hpp in this folder).
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstdint>
#include <tuple>

#include "../kernel_paths.hpp"
#include "../mlx_affine/packing.hpp"
#include "../mlx_affine/quantize.hpp"
#include "../mlx_affine/quantize_kernel.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Quantizes one group of GroupSize values (MLX's rule) into int32 codes; false when a value is not
/// finite (then nothing else is meaningful).
template <int GroupSize, int Bits>
bool quantize_group(const float* values, std::int32_t* codes, float& scale, float& bias) {
    if constexpr (simd::enabled) {
        record(KernelOp::quantize_group, KernelPath::simd);
        return kernels::quantize_group_f32<simd::arch, GroupSize, Bits>(values, codes, scale, bias);
    } else {
        record(KernelOp::quantize_group, KernelPath::reference);
        for (int i = 0; i < GroupSize; ++i)
            if (!std::isfinite(values[i])) return false;
        std::tie(scale, bias) = reference::quantize_group<Bits>(values, GroupSize, codes);
        return true;
    }
}

/// Packs one row of `count` int32 codes (a multiple of 32) into MLX words.
template <int Bits>
void pack_row_codes(const std::int32_t* codes, std::size_t count, std::uint32_t* words) {
    if constexpr (simd::enabled && 32 % Bits == 0) {
        kernels::pack_whole_word_codes<simd::arch, Bits>(codes, count, words);
    } else {
        kernels::pack_codes<Bits>(codes, count, words);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
