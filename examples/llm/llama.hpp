// The llama architecture as a GGUF file describes it (general.architecture = "llama"; SmolLM2, Llama 2
// and 3 without rope scaling, TinyLlama, ...), in Eigen with every linear layer a Projection:
//
//   x = token_embd[ids]                                           (ggml's get_rows, exact)
//   per block:  h = rms_norm(x) * attn_norm
//               q, k, v = h Wq^T, h Wk^T, h Wv^T                  (one stacked layer)
//               rope(q), rope(k)   ggml's "normal" rope: pairs (2i, 2i+1) of each head rotated by
//                                  pos * base^(-2i/rope_dims), the angle stepped in float as ggml does
//               per head: softmax(q k^T / sqrt(head_dim), causal) v   (grouped-query: head h reads
//                                  key/value head h / (head_count / head_count_kv)); keys and values of
//                                  earlier positions from the KV cache (float)
//               x += attn Wo^T
//               h = rms_norm(x) * ffn_norm;  x += (silu(h Wgate^T) * (h Wup^T)) Wdown^T
//   logits = (rms_norm(x) * output_norm) Wout^T     (Wout = token_embd when output.weight is absent)
//
// Errors: ModelError naming the file and the key or tensor for an architecture other than llama, a
// missing or out-of-range hyper-parameter, rope scaling, or a tensor that is missing or misshapen.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/detail/threading/parallel.hpp>
#include <lowbit/io/gguf.hpp>

#include "projection.hpp"

namespace llm {

/// The hyper-parameters of a llama GGUF (keys llama.*).
struct LlamaConfig {
    int block_count = 0;
    int embedding_length = 0;
    int feed_forward_length = 0;
    int head_count = 0;
    int head_count_kv = 0;
    int head_dim = 0;
    int rope_dims = 0;
    int context_length = 0;
    int vocab_size = 0;
    float rms_epsilon = 1e-5f;
    float rope_base = 10000.0f;

