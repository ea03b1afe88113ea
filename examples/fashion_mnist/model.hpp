// The Fashion-MNIST example's model: an MLP 784(+48 zero)-256-128-10 with ReLU, its forward pass under a
// Quantization (fake-quantized weights and activations), and minibatch Adam training with the
// quantizers' straight-through estimators. Plain Eigen.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "../fashion_mnist_data.hpp"

namespace fashion_mnist {

using Vector = Eigen::VectorXf;

constexpr int padded_features = 832;  // 784 pixels + 48 zero features: 13 groups of 64
constexpr int group_size = 64;
constexpr std::array<int, 4> layer_widths = {padded_features, 256, 128, classes};
constexpr int layers = 3;

struct Dense {
    RowMatrix weight;  ///< [out, in]
    Vector bias;       ///< [out]
    RowMatrix weight_m, weight_v;  ///< Adam moments
    Vector bias_m, bias_v;
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
        d.weight_m = RowMatrix::Zero(out, in);
        d.weight_v = RowMatrix::Zero(out, in);
        d.bias_m = Vector::Zero(out);
        d.bias_v = Vector::Zero(out);
    }
    return model;
}

/// How a training run sees its weights and activations. Empty functions mean float (identity).
struct Quantization {
    std::string name;
    /// Effective weight used in the forward pass, and the gradient map back to the float weight (STE).
    std::function<RowMatrix(int layer, const RowMatrix& weight)> weight;
    std::function<RowMatrix(int layer, const RowMatrix& grad, const RowMatrix& weight)> weight_grad;
    /// Quantized input of `layer`; `observe` is true while training (observers update), false in evaluation.
    std::function<RowMatrix(int layer, const RowMatrix& input, bool observe)> activation;
    std::function<RowMatrix(int layer, const RowMatrix& grad, const RowMatrix& input)> activation_grad;
};

RowMatrix relu(const RowMatrix& z) { return z.cwiseMax(0.0f); }

/// Logits of `model` on `x` as training sees it (fake-quantized weights and activations, float matmul).
RowMatrix logits(const Mlp& model, const Quantization& q, const RowMatrix& x) {
    RowMatrix input = x;
    for (int l = 0; l < layers; ++l) {
        const RowMatrix a = q.activation ? q.activation(l, input, false) : input;
        const RowMatrix w = q.weight ? q.weight(l, model.dense[l].weight) : model.dense[l].weight;
        RowMatrix z = a * w.transpose();
        z.rowwise() += model.dense[l].bias.transpose();
        input = l + 1 < layers ? relu(z) : z;
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

/// One Adam update of `param` (any Eigen matrix or vector) with gradient `grad` and moments m, v.
template <class Param>
void adam_update(Param& param, Param& m, Param& v, const Param& grad, float learning_rate, int step) {
    constexpr float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
    const float correction1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    const float correction2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    const float step_size = learning_rate * std::sqrt(correction2) / correction1;
    m = beta1 * m + (1 - beta1) * grad;
    v = beta2 * v + (1 - beta2) * grad.cwiseAbs2();
    param.array() -= step_size * m.array() / (v.array().sqrt() + epsilon);
}

void adam_step(Dense& d, const RowMatrix& weight_grad, const Vector& bias_grad, float learning_rate, int step) {
    adam_update(d.weight, d.weight_m, d.weight_v, weight_grad, learning_rate, step);
    adam_update(d.bias, d.bias_m, d.bias_v, bias_grad, learning_rate, step);
}

/// Minibatch Adam on softmax cross-entropy with a cosine learning-rate decay; gradients flow through
/// the quantizers by their straight-through estimators. Returns the seconds per epoch spent in the
/// epochs (the optimizer's set-up excluded).
double train(Mlp& model, const Quantization& q, const Split& data, const TrainSettings& settings,
             std::mt19937_64& rng) {
    const int count = static_cast<int>(data.images.rows());
    std::vector<int> order(count);
    std::iota(order.begin(), order.end(), 0);
    const int batches_per_epoch = (count + settings.batch - 1) / settings.batch;
    const int total_steps = batches_per_epoch * settings.epochs;
    int step = 0;
    for (auto& d : model.dense) {  // fresh optimizer state for every run
        d.weight_m.setZero(); d.weight_v.setZero(); d.bias_m.setZero(); d.bias_v.setZero();
    }
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 0; epoch < settings.epochs; ++epoch) {
        std::shuffle(order.begin(), order.end(), rng);
        for (int first = 0; first < count; first += settings.batch) {
            const int size = std::min(settings.batch, count - first);
            RowMatrix x(size, padded_features);
            for (int i = 0; i < size; ++i) x.row(i) = data.images.row(order[first + i]);

            std::array<RowMatrix, layers> inputs, quantized_inputs, weights, pre_activations;
            inputs[0] = x;
            for (int l = 0; l < layers; ++l) {
                quantized_inputs[l] = q.activation ? q.activation(l, inputs[l], true) : inputs[l];
                weights[l] = q.weight ? q.weight(l, model.dense[l].weight) : model.dense[l].weight;
                pre_activations[l] = quantized_inputs[l] * weights[l].transpose();
                pre_activations[l].rowwise() += model.dense[l].bias.transpose();
                if (l + 1 < layers) inputs[l + 1] = relu(pre_activations[l]);
            }
            RowMatrix grad = cross_entropy_gradient(pre_activations[layers - 1], data.labels, order.data() + first);
            ++step;
            const float learning_rate = cosine_learning_rate(settings, step, total_steps);
            for (int l = layers - 1; l >= 0; --l) {
                const RowMatrix effective_weight_grad = grad.transpose() * quantized_inputs[l];
                const Vector bias_grad = grad.colwise().sum().transpose();
                RowMatrix input_grad;
                if (l > 0) input_grad = grad * weights[l];
                const RowMatrix weight_grad =
                    q.weight_grad ? q.weight_grad(l, effective_weight_grad, model.dense[l].weight) : effective_weight_grad;
                adam_step(model.dense[l], weight_grad, bias_grad, learning_rate, step);
                if (l > 0) {
                    if (q.activation_grad) input_grad = q.activation_grad(l, input_grad, inputs[l]);
                    grad = input_grad.array() * (pre_activations[l - 1].array() > 0.0f).cast<float>();
                }
            }
        }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / settings.epochs;
}

}  // namespace fashion_mnist
