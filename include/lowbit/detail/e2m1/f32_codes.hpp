// F32Codes of the E2M1 formats, mxfp4 and nvfp4 (the contract in gemm/f32_codes.hpp): each 4-bit code
// to its value Format::value, twice the E2M1 value (E2m1::doubled_value), exactly. On AVX-512 one
// vpermps from a 16-float table (it reads the low 4 bits of each lane, so a step needs only its shift);
// elsewhere from the code's bits: magnitude index i = code & 7 is exponent e = i >> 1 and mantissa
// m = i & 1, and twice the E2M1 value is m for e = 0 and the float with exponent field 127 + e and top
// mantissa bit m otherwise (the bits i << 22 plus 127 << 23); the sign is bit 3, moved to bit 31.
// x_lanes carries no factor. group_scales decodes a vector of scale bytes (the GEMV's, f32_gemv.hpp).
#pragma once

#include "../config.hpp"

#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../formats/minifloats.hpp"
#include "../../formats/mxfp4.hpp"
#include "../../formats/nvfp4.hpp"
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

    /// Format::group_scale of the scale byte in each lane (the low 8 bits; the rest zero), exactly: for
    /// nvfp4 half the E4M3 value (e4m3_value(s, -1): the 7 magnitude bits at float bits 20..26 are 2^-120
    /// times the magnitude, restored by 2^119; NaN for 0x7F and 0xFF), for mxfp4 2^(e - 128)
    /// (e8m0_values<-1>).
    template <class Arch>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> group_scales(const xsimd::batch<std::uint32_t, Arch>& bytes) {
        using fbatch = xsimd::batch<float, Arch>;
        using ubatch = xsimd::batch<std::uint32_t, Arch>;
        if constexpr (std::is_same_v<Format, Nvfp4>) {
            const ubatch magnitude = bytes & ubatch(0x7Fu);
            const fbatch value = simd::bit_cast<float>(simd::shift_left<20>(magnitude)) * fbatch(0x1p119f);
            const ubatch sign = simd::shift_left<24>(bytes & ubatch(0x80u));
            const fbatch signed_value = simd::bit_cast<float>(simd::bit_cast<std::uint32_t>(value) | sign);
            // 240 is the magnitude 0x7F reads as (480 / 2), only it.
            return xsimd::select(value == fbatch(240.0f), fbatch(std::numeric_limits<float>::quiet_NaN()),
                                 signed_value);
        } else {
            static_assert(std::is_same_v<Format, Mxfp4>, "group_scales: the E2M1 formats are mxfp4 and nvfp4");
            return e8m0_values<-1, Arch>(bytes);
        }
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