    static LlamaConfig from_gguf(const lowbit::GgufFile& file, const std::string& label) {
        const auto& metadata = file.metadata();
        const auto fail = [&](const std::string& fault) { return ModelError(label + ": " + fault); };
        const auto find = [&](const std::string& key) -> const lowbit::GgufValue* {
            const auto it = metadata.find(key);
            return it == metadata.end() ? nullptr : &it->second;
        };
        const auto* architecture = find("general.architecture");
        if (!architecture) throw fail("general.architecture is missing");
        try {
            if (architecture->as_string() != "llama")
                throw fail("general.architecture is '" + architecture->as_string() +
                           "'; this runner runs 'llama' models");
            const auto integer = [&](const std::string& key, long long low, long long high) -> int {
                const auto* value = find(key);
                if (!value) throw fail(key + " is missing");
                const long long number = value->as_int();
                if (number < low || number > high)
                    throw fail(key + " is " + std::to_string(number) + "; expected " + std::to_string(low) + " to " +
                               std::to_string(high));
                return static_cast<int>(number);
            };
            const auto real = [&](const std::string& key, double fallback, double low, double high) -> float {
                const auto* value = find(key);
                const double number = value ? value->as_double() : fallback;
                if (!(number >= low && number <= high))
                    throw fail(key + " is " + std::to_string(number) + "; expected " + std::to_string(low) + " to " +
                               std::to_string(high));
                return static_cast<float>(number);
            };
            LlamaConfig config;
            config.block_count = integer("llama.block_count", 1, 1024);
            config.embedding_length = integer("llama.embedding_length", 1, 1 << 16);
            config.feed_forward_length = integer("llama.feed_forward_length", 1, 1 << 18);
            config.head_count = integer("llama.attention.head_count", 1, 1024);
            config.head_count_kv = find("llama.attention.head_count_kv")
                                       ? integer("llama.attention.head_count_kv", 1, config.head_count)
                                       : config.head_count;
            if (config.embedding_length % config.head_count != 0)
                throw fail("llama.embedding_length " + std::to_string(config.embedding_length) +
                           " is not a multiple of llama.attention.head_count " + std::to_string(config.head_count));
            if (config.head_count % config.head_count_kv != 0)
                throw fail("llama.attention.head_count " + std::to_string(config.head_count) +
                           " is not a multiple of llama.attention.head_count_kv " +
                           std::to_string(config.head_count_kv));
            config.head_dim = config.embedding_length / config.head_count;
            config.rope_dims = find("llama.rope.dimension_count")
                                   ? integer("llama.rope.dimension_count", 2, config.head_dim)
                                   : config.head_dim;
            if (config.rope_dims % 2 != 0)
                throw fail("llama.rope.dimension_count " + std::to_string(config.rope_dims) + " is odd");
            config.context_length = integer("llama.context_length", 1, 1 << 24);
            config.rms_epsilon = real("llama.attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0);
            config.rope_base = real("llama.rope.freq_base", 10000.0, 1.0, 1e12);
            if (const auto* scaling = find("llama.rope.scaling.type"); scaling && scaling->as_string() != "none")
                throw fail("llama.rope.scaling.type is '" + scaling->as_string() +
                           "'; this runner has no rope scaling");
            if (const auto* tokens = find("tokenizer.ggml.tokens"))
                config.vocab_size = static_cast<int>(tokens->as_array().size());
            if (config.vocab_size == 0) throw fail("tokenizer.ggml.tokens is missing or empty");
            return config;
        } catch (const ModelError&) {
            throw;
        } catch (const std::invalid_argument& error) {  // a GgufValue of the wrong type
            throw fail(std::string("model metadata: ") + error.what());
        }
    }

    int kv_width() const noexcept { return head_count_kv * head_dim; }
};

/// Keys and values of every block for positions [0, length()), room for capacity() positions.
class KvCache {
public:
    KvCache(const LlamaConfig& config, int capacity)
        : keys_(static_cast<std::size_t>(config.block_count), RowMatrix(capacity, config.kv_width())),
          values_(keys_),
          capacity_(capacity) {}
    int length() const noexcept { return length_; }
    int capacity() const noexcept { return capacity_; }
    void clear() noexcept { length_ = 0; }

private:
    friend class LlamaModel;
    std::vector<RowMatrix> keys_, values_;  ///< per block [capacity, head_count_kv * head_dim]
    int length_ = 0;
    int capacity_ = 0;
};

/// Seconds spent per part of the forward, summed over calls.
struct ForwardTimes {
    double linear = 0;     ///< the blocks' projections
    double attention = 0;  ///< scores, softmax and the weighted values (rope and the cache copy included)
    double head = 0;       ///< the output projection
    double other = 0;      ///< embedding, norms, SwiGLU, residuals
    double total() const noexcept { return linear + attention + head + other; }
    ForwardTimes& operator+=(const ForwardTimes& more) noexcept {
        linear += more.linear, attention += more.attention, head += more.head, other += more.other;
        return *this;
    }
};

class LlamaModel {
public:
    /// Loads every weight of `file`; the linear layers run with `activations`.
    static LlamaModel from_gguf(const lowbit::GgufFile& file, const std::string& label,
                                lowbit::Activations activations) {
        LlamaModel model(file, label, activations);
        const auto& c = model.config_;
        const Eigen::Index n = c.embedding_length;
        const auto vector = [&](const std::string& name) {
            if (!file.contains(name)) throw ModelError(label + ": tensor '" + name + "' is missing");
            const auto& info = file.tensor_info(name);
            if (info.element_count() != static_cast<std::uint64_t>(n) ||
                info.row_length() != static_cast<std::uint64_t>(n))
                throw ModelError(label + ": tensor '" + name + "' has " + std::to_string(info.element_count()) +
                                 " values; expected [" + std::to_string(n) + "]");
            return Eigen::RowVectorXf(file.to_matrix(name).row(0));
        };
        if (!file.contains("token_embd.weight")) throw ModelError(label + ": tensor 'token_embd.weight' is missing");
        const auto& embd = file.tensor_info("token_embd.weight");
        if (embd.dims.size() != 2 || embd.row_length() != static_cast<std::uint64_t>(n) ||
            embd.row_count() != static_cast<std::uint64_t>(c.vocab_size))
            throw ModelError(label + ": tensor 'token_embd.weight' has " + std::to_string(embd.row_count()) +
                             " rows of " + std::to_string(embd.row_length()) + "; expected " +
                             std::to_string(c.vocab_size) + " (the vocabulary) of " + std::to_string(n));
        for (int b = 0; b < c.block_count; ++b) {
            const std::string p = "blk." + std::to_string(b) + ".";
            Block block;
            block.attn_norm = vector(p + "attn_norm.weight");
            block.ffn_norm = vector(p + "ffn_norm.weight");
            block.qkv =
                Projection::from_gguf(file, label, {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, n);
            block.output = Projection::from_gguf(file, label, {p + "attn_output.weight"}, n);
            block.gate_up = Projection::from_gguf(file, label, {p + "ffn_gate.weight", p + "ffn_up.weight"}, n);
            block.down = Projection::from_gguf(file, label, {p + "ffn_down.weight"}, c.feed_forward_length);
            expect_outputs(label, p + "attn_q/k/v", block.qkv, {n, c.kv_width(), c.kv_width()});
            expect_outputs(label, p + "attn_output", block.output, {n});
            expect_outputs(label, p + "ffn_gate/up", block.gate_up, {c.feed_forward_length, c.feed_forward_length});
            expect_outputs(label, p + "ffn_down", block.down, {n});
            model.blocks_.push_back(std::move(block));
        }
        model.output_norm_ = vector("output_norm.weight");
        const std::string head = file.contains("output.weight") ? "output.weight" : "token_embd.weight";
        model.head_ = Projection::from_gguf(file, label, {head}, n);
        expect_outputs(label, head, model.head_, {c.vocab_size});
        return model;
    }

    const LlamaConfig& config() const noexcept { return config_; }

    /// How the linear layers run: "affine g32 4-bit: 90, float: 30, ..." (Projection::runs_as, counted).
    std::string layer_formats() const {
        std::map<std::string, int> counts;
        for (const auto& block : blocks_)
            for (const Projection* p : {&block.qkv, &block.output, &block.gate_up, &block.down}) ++counts[p->runs_as()];
        ++counts[head_.runs_as() + " (head)"];
        std::string text;
        for (const auto& [format, count] : counts)
            text += (text.empty() ? "" : ", ") + format + ": " + std::to_string(count);
        return text;
    }

    /// Runs `tokens` at positions cache.length() onwards, appends their keys and values to `cache`, and
    /// returns the logits [tokens.size() - logits_from, vocab] of tokens [logits_from, tokens.size()).
    /// Throws std::invalid_argument when there are no tokens or they do not fit in the cache, and
    /// std::out_of_range (naming the row) for a token outside the vocabulary.
    RowMatrix forward(std::span<const std::int32_t> tokens, KvCache& cache, std::size_t logits_from,
                      ForwardTimes* times = nullptr) const {
        using Clock = std::chrono::steady_clock;
        ForwardTimes local;
        auto& t = times ? *times : local;
        auto mark = Clock::now();
        const auto lap = [&](double& bucket) {
            const auto now = Clock::now();
            bucket += std::chrono::duration<double>(now - mark).count();
            mark = now;
        };
        const auto count = static_cast<Eigen::Index>(tokens.size());
        const int start = cache.length_;
        if (tokens.empty()) throw std::invalid_argument("llm::LlamaModel::forward: no tokens");
        if (count > cache.capacity_ - start)
            throw std::invalid_argument("llm::LlamaModel::forward: " + std::to_string(start) + " cached and " +
                                        std::to_string(count) + " new tokens exceed the context of " +
                                        std::to_string(cache.capacity_));
        if (logits_from > tokens.size())
            throw std::invalid_argument("llm::LlamaModel::forward: logits_from beyond the tokens");
        RowMatrix x = file_.to_matrix_rows("token_embd.weight", tokens);
        const RowMatrix angles = rope_angles(start, count);
        RowMatrix h(count, x.cols());
        lap(t.other);
        const int q_width = config_.embedding_length;
        const int kv_width = config_.kv_width();
        for (std::size_t b = 0; b < blocks_.size(); ++b) {
            const Block& block = blocks_[b];
            rms_norm(x, block.attn_norm, h);
            lap(t.other);
            RowMatrix qkv = block.qkv.forward(h, activations_);
            lap(t.linear);
            rope(qkv, 0, config_.head_count, angles);
            rope(qkv, q_width, config_.head_count_kv, angles);
            cache.keys_[b].middleRows(start, count) = qkv.middleCols(q_width, kv_width);
            cache.values_[b].middleRows(start, count) = qkv.middleCols(q_width + kv_width, kv_width);
            attend(qkv, cache.keys_[b], cache.values_[b], start, h);
            lap(t.attention);
            x += block.output.forward(h, activations_);
            lap(t.linear);
            rms_norm(x, block.ffn_norm, h);
            lap(t.other);
            RowMatrix gate_up = block.gate_up.forward(h, activations_);
            lap(t.linear);
            const Eigen::Index ff = config_.feed_forward_length;
            RowMatrix act(count, ff);
            for_rows(count, ff, [&](Eigen::Index begin, Eigen::Index rows) {  // silu(gate) * up, vectorized by Eigen
                const auto gate = gate_up.block(begin, 0, rows, ff).array();
                act.middleRows(begin, rows).array() =
                    gate / (1.0f + (-gate).exp()) * gate_up.block(begin, ff, rows, ff).array();
            });
            lap(t.other);
            x += block.down.forward(act, activations_);
            lap(t.linear);
        }
        cache.length_ = start + static_cast<int>(count);
        const auto wanted = count - static_cast<Eigen::Index>(logits_from);
        RowMatrix last(wanted, x.cols());
        rms_norm(x.bottomRows(wanted), output_norm_, last);
        lap(t.other);
        RowMatrix logits = wanted == 0 ? RowMatrix(0, config_.vocab_size) : head_.forward(last, activations_);
        lap(t.head);
        return logits;
    }

private:
    LlamaModel(const lowbit::GgufFile& file, const std::string& label, lowbit::Activations activations)
        : file_(file), activations_(activations), config_(LlamaConfig::from_gguf(file, label)) {}

    struct Block {
        Eigen::RowVectorXf attn_norm, ffn_norm;
        Projection qkv, output, gate_up, down;
    };

    static void expect_outputs(const std::string& label, const std::string& what, const Projection& projection,
                               const std::vector<Eigen::Index>& expected) {
        if (projection.outputs() == expected) return;
        std::string got, want;
        for (const auto o : projection.outputs()) got += (got.empty() ? "" : ", ") + std::to_string(o);
        for (const auto o : expected) want += (want.empty() ? "" : ", ") + std::to_string(o);
        throw ModelError(label + ": tensor " + what + " has " + got + " outputs; the hyper-parameters give " + want);
    }

    /// out = x / sqrt(mean(x^2) + eps) * weight, row by row (sum in double, as ggml's rms_norm).
    template <class Rows>
    void rms_norm(const Rows& x, const Eigen::RowVectorXf& weight, RowMatrix& out) const {
        for_rows(x.rows(), x.cols(), [&](Eigen::Index begin, Eigen::Index rows) {
            for (Eigen::Index r = begin; r < begin + rows; ++r) {
                const double sum = x.row(r).template cast<double>().squaredNorm();
                const float scale =
                    1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(x.cols())) + config_.rms_epsilon);
                out.row(r) = (x.row(r) * scale).cwiseProduct(weight);
            }
        });
    }

