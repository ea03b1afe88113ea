// The Fashion-MNIST example's quantization schemes for training: group-wise QAT with 8-bit activation
// fake quantizers, and BitNet b1.58.
#pragma once

#include <array>
#include <memory>
#include <string>

#include <lowbit/lowbit.hpp>

#include "model.hpp"

namespace fashion_mnist {

/// 8-bit asymmetric fake quantizers, one per layer input (all inputs are >= 0: pixels and ReLU outputs),
/// with moving-average min-max observers as in PyTorch's QAT.
struct ActivationQuantizers {
    using Quantizer = lowbit::FakeQuantize<8, false>;
    std::array<Quantizer, layers> per_layer;

    ActivationQuantizers() {
        lowbit::FakeQuantConfig config;
        config.observer = lowbit::Observer::moving_average;
        for (auto& quantizer : per_layer) quantizer = Quantizer(config);
    }
    RowMatrix forward(int layer, const RowMatrix& input, bool observe) {
        if (observe) per_layer[layer].observe(input);
        return per_layer[layer].forward(input);
    }
    RowMatrix backward(int layer, const RowMatrix& grad, const RowMatrix& input) const {
        return per_layer[layer].backward_clamped(grad, input);
    }
};

template <int Bits>
Quantization group_qat(std::shared_ptr<ActivationQuantizers> activations) {
    Quantization q;
    q.name = "QAT " + std::to_string(Bits) + "-bit";
    q.weight = [](int, const RowMatrix& w) -> RowMatrix { return lowbit::GroupFakeQuantize<group_size, Bits>().forward(w); };
    q.weight_grad = [](int, const RowMatrix& grad, const RowMatrix& w) -> RowMatrix {
        return lowbit::GroupFakeQuantize<group_size, Bits>().backward(grad, w);
    };
    q.activation = [activations](int l, const RowMatrix& a, bool observe) { return activations->forward(l, a, observe); };
    q.activation_grad = [activations](int l, const RowMatrix& g, const RowMatrix& a) { return activations->backward(l, g, a); };
    return q;
}

/// BitNet b1.58: per-tensor absmean ternary weights, per-token absmax int8 activations, identity STE.
Quantization bitnet_qat() {
    Quantization q;
    q.name = "BitNet b1.58";
    q.weight = [](int, const RowMatrix& w) -> RowMatrix { return lowbit::ternary_ste(w, lowbit::absmean_scale(w)); };
    q.weight_grad = [](int, const RowMatrix& grad, const RowMatrix&) -> RowMatrix { return lowbit::ste_backward(grad); };
    q.activation = [](int, const RowMatrix& a, bool) -> RowMatrix { return lowbit::fake_quantize_activations_int8(a); };
    q.activation_grad = [](int, const RowMatrix& grad, const RowMatrix&) -> RowMatrix { return lowbit::ste_backward(grad); };
    return q;
}

}  // namespace fashion_mnist
