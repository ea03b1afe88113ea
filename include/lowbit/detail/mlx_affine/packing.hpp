// Fast pack/unpack of MLX code streams, one 32-code block (= Bits words) at a time.
//
// Same layout as packing_reference.hpp (one little-endian bit stream per row, first code in the
// lowest bits). A row is a whole number of blocks (GroupSize >= 32) or, for groups of 16 (nvfp4's 4-bit
// codes, the affine groups of 16 at 2, 4 and 6 bits), blocks and then a tail that fills whole words (the
// tail loops below, which handle codes straddling two words), so a block never straddles a row. The block loops have
// compile-time trip counts and shifts, so they unroll into straight-line shift/or code; no xsimd is needed here.
#pragma once

#include "../config.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// Codes per block; a block is exactly Bits words.
inline constexpr std::size_t codes_per_block = 32;

/// Codes of a row's last partial block: count % 32 codes, filling whole words (the caller's contract).
template <int Bits>
inline std::size_t tail_codes(std::size_t count) {
    static_assert(Bits >= 1 && Bits <= 8, "tail_codes: codes of 1 to 8 bits");
    return count % codes_per_block;
}

/// Packs `count` codes (a multiple of 32, or of 32 / Bits when Bits divides 32; each < 2^Bits; any
/// integer type) into count*Bits/32 words.
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
    const std::size_t done = count - tail_codes<Bits>(count);
    for (std::size_t j = done; j < count; ++j) {
        const std::size_t bit = j * Bits, shift = bit % 32;
        const auto code = static_cast<std::uint32_t>(codes[j]);
        std::uint32_t& word = words[bit / 32];
        if (shift == 0) word = 0;
        word |= code << shift;
        if (shift + Bits > 32) words[bit / 32 + 1] = code >> (32 - shift);  // starts the next word
    }
}

/// Packs `count` code bytes (as pack_codes, each < 2^Bits) into count*Bits/32 words, as pack_codes.
/// For Bits 2, 4 and 8 on a little-endian host, eight codes at a time in one 64-bit register (code i in
/// byte i), neighbours merged by three halving steps (B = Bits; each mask keeps the merged field):
///
///   8-bit fields:   c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7        each < 2^B
///   16-bit fields:  c0 + c1<<B | c2 + c3<<B | ...                 x = (x | x >> (8 - B))  & 2B-bit fields
///   32-bit fields:  c0..c3 in 4B bits | c4..c7 in 4B bits         x = (x | x >> (16 - 2B)) & 4B-bit fields
///   64 bits:        c0..c7 in 8B bits (the MLX stream order)      x = (x | x >> (32 - 4B)) & 8B bits
///
/// giving one word per 8 codes at B = 4 and half a word at B = 2 (8-bit codes are the words' bytes).
template <int Bits>
inline void pack_code_bytes(const std::uint8_t* codes, std::size_t count, std::uint32_t* words) {
    if constexpr (std::endian::native != std::endian::little || (Bits != 2 && Bits != 4 && Bits != 8)) {
        pack_codes<Bits>(codes, count, words);
    } else if constexpr (Bits == 8) {
        std::memcpy(words, codes, count);
    } else {
        constexpr auto fields = [](unsigned width, unsigned spacing) {
            std::uint64_t mask = 0;
            for (unsigned at = 0; at < 64; at += spacing) mask |= ((std::uint64_t{1} << width) - 1) << at;
            return mask;
        };
        constexpr unsigned B = Bits;
        const auto merge_eight = [&](const std::uint8_t* eight) {
            std::uint64_t x;
            std::memcpy(&x, eight, sizeof x);
            x = (x | x >> (8 - B)) & fields(2 * B, 16);
            x = (x | x >> (16 - 2 * B)) & fields(4 * B, 32);
            return static_cast<std::uint32_t>((x | x >> (32 - 4 * B)) & fields(8 * B, 64));
        };
        constexpr std::size_t codes_per_word = 32 / B;
        for (std::size_t word = 0; word < count / codes_per_word; ++word) {
            const std::uint8_t* in = codes + word * codes_per_word;
            if constexpr (B == 4) {
                words[word] = merge_eight(in);
            } else {
                words[word] = merge_eight(in) | merge_eight(in + 8) << 16;
            }
        }
    }
}

/// Unpacks `count` codes (as pack_codes) from count*Bits/32 words into T (std::uint8_t or float).
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
    for (std::size_t j = count - tail_codes<Bits>(count); j < count; ++j) {
        const std::size_t bit = j * Bits, shift = bit % 32;
        std::uint64_t pair = words[bit / 32];
        if (shift + Bits > 32) pair |= std::uint64_t{words[bit / 32 + 1]} << 32;
        codes[j] = static_cast<T>((pair >> shift) & mask);
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
