// The Fashion-MNIST example's quantization-aware training: the float model's layers as lowbit::QatLinear
// (weights fake-quantized in the deployed MLX format, inputs quantized to int8 as the deployed int8
// path quantizes them) or as lowbit::BitLinear (BitNet b1.58), each trained by train() and deployed by
// the layer's own deploy().
#pragma once

#include <vector>

#include <lowbit/lowbit.hpp>

#include "model.hpp"

namespace fashion_mnist {

/// The model's layers as QAT layers in QuantizedLinear<64, Bits>'s format with int8 activations; their
/// deploy().forward(x, Activations::int8) is their training forward bit for bit.
template <int Bits>
std::vector<lowbit::QatLinear<group_size, Bits>> qat_layers(const Mlp& model) {
    std::vector<lowbit::QatLinear<group_size, Bits>> net;
    for (const Dense& d : model.dense) {
        net.emplace_back(d.linear());
        net.back().set_activations(lowbit::Activations::int8);
    }
    return net;
}

/// The model's layers as BitNet b1.58 layers: per-tensor absmean ternary weights, per-token int8
/// activations, the integer product forward and straight-through gradients.
inline std::vector<lowbit::BitLinear> bitnet_layers(const Mlp& model) {
    std::vector<lowbit::BitLinear> net;
    for (const Dense& d : model.dense) net.emplace_back(d.weight, Vector(d.bias));
    return net;
}

}  // namespace fashion_mnist
