// What the typed tests (TEMPLATE_LIST_TEST_CASE over lowbit::QuantizedFormats) read from a format
// generically: its name for messages and a group's bias (0 in a format without biases).
// A format's decode rule itself is its own (Format::value, Format::group_scale).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include <Eigen/Core>

#include <lowbit/formats/formats.hpp>
#include <lowbit/quantized_matrix.hpp>

namespace lowbit::test {

/// "affine g64 q4": mode, group size and bits, for INFO messages.
template <class Format>
std::string format_text() {
    return std::string(Format::mode) + " g" + std::to_string(Format::group_size) + " q" + std::to_string(Format::bits);
}

/// The bias of group g of row n: q.biases(n, g), or 0 in a format without biases.
template <class Format>
double group_bias(const lowbit::QuantizedMatrixOf<Format>& q, Eigen::Index n, Eigen::Index g) {
    if constexpr (Format::has_biases) return q.biases(n, g);
    else return 0.0;
}

/// The MLX affine formats the PTQ methods' typed tests run on: every bit width at g64, and g32 and g128
/// at 3 bits (codes that straddle words) and 4 bits. Each method is one template over (GroupSize, Bits),
/// so these reach every bit width's code path and every group size; the kernel tests keep all 21.
using PtqTestFormats = std::tuple<MlxAffine<64, 1>, MlxAffine<64, 2>, MlxAffine<64, 3>, MlxAffine<64, 4>,
                                  MlxAffine<64, 5>, MlxAffine<64, 6>, MlxAffine<64, 8>, MlxAffine<32, 3>,
                                  MlxAffine<128, 3>, MlxAffine<32, 4>, MlxAffine<128, 4>>;

}  // namespace lowbit::test
