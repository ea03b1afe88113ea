// AnyQuantizedLinear: a QuantizedLinear whose format (mode, group size and bits) is chosen at run time
// (a checkpoint's config says it), dispatched once per call to the compile-time layer inside.
//
//   AnyQuantizedLinear = std::variant< QuantizedLinearOf<Format>... >  one per format of QuantizedFormats
//                                      (formats/formats.hpp: 21 MLX affine
//                                      formats, mxfp4, nvfp4 and mxfp8)
//
// Every alternative is compiled into a translation unit that calls forward(), from_linear() or
// dequantize(), so prefer the typed QuantizedLinear when the format is known when compiling.
#pragma once

#include "detail/config.hpp"
#include "formats/formats.hpp"
#include "quantized_linear.hpp"

#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

/// is_supported_quantization<GroupSize, Bits> for values known at run time.
constexpr bool is_supported_quantization_at_runtime(int group_size, int bits) noexcept {
    return is_supported_format("affine", group_size, bits);
}

namespace detail {

template <class... Formats>
std::variant<QuantizedLinearOf<Formats>...> quantized_linear_variant(std::tuple<Formats...>*);

/// One QuantizedLinearOf<Format> per format of QuantizedFormats, in its order.
using AnyQuantizedLinearVariant = decltype(quantized_linear_variant(static_cast<QuantizedFormats*>(nullptr)));

/// A format's mode, group size and bits as values.
struct FormatName {
    const char* mode;
    int group_size;
    int bits;
};
template <class... Formats>
constexpr std::array<FormatName, sizeof...(Formats)> format_names(std::tuple<Formats...>*) {
    return {FormatName{Formats::mode, Formats::group_size, Formats::bits}...};
}
/// FormatName of every format of QuantizedFormats, at its index (AnyQuantizedLinearVariant::index()):
/// the run-time questions about a layer's format answered without a visit over every alternative.
inline constexpr auto quantized_format_names = format_names(static_cast<QuantizedFormats*>(nullptr));

}  // namespace detail

/// Calls function(std::type_identity<QuantizedLinear<G, B>>{}) for the MLX affine format with G =
/// group_size, B = bits known at run time and returns its result. Throws std::invalid_argument naming
/// both (and the supported formats) for an unsupported pair.
template <class Function>
auto dispatch_quantization(int group_size, int bits, Function&& function) {
    return dispatch_format<MlxAffineFormats>("affine", group_size, bits, [&]<class Format>(std::type_identity<Format>) {
        return function(std::type_identity<QuantizedLinearOf<Format>>{});
    });
}

/// A QuantizedLinear<GroupSize, Bits> of any supported format, chosen at run time.
class AnyQuantizedLinear {
public:
    using Variant = detail::AnyQuantizedLinearVariant;

    /// Wraps a typed layer.
    template <class Format>
    AnyQuantizedLinear(QuantizedLinearOf<Format> layer)  // NOLINT: implicit on purpose
        : layer_(std::in_place_type<QuantizedLinearOf<Format>>, std::move(layer)) {}

    /// Quantizes linear.weight in the format of this mode, group size and bits (MLX's
    /// `nn.QuantizedLinear.from_linear(linear, group_size, bits, mode)`). Throws std::invalid_argument
    /// for an unsupported format (naming it and the supported ones) or a weight the typed layer's
    /// from_linear refuses. A template (LinearLayer is always Linear) only so that every format's
    /// quantizer is compiled where it is called, not in every translation unit that includes this header.
    template <class LinearLayer = Linear>
        requires std::same_as<LinearLayer, Linear>
    static AnyQuantizedLinear from_linear(const LinearLayer& linear, int group_size, int bits,
                                          std::string_view mode = "affine") {
        return dispatch_format(mode, group_size, bits, [&]<class Format>(std::type_identity<Format>) {
            return AnyQuantizedLinear(QuantizedLinearOf<Format>::from_linear(linear));
        });
    }

    /// The format's mode ("affine", "mxfp4", "nvfp4" or "mxfp8").
    const char* mode() const noexcept { return detail::quantized_format_names[layer_.index()].mode; }
    int group_size() const noexcept { return detail::quantized_format_names[layer_.index()].group_size; }
    int bits() const noexcept { return detail::quantized_format_names[layer_.index()].bits; }
    Eigen::Index input_dims() const {
        return std::visit([](const auto& layer) { return layer.input_dims(); }, layer_);
    }
    Eigen::Index output_dims() const {
        return std::visit([](const auto& layer) { return layer.output_dims(); }, layer_);
    }
    const std::optional<Eigen::VectorXf>& bias() const {
        return std::visit([](const auto& layer) -> const std::optional<Eigen::VectorXf>& { return layer.bias(); }, layer_);
    }

    /// x [M, in] -> [M, out], as the typed layer's forward. Throws std::invalid_argument unless x.cols() == in.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) const {
        return std::visit([&](const auto& layer) { return layer.forward(x); }, layer_);
    }

    /// The same with the activation arithmetic chosen (Activations::int8: docs/numerics.md N11, on the
    /// typed layer's int8 panels); also throws std::invalid_argument for NaN or Inf in x on the int8 path.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x, Activations activations) const {
        return std::visit([&](const auto& layer) { return layer.forward(x, activations); }, layer_);
    }

    /// The float weight [out, in] the codes stand for. A template (Matrix is always RowMatrixXf) for the
    /// reason from_linear is.
    template <class Matrix = RowMatrixXf>
        requires std::same_as<Matrix, RowMatrixXf>
    Matrix dequantize() const {
        return std::visit([](const auto& layer) { return layer.dequantize(); }, layer_);
    }

    /// The typed layer when it is QuantizedLinear<GroupSize, Bits>, else nullptr.
    template <int GroupSize, int Bits>
    const QuantizedLinear<GroupSize, Bits>* get_if() const noexcept {
        return std::get_if<QuantizedLinear<GroupSize, Bits>>(&layer_);
    }
    /// The typed layer; throws std::invalid_argument naming both formats when it is another one.
    template <int GroupSize, int Bits>
    const QuantizedLinear<GroupSize, Bits>& get() const {
        if (const auto* layer = get_if<GroupSize, Bits>()) return *layer;
        throw std::invalid_argument("lowbit::AnyQuantizedLinear::get<" + std::to_string(GroupSize) + ", " +
                                    std::to_string(Bits) + ">: the layer is group_size = " +
                                    std::to_string(group_size()) + ", bits = " + std::to_string(bits()));
    }

    /// The variant itself, for std::visit over the typed layer.
    const Variant& variant() const noexcept { return layer_; }

private:
    Variant layer_;
};

LOWBIT_END_NAMESPACE