    /// body(begin, count) over ranges of `rows` rows of `cols` values, split over lowbit's threads when
    /// there is enough work (at least 16K values a range).
    template <class Body>
    static void for_rows(Eigen::Index rows, Eigen::Index cols, Body&& body) {
        const auto grain =
            static_cast<std::size_t>(std::max<Eigen::Index>(1, (1 << 14) / std::max<Eigen::Index>(cols, 1)));
        lowbit::detail::parallel_for(static_cast<std::size_t>(rows), grain, [&](std::size_t begin, std::size_t end) {
            body(static_cast<Eigen::Index>(begin), static_cast<Eigen::Index>(end - begin));
        });
    }

    /// cos and sin of each rope angle for positions start .. start + count - 1: [count, rope_dims],
    /// (cos, sin) of pair i at columns 2i, 2i + 1; the angle stepped in float from the position as
    /// ggml does. Computed once a forward and shared by every block's queries and keys.
    RowMatrix rope_angles(int start, Eigen::Index count) const {
        const float theta_scale = std::pow(config_.rope_base, -2.0f / static_cast<float>(config_.rope_dims));
        RowMatrix angles(count, config_.rope_dims);
        for (Eigen::Index r = 0; r < count; ++r) {
            float theta = static_cast<float>(start + r);
            for (int i = 0; i < config_.rope_dims; i += 2) {
                angles(r, i) = std::cos(theta);
                angles(r, i + 1) = std::sin(theta);
                theta *= theta_scale;
            }
        }
        return angles;
    }

