// The matrix types lowbit returns: row-major, because weights are [out, in] with contiguous rows
// (MLX's layout) and activations are [tokens, features] with contiguous rows.
#pragma once

#include "detail/config.hpp"

#include <cstdint>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

/// Row-major float matrix: every weight, activation and per-group parameter lowbit returns.
using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Row-major int8 matrix: BitNet's ternary and int8 codes.
using RowMatrixXi8 = Eigen::Matrix<std::int8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

LOWBIT_END_NAMESPACE
