// F32Codes of mxfp8 (the contract in gemm/f32_codes.hpp): each 8-bit E4M3 code to its value
// Mxfp8::value, 2^9 times the E4M3 value. The code's byte moved to bits 24..31 of its lane (sign at 31)
// and shifted right by 4 with its sign (arithmetic) puts the 7 magnitude bits at float bits 20..26
// over copies of the sign at 27..31; masked to the sign and those bits, it is the float 2^-120 times
// the E4M3 value, normal and subnormal alike, -0 for 0x80, and +-480 * 2^-120 for the NaN patterns
// (Mxfp8::value's rule). A multiply by 2^120 restores the E4M3 value exactly; the factor 2^9 rides on
// the GEMV's permuted x (x_lanes_scale = 512: exact unless |x| > FLT_MAX / 512, where the GEMV and the
// batch GEMV overflow to Inf), and value() multiplies it in for the panel GEMM.
#pragma once

#include "../config.hpp"

#include <cstdint>

#include "../../formats/mxfp8.hpp"
#include "../gemm/f32_codes.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

template <>
struct F32Codes<Mxfp8> {
    static constexpr float x_lanes_scale(int) { return 512.0f; }

    /// Code Step of each lane's word as its E4M3 value (Mxfp8::value / 512).
    template <class Arch, int Step>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> step(const xsimd::batch<std::uint32_t, Arch>& words) {
        if constexpr (Step == 3)
            return e4m3<Arch>(words);
        else
            return e4m3<Arch>(words << (24 - 8 * Step));
    }

    /// The value of the code in the low 8 bits of each lane (the higher bits are ignored).
    template <class Arch>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> value(const xsimd::batch<std::uint32_t, Arch>& codes) {
        return e4m3<Arch>(codes << 24) * xsimd::batch<float, Arch>(512.0f);
    }

    /// Mxfp8::group_scale, 2^(e - 136), of the scale byte in each lane (the rest zero), exactly.
    template <class Arch>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> group_scales(const xsimd::batch<std::uint32_t, Arch>& bytes) {
        return e8m0_values<-9, Arch>(bytes);
    }

private:
    /// The E4M3 value of the code in bits 24..31 of each lane (the lower bits are ignored).
    template <class Arch>
    LOWBIT_ALWAYS_INLINE static xsimd::batch<float, Arch> e4m3(const xsimd::batch<std::uint32_t, Arch>& high_byte) {
        using fbatch = xsimd::batch<float, Arch>;
        using ibatch = xsimd::batch<std::int32_t, Arch>;
        const ibatch spread = simd::shift_right<4>(simd::bit_cast<std::int32_t>(high_byte));
        const fbatch scaled_down = simd::bit_cast<float>(spread & ibatch(static_cast<std::int32_t>(0x87F00000u)));
        return scaled_down * fbatch(0x1p120f);
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
