// The quantizers the MiniLM example applies to its linear layers (minilm::Quantizer). Kept apart from
// bert.hpp because choosing the format at run time instantiates the kernels of every supported MLX
// format (AnyQuantizedLinear's 18), which only the example needs; tests pass a quantizer for the few
// formats they use.
#pragma once

#include <variant>

#include <lowbit/any_quantized_linear.hpp>

#include "bert.hpp"

namespace minilm {

/// MLX's round-to-nearest (lowbit::quantize) at any supported (group size, bits). Throws
/// std::invalid_argument for an unsupported pair or a layer whose in is not a multiple of the group.
inline QuantizedLayer round_to_nearest(const lowbit::Linear& layer, int group_size, int bits,
                                       lowbit::Activations activations) {
    const auto quantized = lowbit::AnyQuantizedLinear::from_linear(layer, group_size, bits);
    return std::visit([&](const auto& typed) { return make_quantized_layer(typed, activations); }, quantized.variant());
}

}  // namespace minilm
