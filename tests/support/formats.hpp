// What the typed tests (TEMPLATE_LIST_TEST_CASE over lowbit::QuantizedFormats) read from a format
// generically: its name for messages and a group's bias (0 in a format without biases).
// A format's decode rule itself is its own (Format::value, Format::group_scale).
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace lowbit::test
