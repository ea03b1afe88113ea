// F32Codes of the E2M1 formats, mxfp4 and nvfp4 (the contract in gemm/f32_codes.hpp): each 4-bit code
// to its value Format::value, twice the E2M1 value (E2m1::doubled_value), exactly. On AVX-512 one
// vpermps from a 16-float table (it reads the low 4 bits of each lane, so a step needs only its shift);
// elsewhere from the code's bits: magnitude index i = code & 7 is exponent e = i >> 1 and mantissa
// m = i & 1, and twice the E2M1 value is m for e = 0 and the float with exponent field 127 + e and top
// mantissa bit m otherwise (the bits i << 22 plus 127 << 23); the sign is bit 3, moved to bit 31.
// x_lanes carries no factor.
#pragma once

#include "../config.hpp"

#include <cstdint>
#include <type_traits>

#include "../../formats/minifloats.hpp"
#include "../gemm/f32_codes.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

template <E2m1Format Format>
struct F32Codes<Format> {
    static constexpr float x_lanes_scale(int) { return 1.0f; }

    template <class Arch, int Step>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> step(const xsimd::batch<std::uint32_t, Arch>& words) {
        if constexpr (Step == 0)
            return value<Arch>(words);
        else
            return value<Arch>(simd::shift_right<4 * Step>(words));
    }

    /// The value of the code in the low 4 bits of each lane (the higher bits are ignored).
    template <class Arch>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> value(const xsimd::batch<std::uint32_t, Arch>& codes) {
        using fbatch = xsimd::batch<float, Arch>;
        using ubatch = xsimd::batch<std::uint32_t, Arch>;
#if defined(__AVX512F__)
        if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
            const __m512 table = _mm512_setr_ps(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f, 12.0f, -0.0f, -1.0f, -2.0f,
                                                -3.0f, -4.0f, -6.0f, -8.0f, -12.0f);
            // The masked form, all lanes on (GCC bug 105593; see x86_avx512.hpp).
            return fbatch(_mm512_mask_permutexvar_ps(table, static_cast<__mmask16>(0xFFFF),
                                                     simd::bit_cast<std::int32_t>(codes), table));
        }
#endif
        const ubatch index = codes & ubatch(7u);
        const fbatch subnormal = xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(index));  // e = 0: m
        const fbatch normal = simd::bit_cast<float>((index << 22) + ubatch(127u << 23));
        const fbatch magnitude = xsimd::select(subnormal < fbatch(2.0f), subnormal, normal);
        const ubatch sign = (codes & ubatch(8u)) << 28;
        return simd::bit_cast<float>(simd::bit_cast<std::uint32_t>(magnitude) | sign);
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
