// The Fashion-MNIST example's training through frozen quantized layers: LoRA adapters on a 2-bit base
// (QLoRA: lowbit::LoraLinear) trained on the labels, and the base's group scales and biases distilled
// to the float model's outputs with the codes frozen (DWQ: lowbit::DwqLinear).
#pragma once

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "model.hpp"

namespace fashion_mnist {

/// Gradient of the cross-entropy between softmax(teacher) and softmax(student) with respect to the
/// student's logits [batch, classes], averaged over the batch: distillation to the teacher's outputs.
inline RowMatrix distillation_gradient(const RowMatrix& student, const RowMatrix& teacher) {
    return (softmax_rows(student) - softmax_rows(teacher)) / static_cast<float>(student.rows());
}

/// Trains the layers of `net` (lowbit::LoraLinear or lowbit::DwqLinear, ReLU between them) with
/// train()'s minibatches, Adam and learning-rate schedule, on the matrices parameters(layer) names,
/// whose gradients gradients(grads) names (in the same order). The loss is the cross-entropy on the
/// labels, or with a teacher the cross-entropy to the teacher's softmax.
template <class Layer, class Parameters, class Gradients>
void train_layers(std::vector<Layer>& net, const Split& data, const TrainSettings& settings, std::mt19937_64& rng,
                  const Mlp* teacher, Parameters parameters, Gradients gradients) {
    const int count = static_cast<int>(data.images.rows());
    std::vector<int> order(count);
    std::iota(order.begin(), order.end(), 0);
    const int total_steps = (count + settings.batch - 1) / settings.batch * settings.epochs;
    std::vector<std::vector<RowMatrix>> first_moments(net.size()), second_moments(net.size());
    for (std::size_t l = 0; l < net.size(); ++l)
        for (RowMatrix* p : parameters(net[l])) {
            first_moments[l].push_back(RowMatrix::Zero(p->rows(), p->cols()));
            second_moments[l].push_back(RowMatrix::Zero(p->rows(), p->cols()));
        }
    const Quantization none{"float", {}, {}, {}, {}};
    int step = 0;
    for (int epoch = 0; epoch < settings.epochs; ++epoch) {
        std::shuffle(order.begin(), order.end(), rng);
        for (int first = 0; first < count; first += settings.batch) {
            const int size = std::min(settings.batch, count - first);
            std::vector<RowMatrix> inputs(net.size()), pre_activations(net.size());
            inputs[0].resize(size, padded_features);
            for (int i = 0; i < size; ++i) inputs[0].row(i) = data.images.row(order[first + i]);
            for (std::size_t l = 0; l < net.size(); ++l) {
                pre_activations[l] = net[l].forward(inputs[l]);
                if (l + 1 < net.size()) inputs[l + 1] = relu(pre_activations[l]);
            }
            RowMatrix grad = teacher != nullptr
                                 ? distillation_gradient(pre_activations.back(), logits(*teacher, none, inputs[0]))
                                 : cross_entropy_gradient(pre_activations.back(), data.labels, order.data() + first);
            ++step;
            const float learning_rate = cosine_learning_rate(settings, step, total_steps);
            for (std::size_t l = net.size(); l-- > 0;) {
                const auto g = net[l].backward(inputs[l], grad);
                const auto params = parameters(net[l]);
                const auto grads = gradients(g);
                for (std::size_t i = 0; i < params.size(); ++i)
                    adam_update(*params[i], first_moments[l][i], second_moments[l][i], *grads[i], learning_rate, step);
                if (l > 0) grad = g.input.array() * (pre_activations[l - 1].array() > 0.0f).cast<float>();
            }
        }
    }
}

/// Logits of `net` on x (ReLU between the layers).
template <class Layer>
RowMatrix layers_logits(const std::vector<Layer>& net, const RowMatrix& x) {
    RowMatrix input = x;
    for (std::size_t l = 0; l < net.size(); ++l) {
        RowMatrix z = net[l].forward(input);
        input = l + 1 < net.size() ? relu(z) : z;
    }
    return input;
}

/// LoRA adapters of rank `rank` (alpha 16) on each 2-bit layer of `base`, trained on the labels.
inline std::vector<lowbit::LoraLinear<group_size, 2>> train_lora(
    const std::vector<lowbit::QuantizedLinear<group_size, 2>>& base, int rank, const Split& data,
    const TrainSettings& settings, std::mt19937_64& rng) {
    std::vector<lowbit::LoraLinear<group_size, 2>> net;
    for (std::size_t l = 0; l < base.size(); ++l)
        net.emplace_back(base[l], std::min<int>(rank, static_cast<int>(base[l].output_dims())), 16.0f, rng());
    train_layers(
        net, data, settings, rng, nullptr,
        [](auto& layer) {
            return std::array<RowMatrix*, 2>{&layer.a(), &layer.b()};
        },
        [](const auto& g) {
            return std::array<const RowMatrix*, 2>{&g.a, &g.b};
        });
    return net;
}

/// The 2-bit layers of `base` with their scales and biases distilled to the float `teacher`.
inline std::vector<lowbit::DwqLinear<group_size, 2>> train_dwq(
    const std::vector<lowbit::QuantizedLinear<group_size, 2>>& base, const Mlp& teacher, const Split& data,
    const TrainSettings& settings, std::mt19937_64& rng) {
    std::vector<lowbit::DwqLinear<group_size, 2>> net(base.begin(), base.end());
    train_layers(
        net, data, settings, rng, &teacher,
        [](auto& layer) {
            return std::array<RowMatrix*, 2>{&layer.scales(), &layer.biases()};
        },
        [](const auto& g) {
            return std::array<const RowMatrix*, 2>{&g.scales, &g.biases};
        });
    return net;
}

}  // namespace fashion_mnist
