// Floats as IEEE-754 bit patterns, for tests that compare with golden data bit for bit.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include <lowbit/matrix_types.hpp>

namespace lowbit::test {

/// A row-major matrix of `rows` rows from the bit patterns of its floats (row-major).
template <std::size_t Size>
RowMatrixXf float_matrix(const std::uint32_t (&bits)[Size], Eigen::Index rows) {
    RowMatrixXf m(rows, static_cast<Eigen::Index>(Size) / rows);
    for (std::size_t i = 0; i < Size; ++i) m.data()[i] = std::bit_cast<float>(bits[i]);
    return m;
}

/// The bit pattern of a float.
inline std::uint32_t bits_of(float value) {
    return std::bit_cast<std::uint32_t>(value);
}

}  // namespace lowbit::test
