// F32Codes of the MLX affine format (the contract in gemm/f32_codes.hpp): a code's value is the code
// itself. The GEMV's steps mask each code in place (q * 2^(t*Bits), exact) and x_lanes carries
// 2^-(t*Bits), which saves a shift per step; the last step shifts its code down instead (in place it
// would not fit an int32).
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../../formats/mlx_affine.hpp"
#include "../gemm/f32_codes.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

template <int GroupSize, int Bits>
struct F32Codes<MlxAffine<GroupSize, Bits>> {
    static constexpr int codes_per_word = 32 / Bits;

    static float x_lanes_scale(int t) { return t + 1 == codes_per_word ? 1.0f : std::ldexp(1.0f, -t * Bits); }

    template <class Arch, int Step>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> step(const xsimd::batch<std::uint32_t, Arch>& words) {
        using ubatch = xsimd::batch<std::uint32_t, Arch>;
        ubatch code;
        if constexpr (Step + 1 == codes_per_word)
            code = simd::shift_right<32 - Bits>(words);
        else
            code = words & ubatch(((std::uint32_t{1} << Bits) - 1) << (Step * Bits));
#if defined(__AVX512F__)
        if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
            // The masked form: xsimd 13's conversion starts from an undefined register that GCC 12
            // reports as uninitialized once inlined here (GCC bug 105593; see x86_avx512.hpp).
            const __m512i codes = simd::bit_cast<std::int32_t>(code);
            return xsimd::batch<float, Arch>(_mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), codes));
        }
#endif
        return xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(code));
    }

    template <class Arch>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> value(const xsimd::batch<std::uint32_t, Arch>& codes) {
        return xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(codes));
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
