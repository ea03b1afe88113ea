// A BERT encoder (sentence-transformers' all-MiniLM-L6-v2 and any model of the same shape) in Eigen:
// weights from a safetensors checkpoint + config.json, sentence embeddings by mean pooling and L2
// normalisation, each of its linear layers float (lowbit::Linear) or quantized (a QuantizedLinear of
// any format behind QuantizedLayer, f32 or int8 activations; quantizers.hpp makes them).
//
//   ids [CLS] w1 .. wn [SEP]  -> word + position + token-type(0) embeddings -> LayerNorm
//   per layer: Q, K, V = linear(x); per head softmax(Q K^T / sqrt(d)) V; x = LN(x + dense(ctx));
//              x = LN(x + output(GELU_erf(intermediate(x))))
//   embedding = normalise(mean over the sentence's tokens of x)
//
// Batches are packed, not padded: the sentences' tokens are stacked into one [tokens, hidden] matrix
// for the linear layers, and each sentence attends only to its own tokens. That is what BERT's padding
// mask computes (padded keys get a large negative score, so exactly zero weight in float), without
// spending work on padding; mean pooling likewise runs over each sentence's real tokens only.
//
// Errors: ModelError (std::invalid_argument) naming the file and tensor for a missing file, a tensor
// that is missing or has the wrong shape, a config value out of range, or a vocabulary whose size
// differs from the word-embedding table; lowbit's SafetensorsFile errors for a corrupt checkpoint.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>
#include <lowbit/io/safetensors.hpp>
#include <lowbit/quantized_linear.hpp>
#include <nlohmann/json.hpp>

namespace minilm {

using RowMatrix = lowbit::RowMatrixXf;

/// A model file that is missing, malformed or inconsistent with the others.
struct ModelError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

/// The BertModel fields of config.json this forward uses.
struct BertConfig {
    int vocab_size = 0;
    int hidden_size = 0;
    int num_layers = 0;
    int num_heads = 0;
    int intermediate_size = 0;
    int max_position_embeddings = 0;
    int type_vocab_size = 0;
    float layer_norm_eps = 1e-12f;

    /// Reads config.json. Throws ModelError naming the file and key for a missing file, a missing or
    /// non-positive size, hidden_size not a multiple of num_heads, or a hidden_act other than "gelu".
    static BertConfig from_file(const std::filesystem::path& path) {
        std::ifstream in(path);
        if (!in) throw ModelError("cannot open " + path.string());
        nlohmann::json json;
        try {
            in >> json;
        } catch (const nlohmann::json::exception& error) {
            throw ModelError(path.string() + ": not JSON (" + error.what() + ")");
        }
        return from_json(json, path.string());
    }

