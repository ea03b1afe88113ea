// End-to-end distillation of a quantized MiniLM's group scales and biases (the "-e2e" method suffix):
// the codes frozen, the scales and biases of all 36 linear layers (lowbit::DwqLinear) trained together
// by Adam so that the quantized model's last hidden states match the float model's on the calibration
// sentences. The loss is the mean over tokens of ||h - h_float||^2 / ||h_float||^2: one target per token
// and channel (the pooled embedding alone, one per sentence, gives fewer targets than there are scales
// and biases). Its gradient flows back through every encoder layer (LayerNorm, GELU, softmax
// attention), and each linear layer's backward gives dx and its parameters' gradients on the packed
// codes (docs/numerics.md N20). What mlx-lm's DWQ does for a language model (there with a KL loss on
// logits).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/dwq_linear.hpp>

#include "../adam.hpp"
#include "bert.hpp"

namespace minilm {

/// How the end-to-end distillation trains.
struct EndToEndSettings {
    int epochs = 8;
    int batch = 16;               ///< sentences per step
    float learning_rate = 1e-5f;  ///< Adam's, decayed to 0 over the steps on a cosine
    std::uint64_t seed = 1;
};

namespace distill_detail {

/// A LayerNorm's forward, keeping what its backward needs: the normalised rows and 1 / sigma per row.
struct NormCache {
    RowMatrix normalized;
    Eigen::VectorXf inverse_std;
};

inline RowMatrix layer_norm_forward(const RowMatrix& x, const LayerNorm& norm, float eps, NormCache& cache) {
    cache.normalized.resize(x.rows(), x.cols());
    cache.inverse_std.resize(x.rows());
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
        const float mean = x.row(r).mean();
        cache.normalized.row(r) = x.row(r).array() - mean;
        const float variance = cache.normalized.row(r).squaredNorm() / static_cast<float>(x.cols());
        cache.inverse_std(r) = 1.0f / std::sqrt(variance + eps);
        cache.normalized.row(r) *= cache.inverse_std(r);
    }
    RowMatrix y = cache.normalized.array().rowwise() * norm.weight.transpose().array();
    y.rowwise() += norm.bias.transpose();
    return y;
}

/// dx of y = weight * (x - mean) / sigma + bias: (1/sigma) (g - mean(g) - n * mean(g n)), g = dy * weight.
inline RowMatrix layer_norm_backward(const RowMatrix& dy, const LayerNorm& norm, const NormCache& cache) {
    RowMatrix g = dy.array().rowwise() * norm.weight.transpose().array();
    RowMatrix dx(dy.rows(), dy.cols());
    for (Eigen::Index r = 0; r < dy.rows(); ++r) {
        const float mean_g = g.row(r).mean();
        const float mean_gn = g.row(r).dot(cache.normalized.row(r)) / static_cast<float>(dy.cols());
        dx.row(r) = cache.inverse_std(r) *
                    (g.row(r).array() - mean_g - cache.normalized.row(r).array() * mean_gn).matrix();
    }
    return dx;
}

/// The derivative of GELU (erf form, bert_detail::gelu_erf): Phi(v) + v phi(v).
inline RowMatrix gelu_derivative(const RowMatrix& x) {
    return x.unaryExpr([](float v) {
        return 0.5f * (1.0f + std::erf(v * 0.70710678118654752f)) + v * 0.39894228040143268f * std::exp(-0.5f * v * v);
    });
}

/// What one encoder layer's backward needs from its forward.
struct LayerCache {
    RowMatrix input, q, k, v, context, x1, inner_pre, inner;
    std::vector<RowMatrix> probabilities;  ///< per sentence, per head: softmax(Q K^T / sqrt(d))
    NormCache norm1, norm2;
};

}  // namespace distill_detail

