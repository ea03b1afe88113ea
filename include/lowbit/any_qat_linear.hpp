// AnyQatLinear: a QatLinear whose format (mode, group size and bits) is chosen at run time, for example
// per layer from allocate_bits' choices, dispatched once per call to the compile-time layer inside.
//
//   AnyQatLinear = std::variant< QatLinearOf<Format>... >  one per format of QuantizedFormats
//                                                         (formats/formats.hpp), deploying to the
//                                                         AnyQuantizedLinear of the same format
//
// Every member that touches the layer is a template, so only the translation units that call it compile
// every format's quantizer and kernels.
#pragma once

#include "detail/config.hpp"

#include <concepts>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <Eigen/Core>

#include "activations.hpp"
#include "any_quantized_linear.hpp"
#include "formats/formats.hpp"
#include "qat_linear.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail {

template <class... Formats>
std::variant<QatLinearOf<Formats>...> qat_linear_variant(std::tuple<Formats...>*);

/// One QatLinearOf<Format> per format of QuantizedFormats, in its order.
using AnyQatLinearVariant = decltype(qat_linear_variant(static_cast<QuantizedFormats*>(nullptr)));

}  // namespace detail

/// A QatLinearOf<Format> of any supported format, chosen at run time. Its forward, backward and deploy
/// are the typed layer's; deploy() returns the AnyQuantizedLinear of the same format.
///
///     const BitAllocation allocation = allocate_bits(layers, options);
///     AnyQatLinear qat = AnyQatLinear::from_linear(float_layer, allocation.choices[l].group_size,
///                                                  allocation.choices[l].bits);
class AnyQatLinear {
public:
    using Variant = detail::AnyQatLinearVariant;
    using Grads = QatLinearGrads;

    /// Wraps a typed layer.
    template <class Format>
    AnyQatLinear(QatLinearOf<Format> layer) : layer_(std::move(layer)) {}  // NOLINT: implicit on purpose

    /// A QAT layer in the format of this mode, group size and bits whose master weight and bias are
    /// linear's. Throws std::invalid_argument for an unsupported format (naming it and the supported
    /// ones), in not a multiple of the group size, or a bias of the wrong size. A template (LinearLayer
    /// is always Linear) so that every format is compiled only where it is called.
    template <class LinearLayer = Linear>
    requires std::same_as<LinearLayer, Linear>
    static AnyQatLinear from_linear(const LinearLayer& linear, int group_size, int bits,
                                    std::string_view mode = "affine") {
        return dispatch_format(mode, group_size, bits, [&]<class Format>(std::type_identity<Format>) {
            return AnyQatLinear(QatLinearOf<Format>(linear));
        });
    }

    /// The format's mode ("affine", "mxfp4", "nvfp4" or "mxfp8"), group size and bits.
    const char* mode() const noexcept {
        return std::visit([](const auto& layer) { return std::decay_t<decltype(layer)>::format::mode; }, layer_);
    }
    int group_size() const noexcept {
        return std::visit([](const auto& layer) { return std::decay_t<decltype(layer)>::format::group_size; }, layer_);
    }
    int bits() const noexcept {
        return std::visit([](const auto& layer) { return std::decay_t<decltype(layer)>::format::bits; }, layer_);
    }
    Eigen::Index input_dims() const noexcept {
        return std::visit([](const auto& layer) { return layer.input_dims(); }, layer_);
    }
    Eigen::Index output_dims() const noexcept {
        return std::visit([](const auto& layer) { return layer.output_dims(); }, layer_);
    }
    Activations activations() const noexcept {
        return std::visit([](const auto& layer) { return layer.activations(); }, layer_);
    }
    void set_activations(Activations activations) noexcept {
        std::visit([&](auto& layer) { layer.set_activations(activations); }, layer_);
    }

    /// The master weight [out, in] and bias, as the typed layer's weight() and bias().
    RowMatrixXf& weight() noexcept {
        return std::visit([](auto& layer) -> RowMatrixXf& { return layer.weight(); }, layer_);
    }
    const RowMatrixXf& weight() const noexcept {
        return std::visit([](const auto& layer) -> const RowMatrixXf& { return layer.weight(); }, layer_);
    }
    std::optional<Eigen::VectorXf>& bias() noexcept {
        return std::visit([](auto& layer) -> std::optional<Eigen::VectorXf>& { return layer.bias(); }, layer_);
    }
    const std::optional<Eigen::VectorXf>& bias() const noexcept {
        return std::visit([](const auto& layer) -> const std::optional<Eigen::VectorXf>& { return layer.bias(); },
                          layer_);
    }

    /// The typed layer's forward(x): throws as it does.
    template <class Derived>
    RowMatrixXf forward(const Eigen::MatrixBase<Derived>& x) {
        return std::visit([&](auto& layer) { return layer.forward(x); }, layer_);
    }

    /// The typed layer's backward(x, dy, input_gradient): throws as it does.
    template <class DerivedX, class DerivedDy>
    Grads backward(const Eigen::MatrixBase<DerivedX>& x, const Eigen::MatrixBase<DerivedDy>& dy,
                   bool input_gradient = true) const {
        return std::visit([&](const auto& layer) { return layer.backward(x, dy, input_gradient); }, layer_);
    }

    /// The typed layer's deploy(), as an AnyQuantizedLinear. A template (Deployed is always
    /// AnyQuantizedLinear) for the reason from_linear is.
    template <class Deployed = AnyQuantizedLinear>
    requires std::same_as<Deployed, AnyQuantizedLinear> Deployed deploy()
    const {
        return std::visit([](const auto& layer) { return Deployed(layer.deploy()); }, layer_);
    }

    /// The variant itself, for std::visit over the typed layer.
    const Variant& variant() const noexcept { return layer_; }
    Variant& variant() noexcept { return layer_; }

private:
    Variant layer_;
};

LOWBIT_END_NAMESPACE
