// The MLX affine weight format as a type, and the list of its supported instances.
//
// A format type says its mode, group size, code width, packing and per-group parameters (the members
// below); its kernels are reached through detail/dispatch/ (FormatKernels) and the matrix holding it is
// QuantizedMatrixOf<Format> (quantized_matrix.hpp).
//
// MlxAffine<GroupSize, Bits> is MLX's `mx.quantize(w, group_size, bits)` affine mode: per group of
// GroupSize inputs a float scale s and bias b, per weight a Bits-bit code q, w = fl(fl(s * q) + b);
// codes packed as one little-endian bit stream of uint32 words per row (the
// diagram is in quantized_matrix.hpp; dequantize there applies the rule).
//
// MlxAffineFormats is generated from mlx_affine_bits x mlx_affine_group_sizes and small_group_bits and feeds
// is_supported_quantization (hence every static_assert on <GroupSize, Bits>) and the list of every
// format (formats/formats.hpp), which drives AnyQuantizedLinear, the loader, the compiled kernel
// instances, the typed tests and lowbit-bench. Adding a bit width or group size is an edit here and
// the matching line of LOWBIT_FORMAT_LIST there (a static_assert checks the two agree).
#pragma once

#include "../detail/config.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

LOWBIT_BEGIN_NAMESPACE

/// Bit widths and group sizes of the MLX affine format that lowbit supports (MLX's own set).
inline constexpr std::array<int, 7> mlx_affine_bits{1, 2, 3, 4, 5, 6, 8};
inline constexpr std::array<int, 3> mlx_affine_group_sizes{32, 64, 128};

/// lowbit's extension: affine groups of 16 (MLX has none) at the widths whose 16 codes fill whole words
/// and that GGUF's k-quants with sub-blocks of 16 map onto exactly (q2_K at 2 bits, q3_K widened to 4,
/// q6_K at 6: docs/numerics.md N12.3).
inline constexpr int small_group_size = 16;
inline constexpr std::array<int, 3> small_group_bits{2, 4, 6};

/// True for the <GroupSize, Bits> pairs above: MLX's product of bits and group sizes, and the groups of 16.
template <int GroupSize, int Bits>
inline constexpr bool is_supported_quantization =
    (std::find(mlx_affine_bits.begin(), mlx_affine_bits.end(), Bits) != mlx_affine_bits.end() &&
     std::find(mlx_affine_group_sizes.begin(), mlx_affine_group_sizes.end(), GroupSize) !=
         mlx_affine_group_sizes.end()) ||
    (GroupSize == small_group_size &&
     std::find(small_group_bits.begin(), small_group_bits.end(), Bits) != small_group_bits.end());

/// The MLX affine format with GroupSize inputs per (scale, bias) and Bits-bit codes.
template <int GroupSize, int Bits>
struct MlxAffine {
    static_assert(
        is_supported_quantization<GroupSize, Bits>,
        "lowbit: the MLX affine format supports Bits in {1, 2, 3, 4, 5, 6, 8} with GroupSize in {32, 64, 128}, "
        "and Bits in {2, 4, 6} with GroupSize 16");
    /// The format's name in MLX's config.json ("mode") and in lowbit's messages.
    static constexpr const char* mode = "affine";
    static constexpr int group_size = GroupSize;
    static constexpr int bits = Bits;
    /// Per-group parameters: a float scale and a float bias (w = fl(fl(s * q) + b)).
    using scale_type = float;
    static constexpr bool has_biases = true;
    /// uint32 words one group's codes fill (a group is a whole number of 32-code blocks).
    static constexpr int words_per_group = GroupSize * Bits / 32;
    static constexpr std::uint32_t max_code = (std::uint32_t{1} << Bits) - 1;
    /// Codes never straddle two words (32 % Bits == 0): what the vector unpack paths need.
    static constexpr bool codes_in_whole_words = 32 % Bits == 0;

    /// How a group dequantizes: w = fl(fl(group_scale(s) * value(q)) + b), b = 0 in a format without
    /// biases. value is the number a code stands for, an integer in every format (what the int8
    /// kernels multiply; a float so that a format can keep a signed zero), group_scale the float a
    /// stored scale stands for. For affine both are the identity.
    static constexpr float value(std::uint32_t code) noexcept { return static_cast<float>(code); }
    static constexpr float group_scale(scale_type scale) noexcept { return scale; }
};

namespace detail {
template <std::size_t... I>
auto mlx_affine_format_tuple(std::index_sequence<I...>) {
    constexpr std::size_t groups = mlx_affine_group_sizes.size();
    return std::tuple<MlxAffine<mlx_affine_group_sizes[I % groups], mlx_affine_bits[I / groups]>...>{};
}
template <std::size_t... I>
auto small_group_format_tuple(std::index_sequence<I...>) {
    return std::tuple<MlxAffine<small_group_size, small_group_bits[I]>...>{};
}
}  // namespace detail

/// Every supported MlxAffine<GroupSize, Bits>, as a std::tuple of types: MLX's (bits-major order), then
/// the groups of 16 (by bits).
using MlxAffineFormats = decltype(std::tuple_cat(
    detail::mlx_affine_format_tuple(std::make_index_sequence<mlx_affine_bits.size() * mlx_affine_group_sizes.size()>{}),
    detail::small_group_format_tuple(std::make_index_sequence<small_group_bits.size()>{})));

LOWBIT_END_NAMESPACE
