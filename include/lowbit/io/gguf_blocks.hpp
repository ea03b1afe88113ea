// ggml tensor types as GGUF stores them, and the block decoders GgufFile converts with.
//
// A ggml tensor row (ne[0] elements) is a sequence of blocks; each type has a block size (elements)
// and a type size (bytes per block). The 32-element quantized types lowbit converts (the k-quants, 256
// elements a block, are in gguf_kquants.hpp):
//
//   Q4_0 (18 bytes):  | d f16 | qs[16] |                      value j = (q_j - 8) * d
//   Q4_1 (20 bytes):  | d f16 | m f16 | qs[16] |              value j = q_j * d + m
//   Q5_0 (22 bytes):  | d f16 | qh u32 | qs[16] |             value j = (q_j - 16) * d
//   Q5_1 (24 bytes):  | d f16 | m f16 | qh u32 | qs[16] |     value j = q_j * d + m
//   Q8_0 (34 bytes):  | d f16 | qs[32] int8 |                 value j = qs[j] * d
//   Q4 / Q5 nibbles: qs[j] holds element j in its low nibble and element j + 16 in its high one
//     qs[0] = | q16 | q0 |, qs[1] = | q17 | q1 |, ..., qs[15] = | q31 | q15 |
//   Q5 fifth bits: bit j of qh (little-endian) is bit 4 of q_j
//
// Dequantization computes exactly ggml's expressions above in f32 (the products are exact: d is an f16
// value times a code of at most 8 bits), so every value equals ggml's bit for bit.
//
// The exact MLX mapping (docs/numerics.md N12.3), codes re-packed into MLX's LSB-first stream:
//   Q4_1, Q5_1: codes q, scale d, bias m  -> fl(fl(d*q) + m) is ggml's fl(q*d + m) (the product is exact)
//   Q4_0: codes q, scale d, bias -8d   -> fl(d*q) and -8d are exact, their sum d*(q-8) is exact
//   Q5_0: codes q, scale d, bias -16d  -> likewise exact
//   Q8_0: codes q + 128, scale d, bias -128d  -> likewise exact: d*(q+128) - 128d = d*q
// Two limits, both stated where they apply: a Q4_0 / Q5_0 / Q8_0 zero comes out +0.0 where ggml gives
// -0.0 (q = 8, 16, resp. 0, with d < 0; or d = 0 with q below it): equal as floats, not as bits; and a
// block whose d is Inf or NaN cannot be mapped (d*q - 8d is NaN where ggml's product is not), so
// to_quantized refuses it.
#pragma once

#include "../detail/config.hpp"
#include "detail/bytes.hpp"
#include "detail/float16.hpp"
#include "gguf_kquants.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

LOWBIT_BEGIN_NAMESPACE

/// ggml's tensor type ids (ggml.h `enum ggml_type`); ids 4, 5, 31-33 and 36-38 are retired.
enum class GgmlType : std::uint32_t {
    f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
    q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
    iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
    i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30, tq1_0 = 34, tq2_0 = 35, mxfp4 = 39,
};

