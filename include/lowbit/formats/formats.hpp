// The one list of every weight format lowbit supports, mode included, and what is generated from it.
//
// QuantizedFormats (a std::tuple of format types) drives AnyQuantizedLinear's variant, the run-time
// "is this supported" test and its error text, dispatch_format (the MLX loader's and
// AnyQuantizedLinear::from_linear's dispatch), the typed tests and lowbit-bench's rows.
// LOWBIT_FORMAT_LIST is the same list for the preprocessor (the compiled kernel instances:
// detail/dispatch/format_instances.hpp); a static_assert below keeps the two equal.
//
// A new format is a type in its own header here (the members MlxAffine has: mode, group_size, bits,
// scale_type, has_biases, words_per_group), added to both lists; its kernels' dispatch header goes in
// detail/dispatch/formats.hpp.
#pragma once

#include "../detail/config.hpp"

#include <cstddef>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "mlx_affine.hpp"
#include "mxfp4.hpp"
#include "mxfp8.hpp"
#include "nvfp4.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Every supported format, as a std::tuple of types.
using QuantizedFormats = decltype(std::tuple_cat(std::declval<MlxAffineFormats>(), std::tuple<Mxfp4, Nvfp4, Mxfp8>{}));

/// The same list for the preprocessor, X(format type) each, in QuantizedFormats' order.
#define LOWBIT_FORMAT_LIST(X)                                                                                      \
    X(::lowbit::MlxAffine<32, 1>)                                                                                  \
    X(::lowbit::MlxAffine<64, 1>)                                                                                  \
    X(::lowbit::MlxAffine<128, 1>)                                                                                 \
    X(::lowbit::MlxAffine<32, 2>)                                                                                  \
    X(::lowbit::MlxAffine<64, 2>)                                                                                  \
    X(::lowbit::MlxAffine<128, 2>) X(::lowbit::MlxAffine<32, 3>) X(::lowbit::MlxAffine<64, 3>)                     \
        X(::lowbit::MlxAffine<128, 3>) X(::lowbit::MlxAffine<32, 4>) X(::lowbit::MlxAffine<64, 4>)                 \
            X(::lowbit::MlxAffine<128, 4>) X(::lowbit::MlxAffine<32, 5>) X(::lowbit::MlxAffine<64, 5>)             \
                X(::lowbit::MlxAffine<128, 5>) X(::lowbit::MlxAffine<32, 6>) X(::lowbit::MlxAffine<64, 6>)         \
                    X(::lowbit::MlxAffine<128, 6>) X(::lowbit::MlxAffine<32, 8>) X(::lowbit::MlxAffine<64, 8>)     \
                        X(::lowbit::MlxAffine<128, 8>) X(::lowbit::MlxAffine<16, 2>) X(::lowbit::MlxAffine<16, 4>) \
                            X(::lowbit::MlxAffine<16, 6>) X(::lowbit::Mxfp4) X(::lowbit::Nvfp4) X(::lowbit::Mxfp8)

namespace detail {

template <class... Formats>
struct FormatTypes {};
template <class... Formats>
FormatTypes<void, Formats...> format_types_after_void(std::tuple<Formats...>*);
#define LOWBIT_FORMAT_TYPE_AFTER_COMMA(...) , __VA_ARGS__
static_assert(std::is_same_v<decltype(format_types_after_void(static_cast<QuantizedFormats*>(nullptr))),
                             FormatTypes<void LOWBIT_FORMAT_LIST(LOWBIT_FORMAT_TYPE_AFTER_COMMA)>>,
              "LOWBIT_FORMAT_LIST must list QuantizedFormats, in its order");
#undef LOWBIT_FORMAT_TYPE_AFTER_COMMA

/// Position of Format in QuantizedFormats (the kernel instances are spread over files by it).
template <class Format, class... Formats>
constexpr std::size_t format_index(std::tuple<Formats...>*) {
    std::size_t index = 0;
    const bool found = ((std::is_same_v<Format, Formats> ? true : (++index, false)) || ...);
    return found ? index : sizeof...(Formats);
}
template <class Format>
inline constexpr std::size_t format_index_v = format_index<Format>(static_cast<QuantizedFormats*>(nullptr));

/// Calls visit(std::type_identity<Format>{}) for every format in QuantizedFormats, in order.
template <class Visit, class... Formats>
constexpr void for_each_format(Visit&& visit, std::tuple<Formats...>*) {
    (visit(std::type_identity<Formats>{}), ...);
}
template <class Visit>
constexpr void for_each_format(Visit&& visit) {
    for_each_format(visit, static_cast<QuantizedFormats*>(nullptr));
}

/// "{a, b, c}" of a set of integers.
inline std::string braced_list(const std::set<int>& values) {
    std::string text = "{";
    for (const int value : values) text += (text.size() > 1 ? ", " : "") + std::to_string(value);
    return text + "}";
}

}  // namespace detail