/// The loss of the quantized model (the float model's embeddings, attention softmax, GELU and LayerNorms
/// with `layers` as its 36 linear layers, in BertModel::linear_layers() order) against `float_model` on
/// `batch`, as the top of this file says; with `grads` (resized to one per layer) also its gradients
/// with respect to every layer's scales and biases.
template <class Format>
double end_to_end_loss(const BertModel& float_model, const std::vector<lowbit::DwqLinearOf<Format>>& layers,
                       const std::vector<std::vector<std::int32_t>>& batch,
                       std::vector<typename lowbit::DwqLinearOf<Format>::Grads>* grads = nullptr) {
    using namespace distill_detail;
    const BertConfig& config = float_model.config();
    const int heads = config.num_heads, head_dim = config.hidden_size / heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const auto& encoder = float_model.encoder_layers();
    if (layers.size() != 6 * encoder.size())
        throw std::invalid_argument("end_to_end_loss: " + std::to_string(layers.size()) + " layers for a model with " +
                                    std::to_string(6 * encoder.size()));

    // Forward, keeping each layer's intermediates.
    std::vector<LayerCache> caches(encoder.size());
    RowMatrix x = float_model.embedding_output(batch);
    for (std::size_t l = 0; l < encoder.size(); ++l) {
        LayerCache& c = caches[l];
        const auto* linear = &layers[6 * l];
        c.input = x;
        c.q = linear[0].forward(x);
        c.k = linear[1].forward(x);
        c.v = linear[2].forward(x);
        c.context.resize(x.rows(), x.cols());
        Eigen::Index offset = 0;
        for (const auto& sentence : batch) {
            const auto n = static_cast<Eigen::Index>(sentence.size());
            for (int head = 0; head < heads; ++head) {
                const Eigen::Index col = static_cast<Eigen::Index>(head) * head_dim;
                RowMatrix p = c.q.block(offset, col, n, head_dim) * c.k.block(offset, col, n, head_dim).transpose();
                p *= scale;
                for (Eigen::Index r = 0; r < n; ++r) {
                    auto row = p.row(r);
                    row.array() = (row.array() - row.maxCoeff()).exp();
                    row /= row.sum();
                }
                c.context.block(offset, col, n, head_dim).noalias() = p * c.v.block(offset, col, n, head_dim);
                c.probabilities.push_back(std::move(p));
            }
            offset += n;
        }
        c.x1 = layer_norm_forward(x + linear[3].forward(c.context), encoder[l].attention_norm, config.layer_norm_eps,
                                  c.norm1);
        c.inner_pre = linear[4].forward(c.x1);
        c.inner = c.inner_pre;
        bert_detail::gelu_erf(c.inner);
        x = layer_norm_forward(c.x1 + linear[5].forward(c.inner), encoder[l].output_norm, config.layer_norm_eps, c.norm2);
    }

    // The loss and its gradient with respect to the last hidden states.
    const RowMatrix teacher = float_model.hidden_states(batch);
    const auto tokens = static_cast<float>(x.rows());
    RowMatrix dx(x.rows(), x.cols());
    double loss = 0.0;
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
        const float norm2 = std::max(teacher.row(r).squaredNorm(), 1e-12f);
        const Eigen::RowVectorXf difference = x.row(r) - teacher.row(r);
        loss += static_cast<double>(difference.squaredNorm()) / norm2;
        dx.row(r) = (2.0f / (norm2 * tokens)) * difference;
    }
    loss /= static_cast<double>(x.rows());
    if (grads == nullptr) return loss;

    // Backward through the layers: LayerNorm, the MLP, the attention output, softmax attention, Q K V.
    grads->resize(layers.size());
    for (std::size_t l = encoder.size(); l-- > 0;) {
        const LayerCache& c = caches[l];
        const std::size_t base = 6 * l;
        auto& g = *grads;
        const RowMatrix dpre2 = layer_norm_backward(dx, encoder[l].output_norm, c.norm2);
        g[base + 5] = layers[base + 5].backward(c.inner, dpre2);
        const RowMatrix dinner_pre = g[base + 5].input.cwiseProduct(gelu_derivative(c.inner_pre));
        g[base + 4] = layers[base + 4].backward(c.x1, dinner_pre);
        const RowMatrix dpre1 = layer_norm_backward(dpre2 + g[base + 4].input, encoder[l].attention_norm, c.norm1);
        g[base + 3] = layers[base + 3].backward(c.context, dpre1);
        RowMatrix dq(dx.rows(), dx.cols()), dk(dx.rows(), dx.cols()), dv(dx.rows(), dx.cols());
        Eigen::Index row0 = 0;
        std::size_t matrix = 0;
        for (const auto& sentence : batch) {
            const auto n = static_cast<Eigen::Index>(sentence.size());
            for (int head = 0; head < heads; ++head, ++matrix) {
                const Eigen::Index col = static_cast<Eigen::Index>(head) * head_dim;
                const RowMatrix& p = c.probabilities[matrix];
                const auto dcontext = g[base + 3].input.block(row0, col, n, head_dim);
                dv.block(row0, col, n, head_dim).noalias() = p.transpose() * dcontext;
                const RowMatrix dp = dcontext * c.v.block(row0, col, n, head_dim).transpose();
                // softmax: dscores = p (dp - rowsum(p dp)), then the 1 / sqrt(d) of the scores.
                RowMatrix dscores = p.cwiseProduct(dp);
                const Eigen::VectorXf row_sums = dscores.rowwise().sum();
                dscores -= p.cwiseProduct(row_sums.replicate(1, n));
                dscores *= scale;
                dq.block(row0, col, n, head_dim).noalias() = dscores * c.k.block(row0, col, n, head_dim);
                dk.block(row0, col, n, head_dim).noalias() = dscores.transpose() * c.q.block(row0, col, n, head_dim);
            }
            row0 += n;
        }
        g[base + 0] = layers[base + 0].backward(c.input, dq);
        g[base + 1] = layers[base + 1].backward(c.input, dk);
        g[base + 2] = layers[base + 2].backward(c.input, dv);
        dx = dpre1 + g[base + 0].input + g[base + 1].input + g[base + 2].input;
    }
    return loss;
}

