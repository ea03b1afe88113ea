// Ternary x int8 matmul (docs/numerics.md N14): the output arithmetic shared by
// BitLinear's training forward and every kernel, and the scalar reference of the integer sums.
//
// For output (m, n): isum = sum_k t[n,k] * xq[m,k] (over the whole row per tensor, over each group of
// 64 per group), exact in int32. The kernels compute raw = sum_k u[n,k] * xq[m,k] with the stored
// digits u = t + 1 (unsigned, as vpdpbusd / vpmaddubsw need) and subtract the activation code sum:
// isum = raw - sum_k xq[m,k]. Then, in this order and nowhere else (ternary_output_*):
//   per tensor: y = fma(fl(float(isum) * gamma), a[m], bias[n])
//   per group:  p = 0; for g ascending: p = fma(float(isum_g), gamma[n,g], p);  y = fma(p, a[m], bias[n])
// (bias 0 when there is none). std::fma keeps the result independent of -ffp-contract.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <xsimd/xsimd.hpp>

#include "activations.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::ternary {

/// Largest K the kernels accept: every int32 lane of every kernel stays below 2^31 (the I2 kernel's
/// scaled lanes reach 254 * K).
inline constexpr Eigen::Index max_cols = Eigen::Index{1} << 22;

/// Output = the per-tensor arithmetic above.
inline float ternary_output_per_tensor(std::int32_t isum, float gamma, float a, float bias) noexcept {
    const float p = static_cast<float>(isum) * gamma;
    return std::fma(p, a, bias);
}
/// Output = the per-group arithmetic above (groups isums and scales).
inline float ternary_output_per_group(const std::int32_t* isums, const float* gammas, Eigen::Index groups, float a,
                                      float bias) noexcept {
    float p = 0.0f;
    for (Eigen::Index g = 0; g < groups; ++g) p = std::fma(static_cast<float>(isums[g]), gammas[g], p);
    return std::fma(p, a, bias);
}

/// A packed ternary matrix as the kernels read it (TernaryLinear holds the storage).
struct PackedTernaryView {
    TernaryFormat format = TernaryFormat::i2;
    Eigen::Index rows = 0, cols = 0, row_bytes = 0;
    const std::uint8_t* codes = nullptr;  ///< [rows, row_bytes]
    bool per_tensor = true;
    const float* scales = nullptr;  ///< per tensor: 1 value; per group: [rows, cols / 64]
    const float* bias = nullptr;    ///< [rows] or null
    Eigen::Index groups() const { return per_tensor ? 1 : cols / group_codes; }
};

namespace reference {

/// raw sums sum_k u[k] * x[k] of one packed row against one padded activation row: per tensor into
/// sums[0]; per group into sums[0 .. padded / 64).
inline void row_dots(TernaryFormat format, const std::uint8_t* row, Eigen::Index padded, const std::int8_t* x,
                     bool per_group, std::int32_t* sums) {
    const Eigen::Index groups = padded / group_codes;
    for (Eigen::Index g = 0; g < (per_group ? groups : 1); ++g) sums[g] = 0;
    for (Eigen::Index k = 0; k < padded; ++k) {
        const std::int32_t product = packed_digit(format, row, k) * static_cast<std::int32_t>(x[k]);
        sums[per_group ? k / group_codes : 0] += product;
    }
}

/// out[m * out_stride + n] = the ternary matmul (header) of the prepared activations and w, scalar.
inline void ternary_matmul(const PackedTernaryView& w, const TernaryActivations& act, float* out,
                           Eigen::Index out_stride) {
    const Eigen::Index groups = w.groups();
    std::vector<std::int32_t> sums(static_cast<std::size_t>(act.padded / group_codes));
    for (Eigen::Index n = 0; n < w.rows; ++n) {
        const std::uint8_t* row = w.codes + n * w.row_bytes;
        const float bias = w.bias != nullptr ? w.bias[n] : 0.0f;
        for (Eigen::Index m = 0; m < act.rows; ++m) {
            row_dots(w.format, row, act.padded, act.row(m), !w.per_tensor, sums.data());
            if (w.per_tensor) {
                out[m * out_stride + n] =
                    ternary_output_per_tensor(sums[0] - act.sums[static_cast<std::size_t>(m)], w.scales[0],
                                              act.scales[static_cast<std::size_t>(m)], bias);
            } else {
                for (Eigen::Index g = 0; g < groups; ++g)
                    sums[static_cast<std::size_t>(g)] -= act.group_sums[static_cast<std::size_t>(m * groups + g)];
                out[m * out_stride + n] = ternary_output_per_group(sums.data(), w.scales + n * groups, groups,
                                                                   act.scales[static_cast<std::size_t>(m)], bias);
            }
        }
    }
}

}  // namespace reference
}  // namespace detail::ternary
LOWBIT_END_NAMESPACE
