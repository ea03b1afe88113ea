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

}  // namespace lowbit::test
