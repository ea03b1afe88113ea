// IEEE binary16 (f16) and bfloat16 (bf16) to and from float, bit by bit, as checkpoints store them.
//
//   f16:  | sign 1 | exponent 5 (bias 15) | mantissa 10 |      bf16: | sign 1 | exponent 8 (bias 127) | mantissa 7 |
//
// Widening is exact for every value (subnormals, +-0, +-Inf; a NaN keeps its sign and payload, quiet or
// signalling). Narrowing rounds to nearest, ties to even (as MLX's and PyTorch's casts), overflows to
// +-Inf, and keeps a NaN's sign and top payload bits (setting the quiet bit only when those bits are all
// zero, so it stays a NaN). So narrow(widen(h)) == h for every one of the 65536 bit patterns h: tensors
// that came from an f16 or bf16 checkpoint are written back byte for byte, NaNs included.
#pragma once

#include "../../detail/config.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

LOWBIT_BEGIN_NAMESPACE
namespace io_detail {

/// The float an f16 bit pattern stands for (exact).
inline float f16_to_float(std::uint16_t half) noexcept {
    const std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
    const std::uint32_t exponent = (half >> 10) & 0x1fu;
    const std::uint32_t mantissa = half & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        // Subnormal (or zero): mantissa * 2^-24, exact in float.
        const float magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
        return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
    }
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// The f16 nearest to `value` (ties to even); beyond 65520 in magnitude, +-Inf.
inline std::uint16_t float_to_f16(float value) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {  // NaN: top 10 payload bits kept, still a NaN
        const auto payload = static_cast<std::uint16_t>((magnitude >> 13) & 0x3ffu);
        return static_cast<std::uint16_t>(sign | 0x7c00u | (payload != 0 ? payload : 0x200u));
    }
    if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 (a tie to even): Inf
    if (magnitude < 0x38800000u) {
        // Below 2^-14: an f16 subnormal m * 2^-24, m = RNE(|value| * 2^24) (exact scaling; 1024 becomes
        // the smallest normal, whose bits are exactly 0x0400).
        const float scaled = std::bit_cast<float>(magnitude) * 0x1.0p24f;
        return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
    }
    const std::uint32_t exponent = (magnitude >> 23) - 112;
    const std::uint32_t mantissa = magnitude & 0x7fffffu;
    std::uint32_t half = (exponent << 10) | (mantissa >> 13);
    const std::uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) ++half;  // a carry moves into the exponent
    return static_cast<std::uint16_t>(sign | half);
}

/// The float a bf16 bit pattern stands for (exact).
inline float bf16_to_float(std::uint16_t bf16) noexcept {
    return std::bit_cast<float>(std::uint32_t{bf16} << 16);
}

/// The bf16 nearest to `value` (ties to even).
inline std::uint16_t float_to_bf16(float value) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: top 7 payload bits kept, still a NaN
        const auto top = static_cast<std::uint16_t>(bits >> 16);
        return static_cast<std::uint16_t>((top & 0x7fu) != 0 ? top : top | 0x40u);
    }
    const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>(rounded >> 16);
}

}  // namespace io_detail
LOWBIT_END_NAMESPACE