/// True for a format MLX itself reads and writes: every format in QuantizedFormats but lowbit's affine
/// groups of 16 (formats/mlx_affine.hpp), which MLX's quantize refuses and its config.json cannot name.
template <class Format>
inline constexpr bool is_mlx_format_v =
    !(std::string_view(Format::mode) == "affine" && Format::group_size == small_group_size);

/// True when QuantizedFormats holds a format of this mode, group size and bits.
constexpr bool is_supported_format(std::string_view mode, int group_size, int bits) noexcept {
    bool found = false;
    detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
        found = found || (mode == Format::mode && group_size == Format::group_size && bits == Format::bits);
    });
    return found;
}

/// is_supported_format for the formats MLX reads and writes (is_mlx_format_v): what an MLX
/// config.json may name.
constexpr bool is_mlx_format(std::string_view mode, int group_size, int bits) noexcept {
    bool found = false;
    detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
        found = found || (is_mlx_format_v<Format> && mode == Format::mode && group_size == Format::group_size &&
                          bits == Format::bits);
    });
    return found;
}

/// The supported formats in words, per mode and, within a mode, per set of bit widths: "affine (bits in
/// {1, 2, 3, 4, 5, 6, 8}, group size in {32, 64, 128}, or bits in {2, 4, 6}, group size in {16}); mxfp4
/// (bits in {4}, group size in {32}); ...", for error messages. `mlx_only`: the formats MLX reads and
/// writes only (is_mlx_format_v), for the MLX config's messages.
inline std::string supported_formats_text(bool mlx_only = false) {
    std::vector<std::string> modes;
    std::vector<std::vector<std::pair<int, std::set<int>>>> bits_per_group_size;  // per mode, in list order
    detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
        if (mlx_only && !is_mlx_format_v<Format>) return;
        std::size_t m = 0;
        while (m < modes.size() && modes[m] != Format::mode) ++m;
        if (m == modes.size()) {
            modes.emplace_back(Format::mode);
            bits_per_group_size.emplace_back();
        }
        auto& sizes = bits_per_group_size[m];
        std::size_t s = 0;
        while (s < sizes.size() && sizes[s].first != Format::group_size) ++s;
        if (s == sizes.size()) sizes.emplace_back(Format::group_size, std::set<int>{});
        sizes[s].second.insert(Format::bits);
    });
    std::string text;
    for (std::size_t m = 0; m < modes.size(); ++m) {
        // Group sizes with the same bit widths share a clause, in the order the widths first appear.
        std::vector<std::pair<std::set<int>, std::set<int>>> clauses;  // bits, group sizes
        for (const auto& [group_size, bits] : bits_per_group_size[m]) {
            std::size_t c = 0;
            while (c < clauses.size() && clauses[c].first != bits) ++c;
            if (c == clauses.size()) clauses.emplace_back(bits, std::set<int>{});
            clauses[c].second.insert(group_size);
        }
        text += (m > 0 ? "; " : "") + modes[m] + " (";
        for (std::size_t c = 0; c < clauses.size(); ++c)
            text += (c > 0 ? ", or " : "") + std::string("bits in ") + detail::braced_list(clauses[c].first) +
                    ", group size in " + detail::braced_list(clauses[c].second);
        text += ")";
    }
    return text;
}

/// Calls function(std::type_identity<Format>{}) for the format of this mode, group size and bits,
/// known at run time, and returns its result. Throws std::invalid_argument naming the three and the
/// supported formats when there is none. `Formats` narrows the search to a part of the list (e.g.
/// MlxAffineFormats, so that `function` is compiled for those only).
template <class Formats = QuantizedFormats, class Function>
auto dispatch_format(std::string_view mode, int group_size, int bits, Function&& function) {
    using First = std::tuple_element_t<0, Formats>;
    using Result = decltype(function(std::type_identity<First>{}));
    std::optional<std::conditional_t<std::is_void_v<Result>, bool, Result>> result;
    detail::for_each_format(
        [&]<class Format>(std::type_identity<Format>) {
            if (result || mode != Format::mode || group_size != Format::group_size || bits != Format::bits) return;
            if constexpr (std::is_void_v<Result>) {
                function(std::type_identity<Format>{});
                result = true;
            } else {
                result.emplace(function(std::type_identity<Format>{}));
            }
        },
        static_cast<Formats*>(nullptr));
    if (!result)
        throw std::invalid_argument("lowbit: mode = " + std::string(mode) + ", group_size = " +
                                    std::to_string(group_size) + ", bits = " + std::to_string(bits) +
                                    " is not a supported format (supported: " + supported_formats_text() + ")");
    if constexpr (!std::is_void_v<Result>) return std::move(*result);
}

LOWBIT_END_NAMESPACE
