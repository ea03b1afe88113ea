// Bit-exact comparisons for tests: equal bits (any NaN equals any NaN), and where two results first
// differ, so a failure names the element.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include <Eigen/Core>

namespace lowbit::test {

/// Equal bits, or both NaN.
inline bool same_bits(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return true;
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

/// Index of the first element that differs in bits (NaN equals NaN); -1 when none, -2 for different sizes.
inline long first_difference(std::span<const float> a, std::span<const float> b) {
    if (a.size() != b.size()) return -2;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!same_bits(a[i], b[i])) return static_cast<long>(i);
    return -1;
}

/// The same for two matrices of any storage order, as row-major index r * cols + c; -2 for different shapes.
template <class A, class B>
long first_matrix_difference(const Eigen::DenseBase<A>& a, const Eigen::DenseBase<B>& b) {
    if (a.rows() != b.rows() || a.cols() != b.cols()) return -2;
    for (Eigen::Index r = 0; r < a.rows(); ++r)
        for (Eigen::Index c = 0; c < a.cols(); ++c)
            if (!same_bits(a(r, c), b(r, c))) return static_cast<long>(r * a.cols() + c);
    return -1;
}

}  // namespace lowbit::test
