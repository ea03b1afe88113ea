// GPTQ's error-feedback factor: U, the upper Cholesky factor of (H + d I)^-1 (H^-1 = U^T U), computed
// without forming H^-1. With P the reversal permutation, P (H + d I) P = L L^T gives U = P L^-1 P.
// L is factored in place (Eigen's blocked LLT on H's own storage) and L^-1 is solved one block of
// columns at a time on the trailing triangle only (column k of L^-1 is zero above k), so the inverse
// costs n^3 / 3 flops instead of the n^3 of a solve against the full identity. The reference is the
// direct form: LLT of a reversed copy, then a solve against the whole identity.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <utility>

#include <type_traits>

#include <Eigen/Cholesky>
#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE
namespace detail::ptq {

/// m(i, j) <-> m(n-1-i, n-1-j) for a square m (P m P), in place. A plain loop rather than Eigen's
/// reverseInPlace, whose AVX-512 packet reversal GCC 12 reports as reading an uninitialized register
/// at -O1 (GCC bug 105593, as in detail/simd.hpp's users).
inline void reverse_square(Eigen::MatrixXf& m) noexcept {
    const Eigen::Index n = m.rows();
    for (Eigen::Index j = 0; j < n - 1 - j; ++j) {
        float* a = m.col(j).data();
        float* b = m.col(n - 1 - j).data();
        for (Eigen::Index i = 0; i < n; ++i) std::swap(a[i], b[n - 1 - i]);
    }
    if (n % 2 == 1) {
        float* middle = m.col(n / 2).data();
        std::reverse(middle, middle + n);
    }
}

/// Columns of L^-1 solved per triangular solve.
inline constexpr Eigen::Index inverse_block_columns = 256;

/// U (upper triangular, n x n) of `h` + damping * I, or false when the Cholesky factorization fails or
/// U has a non-finite entry or a non-positive diagonal. `h` (symmetric, full storage) is used as
/// scratch: on return its strict upper triangle holds H reversed (P H P), enough for another attempt
/// by restore_reversed_hessian; its lower triangle and diagonal are overwritten. (Both functions here
/// that factor are templates, always on Eigen::MatrixXf, so that Eigen's LLT is compiled only where
/// GPTQ runs, not in every translation unit that includes <lowbit/ptq.hpp>.)
template <class Matrix>
bool inverse_cholesky_upper(Matrix& h, const Eigen::VectorXf& diagonal, float damping, Matrix& upper) {
    static_assert(std::is_same_v<Matrix, Eigen::MatrixXf>);
    const Eigen::Index n = h.rows();
    h.diagonal() = diagonal.reverse().array() + damping;
    Eigen::LLT<Eigen::Ref<Matrix>, Eigen::Lower> cholesky(h);  // in place, lower triangle
    if (cholesky.info() != Eigen::Success) return false;
    upper.setZero(n, n);
    for (Eigen::Index k = 0; k < n; k += inverse_block_columns) {
        const Eigen::Index width = std::min(inverse_block_columns, n - k);
        auto columns = upper.block(k, k, n - k, width);  // column k + c of L^-1 is zero above row k + c
        columns.topRows(width).setIdentity();
        h.bottomRightCorner(n - k, n - k).template triangularView<Eigen::Lower>().solveInPlace(columns);
    }
    reverse_square(upper);  // P L^-1 P: lower becomes upper
    return upper.allFinite() && (upper.diagonal().array() > 0.0f).all();
}

/// Puts the reversed H back into h's lower triangle after a failed inverse_cholesky_upper (its strict
/// upper triangle is still P H P; the diagonal comes from `diagonal` on the next attempt).
inline void restore_reversed_hessian(Eigen::MatrixXf& h) {
    h.triangularView<Eigen::StrictlyLower>() = h.transpose();
}

/// Reverses h in place (P H P) so that inverse_cholesky_upper can factor it; returns H's diagonal in
/// the original order (h's diagonal is replaced with the damped one on each attempt).
inline Eigen::VectorXf reverse_hessian(Eigen::MatrixXf& h) {
    Eigen::VectorXf diagonal = h.diagonal();
    reverse_square(h);
    return diagonal;
}

namespace reference {

/// The direct computation of inverse_cholesky_upper: LLT of P (H + d I) P, L^-1 by a solve against the
/// identity, reversed. Same contract for the result; h is not changed.
template <class Matrix>
bool inverse_cholesky_upper(const Matrix& h, float damping, Matrix& upper) {
    static_assert(std::is_same_v<Matrix, Eigen::MatrixXf>);
    const Eigen::Index n = h.rows();
    Matrix reversed = h;
    reverse_square(reversed);
    reversed.diagonal().array() += damping;
    Eigen::LLT<Matrix> cholesky(reversed);
    if (cholesky.info() != Eigen::Success) return false;
    Matrix inverse = Matrix::Identity(n, n);
    cholesky.matrixL().solveInPlace(inverse);
    reverse_square(inverse);
    upper = inverse;
    return upper.allFinite() && (upper.diagonal().array() > 0.0f).all();
}

}  // namespace reference
}  // namespace detail::ptq
LOWBIT_END_NAMESPACE
