// Packed ternary weights (docs/numerics.md N14): the two row layouts, packing and unpacking (scalar; these
// functions are also the reference the SIMD kernels are tested against).
//
// A weight t in {-1, 0, 1} is stored as the unsigned digit u = t + 1 in {0, 1, 2}. Every row of K
// weights is padded with t = 0 to whole chunks and stored as row_bytes(K) bytes:
//   I2  (2 bits per weight): chunks of 256 weights in 64 bytes; weight c*256 + 64*s + j (s in 0..3,
//       j in 0..63) is bits 2s..2s+1 of byte c*64 + j. The value 3 is never written.
//   TQ1 (5 weights per byte, 1.6 bits): chunks of 320 weights in 64 bytes; weight c*320 + 64*s + j
//       (s in 0..4) is digit s of byte c*64 + j, digit 0 the most significant: the byte's number is
//       v = sum_s u_s * 3^(4-s) in 0..242 (the file format, io/ternary_checkpoint.hpp). In memory the
//       byte holds q = ceil(v * 256 / 243) instead, from which digit s is read with byte arithmetic:
//       t_0 = q, t_{s+1} = 3 t_s mod 256, u_s = (3 t_s) >> 8 = [t_s >= 86] + [t_s >= 171]
//       (exact for all 243 values; checked by the tests).
// Either way, step s of a chunk holds 64 consecutive weights, so the activations need no permutation
// and, with groups of 64, step s of chunk c is exactly group c * steps + s.
#pragma once

#include "../../ternary_format.hpp"
#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

namespace detail::ternary {

inline constexpr int chunk_bytes = 64;  ///< bytes per chunk, both formats
inline constexpr int group_codes = 64;  ///< weights per step (and per scale group in per-group mode)

/// Weights per byte (and steps per chunk).
constexpr int steps(TernaryFormat format) {
    return format == TernaryFormat::i2 ? 4 : 5;
}
/// Weights per chunk: 256 (I2) or 320 (TQ1).
constexpr Eigen::Index chunk_codes(TernaryFormat format) {
    return Eigen::Index{chunk_bytes} * steps(format);
}
inline Eigen::Index chunks(TernaryFormat format, Eigen::Index K) {
    return (K + chunk_codes(format) - 1) / chunk_codes(format);
}
inline Eigen::Index row_bytes(TernaryFormat format, Eigen::Index K) {
    return chunks(format, K) * chunk_bytes;
}
/// Padded row length in weights (activation rows are zero-padded to it).
inline Eigen::Index padded_cols(TernaryFormat format, Eigen::Index K) {
    return chunks(format, K) * chunk_codes(format);
}

/// The in-memory TQ1 byte q of the base-3 number v (0..242), and back.
constexpr std::uint8_t tq1_memory_byte(int v) {
    return static_cast<std::uint8_t>((v * 256 + 242) / 243);
}
inline const std::array<std::uint8_t, 256>& tq1_number_of_memory_byte() {
    static const std::array<std::uint8_t, 256> table = [] {
        std::array<std::uint8_t, 256> result{};
        result.fill(0xFF);
        for (int v = 0; v < 243; ++v) result[tq1_memory_byte(v)] = static_cast<std::uint8_t>(v);
        return result;
    }();
    return table;
}

/// Digit s (0..4) of the in-memory TQ1 byte q.
constexpr int tq1_digit(std::uint8_t q, int s) {
    unsigned t = q;
    for (int i = 0; i < s; ++i) t = (3u * t) & 0xFFu;
    return static_cast<int>((3u * t) >> 8);
}

/// Digit u (0..2) of weight k of a packed row.
inline int packed_digit(TernaryFormat format, const std::uint8_t* row, Eigen::Index k) {
    const Eigen::Index chunk = k / chunk_codes(format), within = k % chunk_codes(format);
    const int s = static_cast<int>(within / chunk_bytes);
    const std::uint8_t byte = row[chunk * chunk_bytes + within % chunk_bytes];
    return format == TernaryFormat::i2 ? (byte >> (2 * s)) & 3 : tq1_digit(byte, s);
}

/// Packs one row of K codes t in {-1, 0, 1} into row_bytes(format, K) bytes at `out`.
inline void pack_row(TernaryFormat format, const std::int8_t* codes, Eigen::Index K, std::uint8_t* out) {
    const Eigen::Index n_chunks = chunks(format, K);
    const int S = steps(format);
    for (Eigen::Index c = 0; c < n_chunks; ++c)
        for (int j = 0; j < chunk_bytes; ++j) {
            int value = 0;
            for (int s = 0; s < S; ++s) {
                const Eigen::Index k = c * chunk_codes(format) + Eigen::Index{s} * chunk_bytes + j;
                const int u = (k < K ? codes[k] : 0) + 1;
                value = format == TernaryFormat::i2 ? value | (u << (2 * s)) : value * 3 + u;
            }
            out[c * chunk_bytes + j] =
                format == TernaryFormat::i2 ? static_cast<std::uint8_t>(value) : tq1_memory_byte(value);
        }
}

/// The digits u = t + 1 of a packed row's padded_cols(format, K) weights, chunk by chunk and byte by
/// byte (the padding's digits are those stored: 1).
inline void unpack_row_digits(TernaryFormat format, const std::uint8_t* row, Eigen::Index K, std::uint8_t* digits) {
    const int S = steps(format);
    for (Eigen::Index c = 0; c < chunks(format, K); ++c) {
        std::uint8_t* chunk = digits + c * chunk_codes(format);
        for (int j = 0; j < chunk_bytes; ++j) {
            const std::uint8_t byte = row[c * chunk_bytes + j];
            for (int s = 0; s < S; ++s)
                chunk[s * chunk_bytes + j] =
                    static_cast<std::uint8_t>(format == TernaryFormat::i2 ? (byte >> (2 * s)) & 3 : tq1_digit(byte, s));
        }
    }
}

/// Unpacks K codes t in {-1, 0, 1} of a packed row.
inline void unpack_row(TernaryFormat format, const std::uint8_t* row, Eigen::Index K, std::int8_t* codes) {
    for (Eigen::Index k = 0; k < K; ++k) codes[k] = static_cast<std::int8_t>(packed_digit(format, row, k) - 1);
}

}  // namespace detail::ternary
LOWBIT_END_NAMESPACE
