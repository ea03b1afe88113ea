// The Fashion-MNIST example's model: an MLP 784(+48 zero)-256-128-10 with ReLU, its float layers, and
// the one training loop (minibatch Adam) that trains it and every lowbit layer the example uses.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "../adam.hpp"
#include "../fashion_mnist_data.hpp"

namespace fashion_mnist {

using Vector = Eigen::VectorXf;

constexpr int padded_features = 832;  // 784 pixels + 48 zero features: 13 groups of 64
constexpr int group_size = 64;
constexpr std::array<int, 4> layer_widths = {padded_features, 256, 128, classes};
constexpr int layers = 3;

/// A float layer y = x * weight^T + bias, with its gradients (plain Eigen): the float model's layers.
struct Dense {
    RowMatrix weight;  ///< [out, in]
    Vector bias;       ///< [out]

    struct Grads {
        RowMatrix input;  ///< [M, in]; empty when not asked for
        RowMatrix weight;
        Vector bias;
    };

    RowMatrix forward(const RowMatrix& x) const {
        RowMatrix z = x * weight.transpose();
        z.rowwise() += bias.transpose();
        return z;
    }
    Grads backward(const RowMatrix& x, const RowMatrix& dy, bool input_gradient = true) const {
        Grads g{RowMatrix(), dy.transpose() * x, dy.colwise().sum().transpose()};
        if (input_gradient) g.input = dy * weight;
        return g;
    }
    lowbit::Linear linear() const { return lowbit::Linear{weight, bias}; }
};

struct Mlp {
    std::array<Dense, layers> dense;
};

Mlp initial_mlp(std::mt19937_64& rng) {
    Mlp model;
    for (int l = 0; l < layers; ++l) {
        const int in = layer_widths[l], out = layer_widths[l + 1];
        std::normal_distribution<float> he(0.0f, std::sqrt(2.0f / static_cast<float>(l == 0 ? pixels : in)));
        Dense& d = model.dense[l];
        d.weight.resize(out, in);
        for (int r = 0; r < out; ++r)
            for (int c = 0; c < in; ++c) d.weight(r, c) = he(rng);
        d.bias = Vector::Zero(out);
    }
    return model;
}

RowMatrix relu(const RowMatrix& z) { return z.cwiseMax(0.0f); }

/// Logits of the layers of `net` (any layers with forward(x): Dense, lowbit's QatLinear, BitLinear,
/// LoraLinear, DwqLinear, QuantizedLinear) on x, ReLU between them.
template <class Net>
RowMatrix layers_logits(Net& net, const RowMatrix& x) {
    RowMatrix input = x;
    for (std::size_t l = 0; l < net.size(); ++l) {
        RowMatrix z = net[l].forward(input);
        input = l + 1 < net.size() ? relu(z) : z;
    }
    return input;
}

std::vector<int> argmax_rows(const RowMatrix& scores) {
    std::vector<int> predicted(scores.rows());
    for (Eigen::Index r = 0; r < scores.rows(); ++r) scores.row(r).maxCoeff(&predicted[r]);
    return predicted;
}

double accuracy(const std::vector<int>& predicted, const std::vector<int>& labels) {
    std::size_t correct = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    return static_cast<double>(correct) / static_cast<double>(labels.size());
}

struct TrainSettings {
    int epochs;
    float learning_rate;
    int batch = 128;
};

/// The softmax of each row of logits (the row's maximum subtracted first).
inline RowMatrix softmax_rows(const RowMatrix& logits) {
    RowMatrix p = logits;
    for (Eigen::Index i = 0; i < p.rows(); ++i) {
        auto row = p.row(i);
        row.array() -= row.maxCoeff();
        row = row.array().exp().matrix();
        row /= row.sum();
    }
    return p;
}

/// Softmax cross-entropy gradient with respect to the logits [batch, classes], averaged over the batch;
/// row i's label is labels[order[i]].
inline RowMatrix cross_entropy_gradient(const RowMatrix& logits, const std::vector<int>& labels, const int* order) {
    RowMatrix grad = softmax_rows(logits);
    for (Eigen::Index i = 0; i < grad.rows(); ++i) grad(i, labels[static_cast<std::size_t>(order[i])]) -= 1.0f;
    grad /= static_cast<float>(grad.rows());
    return grad;
}

/// Cosine decay of settings.learning_rate over total_steps, at step (1-based).
inline float cosine_learning_rate(const TrainSettings& settings, int step, int total_steps) {
    const float progress = static_cast<float>(step) / static_cast<float>(total_steps);
    return settings.learning_rate * 0.5f * (1.0f + std::cos(3.14159265f * progress));
}

/// A parameter or gradient (matrix, or vector as one row) seen as a row-major matrix, for the optimizer.
inline Eigen::Map<RowMatrix> as_matrix(RowMatrix& m) {
    return {m.data(), m.rows(), m.cols()};
}
inline Eigen::Map<RowMatrix> as_matrix(Vector& v) {
    return {v.data(), 1, v.size()};
}
inline Eigen::Map<const RowMatrix> as_matrix(const RowMatrix& m) {
    return {m.data(), m.rows(), m.cols()};
}
inline Eigen::Map<const RowMatrix> as_matrix(const Vector& v) {
    return {v.data(), 1, v.size()};
}
inline Eigen::Map<const RowMatrix> as_matrix(const std::optional<Vector>& v) {
    return as_matrix(*v);
}

/// The weight and bias of a layer, and of its gradients: what train() updates for Dense and for
/// lowbit's layers with weight() and bias() (QatLinear, BitLinear).
inline std::array<Eigen::Map<RowMatrix>, 2> weight_and_bias(Dense& d) {
    return {as_matrix(d.weight), as_matrix(d.bias)};
}
template <class Layer>
std::array<Eigen::Map<RowMatrix>, 2> weight_and_bias(Layer& layer) {
    return {as_matrix(layer.weight()), as_matrix(*layer.bias())};
}
template <class Grads>
std::array<Eigen::Map<const RowMatrix>, 2> weight_and_bias_grads(const Grads& g) {
    return {as_matrix(g.weight), as_matrix(g.bias)};
}

/// Gradient of the cross-entropy between softmax(teacher) and softmax(student) with respect to the
/// student's logits [batch, classes], averaged over the batch: distillation to the teacher's outputs.
inline RowMatrix distillation_gradient(const RowMatrix& student, const RowMatrix& teacher) {
    return (softmax_rows(student) - softmax_rows(teacher)) / static_cast<float>(student.rows());
}

/// Trains the layers of `net` (ReLU between them; any layers with forward(x) and backward(x, dy) whose
/// gradients have .input) by minibatch Adam with a cosine learning-rate decay, on the matrices
/// parameters(layer) names, whose gradients gradients(grads) names in the same order (as_matrix maps).
/// The loss is the softmax cross-entropy on the labels or, with a teacher, the cross-entropy to the
/// teacher's softmax. The first layer's input gradient is not formed where its backward can skip it.
/// Returns the seconds per epoch spent in the epochs (the optimizer's set-up excluded).
template <class Net, class Parameters, class Gradients>
double train(Net& net, const Split& data, const TrainSettings& settings, std::mt19937_64& rng, Parameters parameters,
             Gradients gradients, const Mlp* teacher = nullptr) {
    const int count = static_cast<int>(data.images.rows());
    std::vector<int> order(count);
    std::iota(order.begin(), order.end(), 0);
    const int total_steps = (count + settings.batch - 1) / settings.batch * settings.epochs;
    std::vector<std::vector<RowMatrix>> first_moments(net.size()), second_moments(net.size());
    for (std::size_t l = 0; l < net.size(); ++l)
        for (const auto& p : parameters(net[l])) {
            first_moments[l].push_back(RowMatrix::Zero(p.rows(), p.cols()));
            second_moments[l].push_back(RowMatrix::Zero(p.rows(), p.cols()));
        }
    int step = 0;
    const auto start = std::chrono::steady_clock::now();
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
            RowMatrix grad =
                teacher != nullptr
                    ? distillation_gradient(pre_activations.back(), layers_logits(teacher->dense, inputs[0]))
                    : cross_entropy_gradient(pre_activations.back(), data.labels, order.data() + first);
            ++step;
            const float learning_rate = cosine_learning_rate(settings, step, total_steps);
            for (std::size_t l = net.size(); l-- > 0;) {
                const auto g = [&] {
                    if constexpr (requires { net[l].backward(inputs[l], grad, false); })
                        return net[l].backward(inputs[l], grad, l > 0);
                    else
                        return net[l].backward(inputs[l], grad);
                }();
                auto params = parameters(net[l]);
                const auto grads = gradients(g);
                for (std::size_t i = 0; i < params.size(); ++i)
                    examples::adam_update(params[i], first_moments[l][i], second_moments[l][i], grads[i], learning_rate,
                                          step);
                if (l > 0) grad = g.input.array() * (pre_activations[l - 1].array() > 0.0f).cast<float>();
            }
        }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / settings.epochs;
}

/// train() on the weights and biases of the layers (Dense, QatLinear, BitLinear).
template <class Net>
double train_weights_and_biases(Net& net, const Split& data, const TrainSettings& settings, std::mt19937_64& rng) {
    return train(
        net, data, settings, rng, [](auto& layer) { return weight_and_bias(layer); },
        [](const auto& g) { return weight_and_bias_grads(g); });
}

}  // namespace fashion_mnist