    static BertConfig from_json(const nlohmann::json& json, const std::string& label) {
        auto positive = [&](const char* key) {
            if (!json.contains(key) || !json[key].is_number_integer() || json[key].get<long long>() <= 0 ||
                json[key].get<long long>() > (1 << 24))
                throw ModelError(label + ": '" + key + "' must be a positive integer" +
                                 (json.contains(key) ? ", got " + json[key].dump() : ", and is missing"));
            return json[key].get<int>();
        };
        BertConfig config;
        config.vocab_size = positive("vocab_size");
        config.hidden_size = positive("hidden_size");
        config.num_layers = positive("num_hidden_layers");
        config.num_heads = positive("num_attention_heads");
        config.intermediate_size = positive("intermediate_size");
        config.max_position_embeddings = positive("max_position_embeddings");
        config.type_vocab_size = positive("type_vocab_size");
        if (json.contains("layer_norm_eps")) {
            if (!json["layer_norm_eps"].is_number() || !(json["layer_norm_eps"].get<double>() > 0))
                throw ModelError(label + ": 'layer_norm_eps' must be a positive number, got " + json["layer_norm_eps"].dump());
            config.layer_norm_eps = json["layer_norm_eps"].get<float>();
        }
        if (json.contains("hidden_act") && json["hidden_act"] != "gelu")
            throw ModelError(label + ": hidden_act " + json["hidden_act"].dump() + " is not supported (only \"gelu\", erf form)");
        if (config.hidden_size % config.num_heads != 0)
            throw ModelError(label + ": hidden_size = " + std::to_string(config.hidden_size) +
                             " is not a multiple of num_attention_heads = " + std::to_string(config.num_heads));
        return config;
    }
};

/// A quantized linear layer behind a type-erased forward: only the code that makes one (a Quantizer)
/// instantiates its format's kernels, so a program that needs a few formats does not compile them all.
struct QuantizedLayer {
    std::function<RowMatrix(const RowMatrix&)> forward;  ///< x [tokens, in] -> [tokens, out], bias added
    RowMatrix weight;                                    ///< dequantized [out, in]
    std::size_t memory_bytes = 0;  ///< packed codes + scales + biases (in their types) + float bias
};

/// `layer` as a QuantizedLayer whose forward runs with `activations`.
template <class Format>
QuantizedLayer make_quantized_layer(lowbit::QuantizedLinearOf<Format> layer, lowbit::Activations activations) {
    QuantizedLayer result;
    const auto& w = layer.weight();
    result.memory_bytes = sizeof(std::uint32_t) * static_cast<std::size_t>(w.codes.size()) +
                          sizeof(typename Format::scale_type) * static_cast<std::size_t>(w.scales.size()) +
                          sizeof(float) * static_cast<std::size_t>(layer.bias() ? layer.bias()->size() : 0);
    if constexpr (Format::has_biases) result.memory_bytes += sizeof(float) * static_cast<std::size_t>(w.biases.size());
    result.weight = layer.dequantize();
    result.forward = [layer = std::move(layer), activations](const RowMatrix& x) -> RowMatrix {
        return layer.forward(x, activations);
    };
    return result;
}

/// How a quantized layer is made from a float one: (index of the layer in BertModel::linear_layers()
/// order, the float layer, group size, bits, activations). The index lets a quantizer find what it
/// prepared for that layer (calibration inputs, layers quantized ahead); minilm/quantizers.hpp has
/// round-to-nearest over every supported format and the post-training quantizers.
using Quantizer =
    std::function<QuantizedLayer(std::size_t index, const lowbit::Linear&, int group_size, int bits, lowbit::Activations)>;

/// One linear layer, float or quantized.
class LinearLayer {
public:
    LinearLayer() = default;
    explicit LinearLayer(lowbit::Linear layer) : layer_(std::move(layer)) {}
    explicit LinearLayer(QuantizedLayer layer) : layer_(std::move(layer)) {}

    bool is_quantized() const noexcept { return std::holds_alternative<QuantizedLayer>(layer_); }

    /// x [tokens, in] -> [tokens, out] (bias added).
    RowMatrix forward(const RowMatrix& x) const {
        if (const auto* linear = std::get_if<lowbit::Linear>(&layer_)) return linear->forward(x);
        return std::get<QuantizedLayer>(layer_).forward(x);
    }

    /// The float weight [out, in] (dequantized for a quantized layer).
    RowMatrix weight() const {
        if (const auto* linear = std::get_if<lowbit::Linear>(&layer_)) return linear->weight;
        return std::get<QuantizedLayer>(layer_).weight;
    }

    /// The float layer; throws std::logic_error for a quantized one.
    const lowbit::Linear& float_layer() const {
        if (const auto* linear = std::get_if<lowbit::Linear>(&layer_)) return *linear;
        throw std::logic_error("minilm::LinearLayer::float_layer: the layer is quantized");
    }

