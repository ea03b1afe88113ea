// The Fashion-MNIST example's training through frozen quantized layers: LoRA adapters on a 2-bit base
// (QLoRA: lowbit::LoraLinear) trained on the labels, and the base's group scales and biases distilled
// to the float model's outputs with the codes frozen (DWQ: lowbit::DwqLinear).
#pragma once

#include <array>
#include <random>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "model.hpp"

namespace fashion_mnist {

/// LoRA adapters of rank `rank` (alpha 16) on each 2-bit layer of `base`, trained on the labels.
inline std::vector<lowbit::LoraLinear<group_size, 2>> train_lora(
    const std::vector<lowbit::QuantizedLinear<group_size, 2>>& base, int rank, const Split& data,
    const TrainSettings& settings, std::mt19937_64& rng) {
    std::vector<lowbit::LoraLinear<group_size, 2>> net;
    for (std::size_t l = 0; l < base.size(); ++l)
        net.emplace_back(base[l], std::min<int>(rank, static_cast<int>(base[l].output_dims())), 16.0f, rng());
    train(
        net, data, settings, rng,
        [](auto& layer) {
            return std::array{as_matrix(layer.a()), as_matrix(layer.b())};
        },
        [](const auto& g) {
            return std::array{as_matrix(g.a), as_matrix(g.b)};
        });
    return net;
}

/// The 2-bit layers of `base` with their scales and biases distilled to the float `teacher`.
inline std::vector<lowbit::DwqLinear<group_size, 2>> train_dwq(
    const std::vector<lowbit::QuantizedLinear<group_size, 2>>& base, const Mlp& teacher, const Split& data,
    const TrainSettings& settings, std::mt19937_64& rng) {
    std::vector<lowbit::DwqLinear<group_size, 2>> net(base.begin(), base.end());
    train(
        net, data, settings, rng,
        [](auto& layer) {
            return std::array{as_matrix(layer.scales()), as_matrix(layer.biases())};
        },
        [](const auto& g) {
            return std::array{as_matrix(g.scales), as_matrix(g.biases)};
        },
        &teacher);
    return net;
}

}  // namespace fashion_mnist
