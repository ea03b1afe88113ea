// The MLX affine weight format as a type, and the one list of its supported instances.
//
// A format says how codes are packed, how they dequantize, and (through detail/dispatch/) which
// kernels exist for it. MlxAffine<GroupSize, Bits> is MLX's `mx.quantize(w, group_size, bits)` affine
// mode: per group of GroupSize inputs a float scale s and bias b, per weight a Bits-bit code q,
// w = fl(fl(s * q) + b); codes packed as one little-endian bit stream of uint32 words per row (the
// diagram is in quantized_matrix.hpp, beside QuantizedMatrix, the container of this format).
//
// MlxAffineFormats is generated from mlx_affine_bits x mlx_affine_group_sizes and feeds
// is_supported_quantization (hence every static_assert on <GroupSize, Bits>), the typed tests
// (Catch2 TEMPLATE_LIST_TEST_CASE) and lowbit-bench. Adding a bit width or group size is one edit here.
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
inline constexpr std::array<int, 6> mlx_affine_bits{2, 3, 4, 5, 6, 8};
inline constexpr std::array<int, 3> mlx_affine_group_sizes{32, 64, 128};

/// The same pairs for the preprocessor, X(GroupSize, Bits) each, bits-major (used where a list of
/// declarations is needed: dispatch/mlx_affine_instances.hpp). Checked against the arrays below.
#define LOWBIT_MLX_AFFINE_FORMAT_LIST(X)                                                                    \
    X(32, 2) X(64, 2) X(128, 2) X(32, 3) X(64, 3) X(128, 3) X(32, 4) X(64, 4) X(128, 4) X(32, 5) X(64, 5)    \
    X(128, 5) X(32, 6) X(64, 6) X(128, 6) X(32, 8) X(64, 8) X(128, 8)

/// True for the <GroupSize, Bits> pairs above.
template <int GroupSize, int Bits>
inline constexpr bool is_supported_quantization =
    std::find(mlx_affine_bits.begin(), mlx_affine_bits.end(), Bits) != mlx_affine_bits.end() &&
    std::find(mlx_affine_group_sizes.begin(), mlx_affine_group_sizes.end(), GroupSize) != mlx_affine_group_sizes.end();

/// The MLX affine format with GroupSize inputs per (scale, bias) and Bits-bit codes.
template <int GroupSize, int Bits>
struct MlxAffine {
    static_assert(is_supported_quantization<GroupSize, Bits>,
                  "lowbit: the MLX affine format supports Bits in {2, 3, 4, 5, 6, 8} and GroupSize in {32, 64, 128}");
    static constexpr int group_size = GroupSize;
    static constexpr int bits = Bits;
    /// uint32 words one group's codes fill (a group is a whole number of 32-code blocks).
    static constexpr int words_per_group = GroupSize * Bits / 32;
    static constexpr std::uint32_t max_code = (std::uint32_t{1} << Bits) - 1;
    /// Codes never straddle two words (32 % Bits == 0): what the vector unpack paths need.
    static constexpr bool codes_in_whole_words = 32 % Bits == 0;
};

namespace detail {
template <std::size_t... I>
auto mlx_affine_format_tuple(std::index_sequence<I...>) {
    constexpr std::size_t groups = mlx_affine_group_sizes.size();
    return std::tuple<MlxAffine<mlx_affine_group_sizes[I % groups], mlx_affine_bits[I / groups]>...>{};
}
}  // namespace detail

/// Every supported MlxAffine<GroupSize, Bits>, as a std::tuple of types (bits-major order).
using MlxAffineFormats = decltype(detail::mlx_affine_format_tuple(
    std::make_index_sequence<mlx_affine_bits.size() * mlx_affine_group_sizes.size()>{}));

namespace detail {
template <class... Formats>
struct FormatList {};
template <class... Formats>
FormatList<void, Formats...> format_list_after_void(std::tuple<Formats...>*);
#define LOWBIT_MLX_AFFINE_FORMAT_TYPE(GroupSize, Bits) , MlxAffine<GroupSize, Bits>
static_assert(std::is_same_v<decltype(format_list_after_void(static_cast<MlxAffineFormats*>(nullptr))),
                             FormatList<void LOWBIT_MLX_AFFINE_FORMAT_LIST(LOWBIT_MLX_AFFINE_FORMAT_TYPE)>>,
              "LOWBIT_MLX_AFFINE_FORMAT_LIST must list mlx_affine_bits x mlx_affine_group_sizes, bits-major");
#undef LOWBIT_MLX_AFFINE_FORMAT_TYPE
}  // namespace detail

LOWBIT_END_NAMESPACE
