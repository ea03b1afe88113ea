// How MLX 0.32's CPU quantize rounds to the small float encodings of formats/minifloats.hpp (docs/
// numerics.md N16 to N18): an E8M0 group exponent, an E4M3 byte, an E2M1 code. Scalar; shared by the
// row quantizers of mxfp4/, nvfp4/ and mxfp8/.
#pragma once

#include "config.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

#include "../formats/minifloats.hpp"
#include "input_types.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The smallest exponent E8M0 stores (byte 0).
inline constexpr int e8m0_min_exponent = -127;

/// The E8M0 exponent MLX gives a group whose largest magnitude is amax (finite) when its elements
/// reach element_max (6 for E2M1, 448 for E4M3), for weights of type Input (input_types.hpp):
/// E = ceil(log2(r)) exactly, for r = fl(amax / element_max) rounded to Input (MLX computes this
/// quotient in the input's type: below Input's normal range it loses bits, and it can round to 0);
/// 0 when r is 0 (an all-zero group, or one whose quotient underflows Input). The byte stored is
/// E + 127 (the caller checks E >= -127).
template <class Input = float>
int e8m0_exponent(float amax, float element_max) {
    const float r = round_to<Input>(amax / element_max);
    if (r == 0.0f) return 0;
    int e = 0;
    const float fraction = std::frexp(r, &e);  // r = fraction * 2^e, fraction in [0.5, 1)
    return fraction == 0.5f ? e - 1 : e;
}

/// e8m0_exponent of the group of `group_size` values starting at `group`.
template <class Input = float>
int e8m0_group_exponent(const float* group, int group_size, float element_max) {
    float amax = 0.0f;
    for (int i = 0; i < group_size; ++i) amax = std::fmax(amax, std::fabs(group[i]));
    return e8m0_exponent<Input>(amax, element_max);
}

/// The E2M1 code MLX gives q: the first code, in table order, at the smallest float distance
/// |q - value|. So ties go to the smaller magnitude (0.75 -> 0.5, 5 -> 4), values beyond 6 to +-6, and
/// -0 and every |q| <= 0.25 to code 0 (+0); so do +-Inf and NaN (every distance is then Inf or NaN, never
/// smaller than the first), which is what a value divided by a zero scale gives (nvfp4).
inline std::uint8_t e2m1_code(float q) {
    std::uint8_t best = 0;
    float best_distance = std::fabs(q - E2m1::values[0]);
    for (std::uint8_t code = 1; code < 16; ++code) {
        const float distance = std::fabs(q - E2m1::values[code]);
        if (distance < best_distance) {
            best = code;
            best_distance = distance;
        }
    }
    return best;
}

/// The E4M3 byte nearest to r (finite, >= 0), ties to even, as MLX's to_fp8 rounds: below 2^-6 (the
/// smallest normal) to a multiple of 2^-9 (adding 2^14, whose float ulp is 2^-9, rounds there; the
/// difference of the bit patterns is the byte, 8 being 2^-6 itself); from 2^-6 on the float's
/// exponent rebased by 120 and its mantissa rounded to 3 bits; from 464 on (448 plus half its step)
/// the largest finite byte 0x7E = 448, so no value rounds to the NaN pattern 0x7F.
inline std::uint8_t e4m3_byte(float r) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(r);
    if (bits >= std::bit_cast<std::uint32_t>(464.0f)) return 0x7E;
    if (bits < (121u << 23)) {
        constexpr float two_to_14 = 16384.0f;
        return static_cast<std::uint8_t>(std::bit_cast<std::uint32_t>(r + two_to_14) -
                                         std::bit_cast<std::uint32_t>(two_to_14));
    }
    const std::uint32_t odd = (bits >> 20) & 1u;  // ties to even: round half up only from an odd mantissa
    return static_cast<std::uint8_t>((bits - (120u << 23) + 0x7FFFFu + odd) >> 20);
}

/// The signed E4M3 code of a finite v: v's sign bit (so -0 and negatives that round to zero give 0x80)
/// over e4m3_byte(|v|).
inline std::uint8_t e4m3_code(float v) {
    const auto sign = static_cast<std::uint8_t>(std::signbit(v) ? 0x80u : 0u);
    return static_cast<std::uint8_t>(sign | e4m3_byte(std::fabs(v)));
}

}  // namespace detail
LOWBIT_END_NAMESPACE
