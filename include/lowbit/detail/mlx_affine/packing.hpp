// Fast pack/unpack of MLX code streams, one 32-code block (= Bits words) at a time.
//
// Same layout as packing_reference.hpp (one little-endian bit stream per row, first code in the
// lowest bits). Every supported row length is a multiple of 32 codes (GroupSize >= 32), so a row is a
// whole number of blocks and a block never straddles a row. The block loops have compile-time trip
// counts and shifts, so they unroll into straight-line shift/or code; no xsimd is needed here.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// Codes per block; a block is exactly Bits words.
inline constexpr std::size_t codes_per_block = 32;

/// Packs `count` codes (a multiple of 32, each < 2^Bits; any integer type) into count*Bits/32 words.
template <int Bits, class Code>
inline void pack_codes(const Code* codes, std::size_t count, std::uint32_t* words) {
    for (std::size_t block = 0; block < count / codes_per_block; ++block) {
        const Code* in = codes + block * codes_per_block;
        std::uint32_t* out = words + block * Bits;
        std::uint64_t window = 0;  // bits not yet written; never holds more than 31 + Bits bits
        unsigned filled = 0;
        std::size_t written = 0;
        for (std::size_t j = 0; j < codes_per_block; ++j) {
            window |= static_cast<std::uint64_t>(in[j]) << filled;
            filled += Bits;
            if (filled >= 32) {
                out[written++] = static_cast<std::uint32_t>(window);
                window >>= 32;
                filled -= 32;
            }
        }
    }
}

/// Unpacks `count` codes (a multiple of 32) from count*Bits/32 words into T (std::uint8_t or float).
template <int Bits, class T>
inline void unpack_codes(const std::uint32_t* words, std::size_t count, T* codes) {
    constexpr std::uint64_t mask = (std::uint64_t{1} << Bits) - 1;
    for (std::size_t block = 0; block < count / codes_per_block; ++block) {
        const std::uint32_t* in = words + block * Bits;
        T* out = codes + block * codes_per_block;
        std::uint64_t window = 0;
        unsigned available = 0;
        std::size_t read = 0;
        for (std::size_t j = 0; j < codes_per_block; ++j) {
            if (available < static_cast<unsigned>(Bits)) {
                window |= std::uint64_t{in[read++]} << available;
                available += 32;
            }
            out[j] = static_cast<T>(window & mask);
            window >>= Bits;
            available -= Bits;
        }
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