    /// Bytes the layer's parameters take: float weight and bias, or packed codes + scales + biases
    /// (float32 each) + float bias.
    std::size_t memory_bytes() const {
        if (const auto* linear = std::get_if<lowbit::Linear>(&layer_))
            return sizeof(float) * static_cast<std::size_t>(linear->weight.size() + (linear->bias ? linear->bias->size() : 0));
        return std::get<QuantizedLayer>(layer_).memory_bytes;
    }

private:
    std::variant<lowbit::Linear, QuantizedLayer> layer_;
};

struct LayerNorm {
    Eigen::VectorXf weight, bias;
};

struct EncoderLayer {
    LinearLayer query, key, value, attention_output;
    LayerNorm attention_norm;
    LinearLayer intermediate, output;
    LayerNorm output_norm;
};

/// Calls for each linear layer's input during a forward: (layer index 0..6*num_layers-1, input).
using LinearInputObserver = std::function<void(std::size_t, const RowMatrix&)>;

namespace bert_detail {

inline void layer_norm_rows(RowMatrix& x, const LayerNorm& norm, float eps) {
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
        auto row = x.row(r);
        const float mean = row.mean();
        row.array() -= mean;
        const float variance = row.squaredNorm() / static_cast<float>(row.size());
        row *= 1.0f / std::sqrt(variance + eps);
        row = row.cwiseProduct(norm.weight.transpose()) + norm.bias.transpose();
    }
}

inline void gelu_erf(RowMatrix& x) {
    x = x.unaryExpr([](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
}

}  // namespace bert_detail

class BertModel {
public:
    /// Names of the linear layers in LinearLayer order (6 per encoder layer).
    static constexpr const char* linear_names[6] = {"attention.self.query", "attention.self.key",
                                                    "attention.self.value", "attention.output.dense",
                                                    "intermediate.dense",   "output.dense"};

    /// Loads config.json and model.safetensors (F32, F16 or BF16) from `dir`; `vocab_size` is the
    /// tokenizer's. Throws ModelError as described at the top of this file.
    static BertModel load(const std::filesystem::path& dir, std::size_t vocab_size) {
        const auto config_path = dir / "config.json";
        const auto weights_path = dir / "model.safetensors";
        for (const auto& path : {config_path, weights_path})
            if (!std::filesystem::is_regular_file(path)) throw ModelError("missing model file " + path.string());
        return from_checkpoint(BertConfig::from_file(config_path), lowbit::SafetensorsFile::open(weights_path), vocab_size);
    }

    /// From a parsed config and an open checkpoint (tensor names as transformers' BertModel, with or
    /// without a "bert." prefix).
    static BertModel from_checkpoint(const BertConfig& config, const lowbit::SafetensorsFile& file, std::size_t vocab_size) {
        if (vocab_size != static_cast<std::size_t>(config.vocab_size))
            throw ModelError("the vocabulary has " + std::to_string(vocab_size) + " tokens but config.json says vocab_size = " +
                             std::to_string(config.vocab_size));
        const std::string prefix = file.contains("embeddings.word_embeddings.weight") ? "" : "bert.";
        auto matrix = [&](const std::string& name, Eigen::Index rows, Eigen::Index cols) {
            const std::string full = prefix + name;
            if (!file.contains(full)) throw ModelError(file.path() + ": missing tensor '" + full + "'");
            RowMatrix m = file.to_matrix(full);
            if (m.rows() != rows || m.cols() != cols)
                throw ModelError(file.path() + ": tensor '" + full + "' is " + lowbit::detail::shape_text(m.rows(), m.cols()) +
                                 ", expected " + lowbit::detail::shape_text(rows, cols) +
                                 (name == "embeddings.word_embeddings.weight" ? " (does the vocabulary match the model?)" : ""));
            if (!m.allFinite()) throw ModelError(file.path() + ": tensor '" + full + "' holds a NaN or Inf");
            return m;
        };
        auto vector = [&](const std::string& name, Eigen::Index size) {
            const std::string full = prefix + name;
            if (!file.contains(full)) throw ModelError(file.path() + ": missing tensor '" + full + "'");
            const std::vector<float> values = file.to_vector(full);
            if (file.tensor(full).shape.size() != 1 || static_cast<Eigen::Index>(values.size()) != size)
                throw ModelError(file.path() + ": tensor '" + full + "' has " + std::to_string(values.size()) +
                                 " values, expected a vector of " + std::to_string(size));
            Eigen::VectorXf v = Eigen::Map<const Eigen::VectorXf>(values.data(), size);
            if (!v.allFinite()) throw ModelError(file.path() + ": tensor '" + full + "' holds a NaN or Inf");
            return v;
        };
        const int h = config.hidden_size, f = config.intermediate_size;
        auto linear = [&](const std::string& name, int out, int in) {
            return LinearLayer(lowbit::Linear{matrix(name + ".weight", out, in), vector(name + ".bias", out)});
        };
        auto norm = [&](const std::string& name) { return LayerNorm{vector(name + ".weight", h), vector(name + ".bias", h)}; };

        BertModel model;
        model.config_ = config;
        model.word_embeddings_ = matrix("embeddings.word_embeddings.weight", config.vocab_size, h);
        model.position_embeddings_ = matrix("embeddings.position_embeddings.weight", config.max_position_embeddings, h);
        model.token_type_embeddings_ = matrix("embeddings.token_type_embeddings.weight", config.type_vocab_size, h);
        model.embedding_norm_ = norm("embeddings.LayerNorm");
        for (int l = 0; l < config.num_layers; ++l) {
            const std::string p = "encoder.layer." + std::to_string(l) + ".";
            model.layers_.push_back({linear(p + "attention.self.query", h, h), linear(p + "attention.self.key", h, h),
                                     linear(p + "attention.self.value", h, h), linear(p + "attention.output.dense", h, h),
                                     norm(p + "attention.output.LayerNorm"), linear(p + "intermediate.dense", f, h),
                                     linear(p + "output.dense", h, f), norm(p + "output.LayerNorm")});
        }
        return model;
    }

    const BertConfig& config() const noexcept { return config_; }
    /// Largest sequence (ids incl. [CLS]/[SEP]) the position table allows.
    std::size_t max_positions() const noexcept { return static_cast<std::size_t>(config_.max_position_embeddings); }

    /// This model with every linear layer quantized by `quantizer` (called with each layer's index in
    /// linear_layers() order, group size, bits) and run with `activations`. Throws what the quantizer
    /// throws (std::invalid_argument for an unsupported format or a layer whose in is not a multiple of
    /// the group size), and std::logic_error when a layer is already quantized.
    BertModel quantized(int group_size, int bits, lowbit::Activations activations, const Quantizer& quantizer) const {
        BertModel model = *this;
        const auto layers = model.linear_layers();
        for (std::size_t index = 0; index < layers.size(); ++index)
            *layers[index] = LinearLayer(quantizer(index, layers[index]->float_layer(), group_size, bits, activations));
        return model;
    }

    /// The linear layers, 6 per encoder layer in linear_names order.
    std::vector<const LinearLayer*> linear_layers() const {
        std::vector<const LinearLayer*> all;
        for (const EncoderLayer& l : layers_)
            for (const LinearLayer* layer : {&l.query, &l.key, &l.value, &l.attention_output, &l.intermediate, &l.output})
                all.push_back(layer);
        return all;
    }
    std::vector<LinearLayer*> linear_layers() {
        std::vector<LinearLayer*> all;
        for (EncoderLayer& l : layers_)
            for (LinearLayer* layer : {&l.query, &l.key, &l.value, &l.attention_output, &l.intermediate, &l.output})
                all.push_back(layer);
        return all;
    }
    std::string linear_name(std::size_t index) const {
        return "encoder.layer." + std::to_string(index / 6) + "." + linear_names[index % 6];
    }

    /// Bytes of all linear layers' parameters.
    std::size_t linear_memory_bytes() const {
        std::size_t bytes = 0;
        for (const LinearLayer* layer : linear_layers()) bytes += layer->memory_bytes();
        return bytes;
    }

    /// The hidden states [tokens, hidden] of the last layer for the packed sentences `batch` (each a
    /// list of ids, [CLS] ... [SEP], 1 to max_positions() long). Throws ModelError for an empty
    /// sentence, one longer than max_positions(), or an id outside the vocabulary.
    /// `observer` (optional) sees each linear layer's input; `linear_seconds` (optional) accumulates the
    /// wall time spent in the linear layers.
    RowMatrix hidden_states(const std::vector<std::vector<std::int32_t>>& batch,
                            const LinearInputObserver& observer = nullptr, double* linear_seconds = nullptr) const {
        RowMatrix x = embedding_output(batch);
        const Eigen::Index tokens = x.rows();
        const int h = config_.hidden_size;
        const int heads = config_.num_heads, head_dim = h / heads;
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        std::size_t index = 0;
        auto apply = [&](const LinearLayer& layer, const RowMatrix& input) {
            if (observer) observer(index, input);
            ++index;
            if (!linear_seconds) return layer.forward(input);
            const auto start = std::chrono::steady_clock::now();
            RowMatrix result = layer.forward(input);
            *linear_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            return result;
        };
        RowMatrix context(tokens, h), scores;
        for (const EncoderLayer& layer : layers_) {
            const RowMatrix q = apply(layer.query, x), k = apply(layer.key, x), v = apply(layer.value, x);
            Eigen::Index offset = 0;
            for (const auto& sentence : batch) {
                const auto n = static_cast<Eigen::Index>(sentence.size());
                for (int head = 0; head < heads; ++head) {
                    const Eigen::Index c = static_cast<Eigen::Index>(head) * head_dim;
                    scores.noalias() = q.block(offset, c, n, head_dim) * k.block(offset, c, n, head_dim).transpose();
                    scores *= scale;
                    for (Eigen::Index r = 0; r < n; ++r) {
                        auto s = scores.row(r);
                        s.array() = (s.array() - s.maxCoeff()).exp();
                        s /= s.sum();
                    }
                    context.block(offset, c, n, head_dim).noalias() = scores * v.block(offset, c, n, head_dim);
                }
                offset += n;
            }
            x += apply(layer.attention_output, context);
            bert_detail::layer_norm_rows(x, layer.attention_norm, config_.layer_norm_eps);
            RowMatrix inner = apply(layer.intermediate, x);
            bert_detail::gelu_erf(inner);
            x += apply(layer.output, inner);
            bert_detail::layer_norm_rows(x, layer.output_norm, config_.layer_norm_eps);
        }
        return x;
    }

    /// Sentence embeddings [batch, hidden]: mean of each sentence's hidden states, divided by its L2
    /// norm (at least 1e-12, as torch.nn.functional.normalize). Throws as hidden_states.
    RowMatrix embed(const std::vector<std::vector<std::int32_t>>& batch, const LinearInputObserver& observer = nullptr,
                    double* linear_seconds = nullptr) const {
        const RowMatrix x = hidden_states(batch, observer, linear_seconds);
        RowMatrix out(static_cast<Eigen::Index>(batch.size()), x.cols());
        Eigen::Index offset = 0;
        for (std::size_t s = 0; s < batch.size(); ++s) {
            const auto n = static_cast<Eigen::Index>(batch[s].size());
            out.row(static_cast<Eigen::Index>(s)) = x.middleRows(offset, n).colwise().mean();
            out.row(static_cast<Eigen::Index>(s)) /= std::max(out.row(static_cast<Eigen::Index>(s)).norm(), 1e-12f);
            offset += n;
        }
        return out;
    }

    /// The input of the first encoder layer [tokens, hidden] for the packed sentences `batch`: word +
    /// position + token-type embeddings, LayerNorm'ed. Throws as hidden_states.
    RowMatrix embedding_output(const std::vector<std::vector<std::int32_t>>& batch) const {
        Eigen::Index tokens = 0;
        for (std::size_t s = 0; s < batch.size(); ++s) {
            if (batch[s].empty() || batch[s].size() > max_positions())
                throw ModelError("sentence " + std::to_string(s) + " has " + std::to_string(batch[s].size()) +
                                 " ids; the model takes 1 to " + std::to_string(max_positions()));
            tokens += static_cast<Eigen::Index>(batch[s].size());
        }
        if (tokens == 0) throw ModelError("an empty batch");
        RowMatrix x(tokens, config_.hidden_size);
        Eigen::Index row = 0;
        for (std::size_t s = 0; s < batch.size(); ++s)
            for (std::size_t p = 0; p < batch[s].size(); ++p, ++row) {
                const std::int32_t id = batch[s][p];
                if (id < 0 || id >= config_.vocab_size)
                    throw ModelError("sentence " + std::to_string(s) + ": id " + std::to_string(id) + " at position " +
                                     std::to_string(p) + " is outside the vocabulary of " +
                                     std::to_string(config_.vocab_size));
                x.row(row) = word_embeddings_.row(id) + position_embeddings_.row(static_cast<Eigen::Index>(p)) +
                             token_type_embeddings_.row(0);
            }
        bert_detail::layer_norm_rows(x, embedding_norm_, config_.layer_norm_eps);

        return x;
    }

    /// The encoder layers (their LayerNorms and linear layers).
    const std::vector<EncoderLayer>& encoder_layers() const noexcept { return layers_; }

private:
    BertConfig config_;
    RowMatrix word_embeddings_, position_embeddings_, token_type_embeddings_;
    LayerNorm embedding_norm_;
    std::vector<EncoderLayer> layers_;
};

}  // namespace minilm
