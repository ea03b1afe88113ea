// The small float encodings of the microscaling formats, decoded: E2M1 (4-bit element codes of mxfp4
// and nvfp4), E4M3 (nvfp4's group scales, mxfp8's element codes), E8M0 (mxfp4's and mxfp8's group
// scales). Each is exact in float.
//
//   E2M1  s e e m          value (-1)^s * {0, 0.5, 1, 1.5, 2, 3, 4, 6}[eem]
//   E4M3  s e e e e m m m  value (-1)^s * 2^(e - 7) * (1 + m/8), subnormal (e = 0) m * 2^-9; 0x7F and
//                          0xFF are NaN (in OCP and in MLX 0.32.4's from_fp8); no infinities
//   E8M0  e e e e e e e e  value 2^(e - 127); 255 is NaN in OCP
#pragma once

#include "../detail/config.hpp"

#include <array>
#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>

LOWBIT_BEGIN_NAMESPACE

/// The E2M1 element encoding, as the element type of a format (Format::element).
struct E2m1 {
    /// Twice the value of the code in the low 4 bits: an integer in {0, +-1, +-2, +-3, +-4, +-6, +-8,
    /// +-12} (code 8 is -0). Kept doubled so that a kernel's integer sums are exact; the formats halve
    /// their group scale to match.
    static constexpr float doubled_value(std::uint32_t code) noexcept {
        constexpr std::array<float, 8> doubled{0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f, 12.0f};
        const float magnitude = doubled[code & 7u];
        return (code & 8u) != 0 ? -magnitude : magnitude;
    }
    /// The values in code order, +0 first and -0 at code 8 (MLX's table).
    static constexpr std::array<float, 16> values{+0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
};

/// The E4M3 element encoding, as the element type of a format (Format::element): its values are
/// e4m3_value below.
struct E4m3 {};

/// The E4M3 byte's value times 2^shift (shift in [-10, 0]: the result stays exact), NaN for 0x7F and
/// 0xFF: the 7 magnitude bits placed at float bits 20..26 make the float 2^-120 times the E4M3
/// magnitude (normal and subnormal alike), which the multiply by 2^(120 + shift) restores.
constexpr float e4m3_value(std::uint8_t byte, int shift = 0) noexcept {
    if ((byte & 0x7Fu) == 0x7Fu) return std::numeric_limits<float>::quiet_NaN();
    const float times_2_to_minus_120 = std::bit_cast<float>(static_cast<std::uint32_t>(byte & 0x7Fu) << 20);
    const float restore = std::bit_cast<float>(static_cast<std::uint32_t>(127 + 120 + shift) << 23);
    const float magnitude = times_2_to_minus_120 * restore;
    return (byte & 0x80u) != 0 ? -magnitude : magnitude;
}

/// The E8M0 byte's value times 2^shift, 2^(e - 127 + shift), for e + shift in [-22, 254] (a float:
/// normal from 1 on, subnormal below).
constexpr float e8m0_value(std::uint8_t exponent, int shift = 0) noexcept {
    const int field = exponent + shift;  // the float's biased exponent field
    return field >= 1 ? std::bit_cast<float>(static_cast<std::uint32_t>(field) << 23)
                      : std::bit_cast<float>(std::uint32_t{1} << (22 + field));
}

/// True unless the E4M3 byte is a NaN pattern of OCP (0x7F, 0xFF).
constexpr bool is_finite_e4m3(std::uint8_t byte) noexcept {
    return (byte & 0x7Fu) != 0x7Fu;
}

namespace detail {

/// A format whose codes are E2M1 elements (mxfp4, nvfp4): the kernels of detail/e2m1/ serve it.
template <class Format>
concept E2m1Format = std::same_as<typename Format::element, E2m1>;

}  // namespace detail

LOWBIT_END_NAMESPACE