    /// ggml's normal rope on `heads` heads of head_dim starting at column `first` of each row of m, row r
    /// rotated by the angles of row r of `angles` (rope_angles).
    void rope(RowMatrix& m, int first, int heads, const RowMatrix& angles) const {
        for (Eigen::Index r = 0; r < m.rows(); ++r)
            for (int head = 0; head < heads; ++head) {
                float* v = m.row(r).data() + first + head * config_.head_dim;
                for (int i = 0; i < config_.rope_dims; i += 2) {
                    const float c = angles(r, i), s = angles(r, i + 1);
                    const float x0 = v[i], x1 = v[i + 1];
                    v[i] = x0 * c - x1 * s;
                    v[i + 1] = x0 * s + x1 * c;
                }
            }
    }

    /// Causal grouped-query attention of the new rows' queries (qkv's first columns) over cached
    /// positions [0, start + rows). The work is split into (head, block of 64 query rows) tasks over
    /// lowbit's threads; a block reads only the keys its last row sees (the causal triangle's blocks
    /// above the diagonal are never computed). out [rows, embedding_length].
    void attend(const RowMatrix& qkv, const RowMatrix& keys, const RowMatrix& values, int start, RowMatrix& out) const {
        constexpr Eigen::Index block_rows = 64;
        const Eigen::Index rows = qkv.rows();
        const Eigen::Index blocks = (rows + block_rows - 1) / block_rows;
        const int d = config_.head_dim;
        const int group = config_.head_count / config_.head_count_kv;
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        const auto tasks = static_cast<std::size_t>(config_.head_count * blocks);
        lowbit::detail::parallel_for(tasks, 1, [&](std::size_t begin, std::size_t end) {
            RowMatrix scores;
            for (std::size_t task = begin; task < end; ++task) {
                const auto head = static_cast<Eigen::Index>(task) / blocks;
                const Eigen::Index first = static_cast<Eigen::Index>(task) % blocks * block_rows;
                const Eigen::Index count = std::min(block_rows, rows - first);
                const Eigen::Index seen = start + first + count;  // keys visible to the block's last row
                const Eigen::Index q_col = head * d, kv_col = head / group * d;
                scores.noalias() = qkv.block(first, q_col, count, d) * keys.block(0, kv_col, seen, d).transpose();
                for (Eigen::Index r = 0; r < count; ++r) {
                    const Eigen::Index visible = start + first + r + 1;
                    auto row = scores.row(r).head(visible);
                    row *= scale;
                    const float max = row.maxCoeff();
                    row = (row.array() - max).exp();
                    row /= row.sum();
                    scores.row(r).tail(seen - visible).setZero();
                }
                out.block(first, q_col, count, d).noalias() = scores * values.block(0, kv_col, seen, d);
            }
        });
    }

    lowbit::GgufFile file_;
    lowbit::Activations activations_ = lowbit::Activations::f32;
    LlamaConfig config_;
    std::vector<Block> blocks_;
    Eigen::RowVectorXf output_norm_;
    Projection head_;
};

}  // namespace llm
