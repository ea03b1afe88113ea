// Shared pieces of the post-training quantizers (ptq/): coding one group with a given scale and bias
// (MLX's rule, so the codes are what dequantize reads back), its weighted squared error and a fast |x|^a
// for HQQ's lp error (the checks on calibration inputs are in calibration.hpp). Scalar code
// written so that the compiler vectorizes the group loops (no -ffast-math: the rounding trick needs
// IEEE arithmetic).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "../../rounding.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

/// The code MLX's dequantize pairs with value v for a group (scale, bias): clamp(RNE((v - b) / s), 0, max).
template <int Bits>
inline float group_code(float value, float scale, float bias) noexcept {
    constexpr float max_code = static_cast<float>((1 << Bits) - 1);
    return std::clamp(round_half_to_even((value - bias) / scale), 0.0f, max_code);
}

/// RNE of a value in [0, 2^22] by the 1.5 * 2^23 trick (what group_code's rint gives there), written
/// so that the compiler can vectorize it. Needs IEEE float arithmetic (no -ffast-math reassociation).
inline float round_small_nonnegative(float value) noexcept {
    constexpr float magic = 12582912.0f;  // 1.5 * 2^23
    return (value + magic) - magic;
}

/// sum_i c_i (level(q_i) - v_i)^2 for a group of Count (a multiple of 8) values coded with (scale, bias)
/// (c = weights when Weighted), in float with 8 partial sums so the loop vectorizes without
/// reassociation; clamp then round equals group_code's round then clamp (the bounds are integers). The
/// level s * q + b may be contracted to an fma here (dequantize never fuses). Exact: codes by
/// group_code's division (written to `codes` when not nullptr); otherwise by (v - b) * (1 / s), an
/// estimate for ranking search candidates that may differ from group_code at a tie.
template <int Bits, int Count, bool Weighted, bool Exact = true>
inline float group_squared_error_fast(const float* values, const float* weights, float scale, float bias,
                                      std::int32_t* codes = nullptr) noexcept {
    static_assert(Count % 8 == 0, "lowbit: the group loops run in 8 lanes");
    constexpr float max_code = static_cast<float>((1 << Bits) - 1);
    const float inverse_scale = 1.0f / scale;
    float lanes[8] = {};
    for (int i = 0; i < Count; i += 8)
        for (int k = 0; k < 8; ++k) {
            const float v = values[i + k];
            const float ratio = Exact ? (v - bias) / scale : (v - bias) * inverse_scale;
            const float q = round_small_nonnegative(std::min(std::max(ratio, 0.0f), max_code));
            const float error = scale * q + bias - v;
            lanes[k] += Weighted ? weights[i + k] * error * error : error * error;
            if (codes != nullptr) codes[i + k] = static_cast<std::int32_t>(q);
        }
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/// |x|^a for finite x, a in (0, 1): 2^(a log2(|x| + FLT_MIN)) with polynomial log2 and exp2 (relative
/// error below 6e-6 for |x| >= 2^-100, mostly the float rounding of the exponent y = a log2|x|; x = 0
/// gives FLT_MIN^a, e.g. 2^-88 for a = 0.7). Written without comparisons or branches so that loops
/// over it vectorize (GCC does not if-convert float compares that may trap, and turns a subnormal test
/// into a branch).
inline float abs_pow(float x, float a) noexcept {
    const float normal = std::abs(x) + std::numeric_limits<float>::min();
    const auto bits = std::bit_cast<std::uint32_t>(normal);
    const int exponent = static_cast<int>(bits >> 23) - 127;
    const float mantissa = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
    // log2(m) = 2/ln2 * atanh(t), t = (m - 1) / (m + 1) in [0, 1/3)
    const float t = (mantissa - 1.0f) / (mantissa + 1.0f), t2 = t * t;
    const float log2_m =
        t * (2.885390082f + t2 * (0.961796694f + t2 * (0.577078016f + t2 * (0.412198583f + t2 * 0.320598521f))));
    // y in (-126, 128) for a in (0, 1); 2^y = 2^n * 2^f, n = RNE(y) by the 1.5 * 2^23 trick, f in [-1/2, 1/2]
    const float y = a * (static_cast<float>(exponent) + log2_m);
    const float whole = (y + 12582912.0f) - 12582912.0f, f = y - whole;
    const float p = 1.0f + f * (0.693147181f + f * (0.240226507f + f * (0.0555041087f + f * (0.00961812911f +
                    f * (0.00133335581f + f * 0.000154035304f)))));
    return p * std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<int>(whole) + 127) << 23);
}

}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
