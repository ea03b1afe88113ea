// Every float tolerance the tests use, with its reason. Integer and packing paths are compared exactly.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

namespace lowbit::test {

/// Unit roundoff of float32 (2^-24).
inline constexpr double float_unit_roundoff = std::numeric_limits<float>::epsilon() / 2.0;

/// Bound on |computed - exact| for a float32 dot product of length K whose terms are x_k * w_k,
/// given sum_k |x_k * w_k| (`abs_sum`). Recursive summation has a worst case of K * u * abs_sum;
/// blocked and SIMD-lane summation with random rounding errors behaves like sqrt(K) * u * abs_sum
/// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., sec. 3.1 and the probabilistic
/// bound of Higham & Mary 2019). The constant 4 covers the extra roundings of the group
/// factorisation s * sum(x*q) + b * sum(x) (a product and a sum per group, plus the per-group
/// partial sums added into the row accumulator).
inline double dot_tolerance(std::size_t depth, double abs_sum) {
    return 4.0 * std::sqrt(static_cast<double>(depth) + 1.0) * float_unit_roundoff * abs_sum +
           std::numeric_limits<float>::denorm_min();
}

}  // namespace lowbit::test

namespace lowbit::test {

/// Rounding slack on |dequantize(quantize(w)) - w| beyond the grid bound (half a step inside the grid,
/// one step at the clipped far end), for a group whose largest |w| is `magnitude`. The code comes from
/// fl(fl(w - b) / s) and the value from fl(fl(s * q) + b): four roundings, each at most u times a
/// quantity no larger than 2 * magnitude (|w - b| and |s * q| span at most the group's range).
inline double quantization_rounding_slack(double magnitude) {
    return 8.0 * float_unit_roundoff * magnitude;
}

/// Bound on |mean - v| for the mean of n stochastic roundings of v: each rounding error lies in (-1, 1)
/// with variance frac(v)(1 - frac(v)) <= 1/4, so the mean's standard deviation is at most 0.5/sqrt(n);
/// five standard deviations (a false failure about once in 3.5 million runs).
inline double stochastic_mean_tolerance(std::size_t n) { return 5.0 * 0.5 / std::sqrt(static_cast<double>(n)); }

/// Bound on the difference between two float32 sums of the same `count` terms in different orders
/// (lowbit sums LSQ scale gradients in double and rounds once; PyTorch sums in float): the recursive
/// summation bound count * u * sum|terms|, plus one rounding of the result.
inline double reordered_sum_tolerance(std::size_t count, double abs_sum) {
    return (static_cast<double>(count) + 1.0) * float_unit_roundoff * abs_sum;
}

/// The moving-average observer update m + c (b - m) is three float operations (or two with a fused
/// multiply-add, which the compiler may choose): each rounds once, |error| <= 3 u max(|m|, |b|).
inline double observer_update_tolerance(double magnitude) { return 3.0 * float_unit_roundoff * magnitude; }

/// The two-layer MLP QAT test (XOR of four Gaussian blobs at (+-1, +-1), sigma 0.45, 16 hidden units): the 4-bit
/// fake-quantized model (weights and activations through FakeQuantize, gradients through the clamped
/// STE) must reach at least the float model's test accuracy minus this gap. The blobs overlap a little
/// (Bayes error about 3%: a point lands past an axis with probability ~1.3% per coordinate), and 4-bit weights with 15 levels can still place the four ReLU
/// hinges XOR needs, so quantization costs a point or two at most; five points leaves room for the
/// different optimisation path without letting a broken model through.
inline constexpr double qat_accuracy_gap = 0.05;

/// The float model must learn the task: XOR is not linearly separable, so an untrained model or one
/// whose gradient was blocked at round (its weights never move) stays near 0.5 to 0.75.
inline constexpr double qat_float_accuracy_floor = 0.9;

}  // namespace lowbit::test

namespace lowbit::test {

/// The int8-activation kernels against their reference (docs/numerics.md N11,
/// int8_matmul_reference.hpp): both add the same 2G terms p_g = fl(fl(s a) isum) and
/// c_g = fl(b xsum) (isum and xsum = fl(a sum xq) are bit-exact), in different orders and perhaps
/// fused: each sum is within 2G u sum|terms| of the exact one (+ one rounding of each product), so the
/// two differ by at most (4G + 2) u sum|terms|. `abs_terms` is sum_g ( |p_g| + |b[n,g]| * |xsum[m,g]| ),
/// with |xsum| taken as a * sum_{k in g} |xq|.
inline double int8_kernel_tolerance(std::size_t groups, double abs_terms) {
    return (4.0 * static_cast<double>(groups) + 2.0) * float_unit_roundoff * abs_terms +
           std::numeric_limits<float>::denorm_min();
}

/// The activation rounding of the int8 path (N11), per output: sum_g (a[m,g] / 2) * sum_{k in g} |w[n,k]|
/// (w = s q + b, the dequantized weight, since the bias term multiplies the dequantized activations
/// too) is the bound of the documentation for exact division; the code comes from RNE(fl(x / a)), whose
/// division adds at most u * 127 to |x / a - xq| <= 1/2, so each term is taken as
/// a * (1/2 + 128 u) * sum |w|. `abs_quantization` is sum_g a * sum_{k in g} |s q + b|.
inline double int8_activation_error_bound(double abs_quantization) {
    return (0.5 + 128.0 * float_unit_roundoff) * abs_quantization;
}

}  // namespace lowbit::test