/// Trains the scales and biases of `layers` (as end_to_end_loss takes them) toward `float_model` on the
/// `calibration` sentences in shuffled batches. Prints the mean loss per epoch. Throws
/// std::invalid_argument for no calibration sentences, or epochs or batch below 1.
template <class Format>
void distill_end_to_end(const BertModel& float_model, std::vector<lowbit::DwqLinearOf<Format>>& layers,
                        const std::vector<std::vector<std::int32_t>>& calibration, const EndToEndSettings& settings) {
    if (calibration.empty()) throw std::invalid_argument("distill_end_to_end: no calibration sentences");
    if (settings.epochs < 1 || settings.batch < 1)
        throw std::invalid_argument("distill_end_to_end: epochs " + std::to_string(settings.epochs) + " and batch " +
                                    std::to_string(settings.batch) + " must be at least 1");
    std::vector<RowMatrix> first_moments, second_moments;  // scales then biases, per layer
    for (auto& layer : layers)
        for (RowMatrix* p : {&layer.scales(), &layer.biases()}) {
            first_moments.push_back(RowMatrix::Zero(p->rows(), p->cols()));
            second_moments.push_back(RowMatrix::Zero(p->rows(), p->cols()));
        }
    const auto batch_size = static_cast<std::size_t>(settings.batch);
    const int steps_per_epoch = static_cast<int>((calibration.size() + batch_size - 1) / batch_size);
    const float total_steps = static_cast<float>(settings.epochs * steps_per_epoch);
    std::vector<std::size_t> order(calibration.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 rng(settings.seed);
    std::vector<typename lowbit::DwqLinearOf<Format>::Grads> grads;
    int step = 0;
    for (int epoch = 0; epoch < settings.epochs; ++epoch) {
        std::shuffle(order.begin(), order.end(), rng);
        double loss_sum = 0.0;
        for (std::size_t first = 0; first < order.size(); first += batch_size) {
            std::vector<std::vector<std::int32_t>> batch;
            for (std::size_t i = first; i < std::min(order.size(), first + batch_size); ++i)
                batch.push_back(calibration[order[i]]);
            loss_sum += end_to_end_loss(float_model, layers, batch, &grads);
            const float learning_rate =
                settings.learning_rate * 0.5f * (1.0f + std::cos(3.14159265f * static_cast<float>(step) / total_steps));
            ++step;
            for (std::size_t i = 0; i < layers.size(); ++i) {
                examples::adam_update(layers[i].scales(), first_moments[2 * i], second_moments[2 * i], grads[i].scales,
                                      learning_rate, step);
                examples::adam_update(layers[i].biases(), first_moments[2 * i + 1], second_moments[2 * i + 1],
                                      grads[i].biases, learning_rate, step);
            }
        }
        std::printf("  end-to-end distillation epoch %d: mean loss %.6f\n", epoch + 1,
                    loss_sum / static_cast<double>(steps_per_epoch));
    }
}

}  // namespace minilm
