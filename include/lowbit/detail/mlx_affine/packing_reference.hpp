// Scalar reference for MLX's code packing: one little-endian bit stream per row (docs/numerics.md N9.3).
//
// Code j of a row occupies bits [j*Bits, (j+1)*Bits) of the stream; bit i of the stream is bit i % 32
// of word i / 32. For Bits in {3, 5, 6} a code may straddle two words. Obviously correct, never fast.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>

LOWBIT_BEGIN_NAMESPACE
namespace detail::reference {

/// Writes `count` codes (each < 2^Bits) as a bit stream into words[0 .. count*Bits/32).
/// count*Bits must be a multiple of 32; every word is overwritten.
template <int Bits>
void pack_codes(const std::uint8_t* codes, std::size_t count, std::uint32_t* words) {
    const std::size_t word_count = count * Bits / 32;
    for (std::size_t w = 0; w < word_count; ++w) words[w] = 0;
    for (std::size_t j = 0; j < count; ++j) {
        const std::size_t bit = j * Bits;
        const std::size_t word = bit / 32;
        const unsigned offset = static_cast<unsigned>(bit % 32);
        const std::uint32_t code = codes[j];
        words[word] |= code << offset;
        if (offset + Bits > 32) words[word + 1] |= code >> (32 - offset);
    }
}

/// Reads `count` codes back from the bit stream written by pack_codes.
template <int Bits>
void unpack_codes(const std::uint32_t* words, std::size_t count, std::uint8_t* codes) {
    constexpr std::uint32_t mask = (std::uint32_t{1} << Bits) - 1;
    for (std::size_t j = 0; j < count; ++j) {
        const std::size_t bit = j * Bits;
        const std::size_t word = bit / 32;
        const unsigned offset = static_cast<unsigned>(bit % 32);
        std::uint32_t code = words[word] >> offset;
        if (offset + Bits > 32) code |= words[word + 1] << (32 - offset);
        codes[j] = static_cast<std::uint8_t>(code & mask);
    }
}

}  // namespace detail::reference
LOWBIT_END_NAMESPACE