namespace io_detail {

struct GgmlTypeInfo {
    std::string_view name;    // ggml's name ("q4_0"); empty for an unknown or retired id
    std::uint32_t block_size;  // elements per block
    std::uint32_t type_size;   // bytes per block
};

inline constexpr std::array<GgmlTypeInfo, 40> ggml_type_table{{
    {"f32", 1, 4},        {"f16", 1, 2},      {"q4_0", 32, 18},    {"q4_1", 32, 20},   {"", 0, 0},
    {"", 0, 0},           {"q5_0", 32, 22},   {"q5_1", 32, 24},    {"q8_0", 32, 34},   {"q8_1", 32, 36},
    {"q2_K", 256, 84},    {"q3_K", 256, 110}, {"q4_K", 256, 144},  {"q5_K", 256, 176}, {"q6_K", 256, 210},
    {"q8_K", 256, 292},   {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},   {"iq3_s", 256, 110}, {"iq2_s", 256, 82}, {"iq4_xs", 256, 136}, {"i8", 1, 1},
    {"i16", 1, 2},        {"i32", 1, 4},      {"i64", 1, 8},       {"f64", 1, 8},      {"iq1_m", 256, 56},
    {"bf16", 1, 2},       {"", 0, 0},         {"", 0, 0},          {"", 0, 0},         {"tq1_0", 256, 54},
    {"tq2_0", 256, 66},   {"", 0, 0},         {"", 0, 0},          {"", 0, 0},         {"mxfp4", 32, 17},
}};

/// The table entry of type id `id`, or nullptr for an unknown or retired id.
inline const GgmlTypeInfo* ggml_type_info(std::uint32_t id) noexcept {
    if (id >= ggml_type_table.size() || ggml_type_table[id].block_size == 0) return nullptr;
    return &ggml_type_table[id];
}

/// The 32 unsigned codes (< 16 or < 32) of a Q4_0, Q4_1, Q5_0 or Q5_1 block, in element order.
inline void read_q4_q5_codes(GgmlType type, const std::byte* block, std::uint8_t* codes) noexcept {
    const bool five = type == GgmlType::q5_0 || type == GgmlType::q5_1;
    const bool has_min = type == GgmlType::q4_1 || type == GgmlType::q5_1;
    const std::byte* qs = block + 2 + (has_min ? 2 : 0) + (five ? 4 : 0);
    const std::uint32_t qh = five ? load_le<std::uint32_t>(block + (has_min ? 4 : 2)) : 0;
    for (std::size_t j = 0; j < 16; ++j) {
        const auto byte = static_cast<std::uint8_t>(qs[j]);
        codes[j] = static_cast<std::uint8_t>((byte & 0x0f) | (qh >> j & 1) << 4);
        codes[j + 16] = static_cast<std::uint8_t>((byte >> 4) | (qh >> (j + 16) & 1) << 4);
    }
}

/// Decodes one 32-element block of a Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 type into an MlxBlock
/// (gguf_kquants.hpp): codes in MLX's sense (unsigned, < 16, < 32 or < 256) with the scale and bias of
/// N12.3's exact mapping (see the top of this file).
inline MlxBlock decode_mlx_block(GgmlType type, const std::byte* block) noexcept {
    MlxBlock result{};
    const float d = f16_to_float(load_le<std::uint16_t>(block));
    result.scale = d;
    if (type == GgmlType::q8_0) {
        for (std::size_t j = 0; j < 32; ++j)
            result.codes[j] = static_cast<std::uint8_t>(static_cast<int>(load_le<std::int8_t>(block + 2 + j)) + 128);
        result.bias = -128.0f * d;
        return result;
    }
    read_q4_q5_codes(type, block, result.codes.data());
    const bool has_min = type == GgmlType::q4_1 || type == GgmlType::q5_1;
    result.bias =
        has_min ? f16_to_float(load_le<std::uint16_t>(block + 2)) : (type == GgmlType::q5_0 ? -16.0f : -8.0f) * d;
    return result;
}

/// The 16 nibble bytes qs of a Q4_0 / Q4_1 block as the 4 words of MLX's 4-bit stream: word 0 holds
/// codes 0..7 (the low nibbles of qs[0..7]), word 1 codes 8..15, words 2 and 3 the high nibbles (codes
/// 16..31). Same words as decode_mlx_block + pack_codes<4>, without the per-code loop.
inline void pack_q4_nibbles(const std::byte* qs, std::uint32_t* words) noexcept {
    // 8 bytes, one nibble each, to one word: bytes b0..b7 -> b0 | b1 << 4 | ... | b7 << 28.
    const auto squeeze = [](std::uint64_t nibbles) {
        nibbles = (nibbles | (nibbles >> 4)) & 0x00ff00ff00ff00ffull;
        nibbles = (nibbles | (nibbles >> 8)) & 0x0000ffff0000ffffull;
        nibbles = (nibbles | (nibbles >> 16)) & 0x00000000ffffffffull;
        return static_cast<std::uint32_t>(nibbles);
    };
    constexpr std::uint64_t low = 0x0f0f0f0f0f0f0f0full;
    const auto first = load_le<std::uint64_t>(qs), second = load_le<std::uint64_t>(qs + 8);
    words[0] = squeeze(first & low);
    words[1] = squeeze(second & low);
    words[2] = squeeze((first >> 4) & low);
    words[3] = squeeze((second >> 4) & low);
}

/// The 32 int8 codes of a Q8_0 block as the 8 words of MLX's 8-bit stream of codes q + 128.
inline void pack_q8_codes(const std::byte* qs, std::uint32_t* words) noexcept {
    for (std::size_t k = 0; k < 8; ++k) words[k] = load_le<std::uint32_t>(qs + 4 * k) ^ 0x80808080u;  // q + 128 per byte
}

/// True for the types dequantize_row converts.
constexpr bool can_dequantize(GgmlType type) noexcept {
    return type == GgmlType::f32 || type == GgmlType::f16 || type == GgmlType::bf16 || type == GgmlType::q4_0 ||
           type == GgmlType::q4_1 || type == GgmlType::q5_0 || type == GgmlType::q5_1 || type == GgmlType::q8_0 ||
           type == GgmlType::q2_k || type == GgmlType::q3_k || type == GgmlType::q4_k || type == GgmlType::q5_k ||
           type == GgmlType::q6_k;
}

/// Dequantizes `count` elements (a multiple of the type's block size) of an F32, F16, BF16, Q4_0, Q4_1,
/// Q5_0, Q5_1, Q8_0 or k-quant (q2_K to q6_K: gguf_kquants.hpp) row exactly as ggml's dequantize_row_* / type
/// conversion does. Returns false for another type.
inline bool dequantize_row(GgmlType type, const std::byte* bytes, std::size_t count, float* out) noexcept {
    switch (type) {
        case GgmlType::f32:
            for (std::size_t i = 0; i < count; ++i) out[i] = load_le<float>(bytes + 4 * i);
            return true;
        case GgmlType::f16:
            for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_float(load_le<std::uint16_t>(bytes + 2 * i));
            return true;
        case GgmlType::bf16:
            for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_float(load_le<std::uint16_t>(bytes + 2 * i));
            return true;
        case GgmlType::q4_0:
        case GgmlType::q4_1:
        case GgmlType::q5_0:
        case GgmlType::q5_1: {
            const bool has_min = type == GgmlType::q4_1 || type == GgmlType::q5_1;
            const int offset = type == GgmlType::q4_0 ? 8 : type == GgmlType::q5_0 ? 16 : 0;
            const std::size_t block_bytes = ggml_type_table[static_cast<std::size_t>(type)].type_size;
            std::uint8_t codes[32];
            for (std::size_t b = 0; b < count / 32; ++b) {
                const std::byte* block = bytes + block_bytes * b;
                const float d = f16_to_float(load_le<std::uint16_t>(block));
                read_q4_q5_codes(type, block, codes);
                if (has_min) {  // q * d + m
                    const float m = f16_to_float(load_le<std::uint16_t>(block + 2));
                    for (std::size_t j = 0; j < 32; ++j) out[32 * b + j] = static_cast<float>(codes[j]) * d + m;
                } else {  // (q - 8) * d or (q - 16) * d
                    for (std::size_t j = 0; j < 32; ++j) out[32 * b + j] = static_cast<float>(codes[j] - offset) * d;
                }
            }
            return true;
        }
        case GgmlType::q8_0:
            for (std::size_t b = 0; b < count / 32; ++b) {
                const std::byte* block = bytes + 34 * b;
                const float d = f16_to_float(load_le<std::uint16_t>(block));
                for (std::size_t j = 0; j < 32; ++j)
                    out[32 * b + j] = static_cast<float>(load_le<std::int8_t>(block + 2 + j)) * d;
            }
            return true;
        case GgmlType::q2_k:
            dequantize_q2k_blocks(bytes, count / kquant_block, out);
            return true;
        case GgmlType::q3_k:
            dequantize_q3k_blocks(bytes, count / kquant_block, out);
            return true;
        case GgmlType::q4_k:
            dequantize_q45k_blocks<false>(bytes, count / kquant_block, out);
            return true;
        case GgmlType::q5_k:
            dequantize_q45k_blocks<true>(bytes, count / kquant_block, out);
            return true;
        case GgmlType::q6_k:
            dequantize_q6k_blocks(bytes, count / kquant_block, out);
            return true;
        default:
            return false;
    }
}

}  // namespace io_detail

/// ggml's name of `type` ("q4_0", "q6_K", ...), or "unknown".
inline std::string_view ggml_type_name(GgmlType type) noexcept {
    const auto* info = io_detail::ggml_type_info(static_cast<std::uint32_t>(type));
    return info ? info->name : std::string_view("unknown");
}

LOWBIT_END_NAMESPACE
