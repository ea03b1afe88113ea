// examples/llm: the byte-level BPE tokenizer (pre-tokenizer worked examples, merges by rank, special
// tokens, decoding) and the llama forward on a tiny random GGUF this test writes (every tensor f32, or
// the projections Q8_0 / Q4_1): the cached forward token by token equals the whole-sequence forward, and
// both match a naive double-precision forward written out here; a projection of k-quant tensors (groups
// of 16) against its float product; the bad inputs the runner names.
// The real SmolLM2 checks (llama.cpp's token ids and greedy text) are lowbit-llm --check (ctest
// example.llm).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <lowbit/io.hpp>

#include "io/io_support.hpp"
#include "llm/bpe_tokenizer.hpp"
#include "llm/chat_template.hpp"
#include "llm/llama.hpp"
#include "llm/perplexity.hpp"
#include "llm/sampling.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using llm::RowMatrix;
using lowbit::test::ByteWriter;
using lowbit::test::GgufBuilder;

constexpr std::uint32_t gguf_u32 = 4, gguf_i32 = 5, gguf_f32 = 6, gguf_bool = 7, gguf_array = 9;
constexpr std::uint32_t ggml_f32 = 0, ggml_q4_1 = 3, ggml_q8_0 = 8;

std::vector<std::byte> string_array(const std::vector<std::string>& values) {
    ByteWriter w;
    w.put<std::uint32_t>(8).put<std::uint64_t>(values.size());
    for (const auto& value : values) w.put_string(value);
    return w.bytes;
}

std::vector<std::byte> i32_array(const std::vector<int>& values) {
    ByteWriter w;
    w.put<std::uint32_t>(gguf_i32).put<std::uint64_t>(values.size());
    for (const int value : values) w.put<std::int32_t>(value);
    return w.bytes;
}

/// GPT-2's byte symbol of b (bytes_to_unicode).
std::string byte_symbol(int b) {
    std::string symbol;
    llm::unicode::append_utf8(symbol, llm::unicode::byte_to_code_point()[static_cast<std::size_t>(b)]);
    return symbol;
}

/// A vocabulary: <|endoftext|> (control), the 256 byte symbols, then the merged tokens of `merges`.
struct TinyVocabulary {
    std::vector<std::string> tokens{"<|endoftext|>"};
    std::vector<int> types{3};
    std::vector<std::string> merges;

    TinyVocabulary() {
        for (int b = 0; b < 256; ++b) tokens.push_back(byte_symbol(b)), types.push_back(1);
        for (const std::string merge : {"h e", "l l", "he ll", "hell o", "Ġ hello", "Ġ w", "o r"}) {
            merges.push_back(merge);
            std::string joined = merge;
            joined.erase(joined.find(' '), 1);
            tokens.push_back(joined), types.push_back(1);
        }
    }
    int id(const std::string& token) const {
        for (std::size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i] == token) return static_cast<int>(i);
        throw std::logic_error("no token " + token);
    }
    void write(GgufBuilder& builder) const {
        builder.kv_string("tokenizer.ggml.model", "gpt2")
            .kv_string("tokenizer.ggml.pre", "smollm")
            .kv("tokenizer.ggml.tokens", gguf_array, string_array(tokens))
            .kv("tokenizer.ggml.token_type", gguf_array, i32_array(types))
            .kv("tokenizer.ggml.merges", gguf_array, string_array(merges));
    }
};

std::vector<std::string> words(const std::string& text) {
    std::vector<std::string_view> views;
    llm::pre_tokenize(text, true, views);
    return {views.begin(), views.end()};
}

// ---- the tiny llama model ----

constexpr int embd = 64, heads = 4, kv_heads = 2, head_dim = 16, ff = 96, blocks = 2;
constexpr float rope_base = 10000.0f, eps = 1e-5f;

std::vector<std::byte> f32_bytes(const RowMatrix& m) {
    std::vector<std::byte> bytes(static_cast<std::size_t>(m.size()) * 4);
    std::memcpy(bytes.data(), m.data(), bytes.size());
    return bytes;
}

/// Q8_0 blocks of m (rows of a multiple of 32): d = max|x| / 127 as f16, q = round(x / d).
std::vector<std::byte> q8_0_bytes(const RowMatrix& m) {
    ByteWriter w;
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index g = 0; g < m.cols(); g += 32) {
            const float amax = m.row(r).segment(g, 32).cwiseAbs().maxCoeff();
            const std::uint16_t d16 = lowbit::io_detail::float_to_f16(amax / 127.0f);
            const float d = lowbit::io_detail::f16_to_float(d16);
            w.put<std::uint16_t>(d16);
            for (Eigen::Index j = 0; j < 32; ++j)
                w.put<std::int8_t>(static_cast<std::int8_t>(std::clamp(std::lround(m(r, g + j) / d), -127L, 127L)));
        }
    return w.bytes;
}

/// Q4_1 blocks of m: min and (max - min) / 15 as f16, q = round((x - min) / d).
std::vector<std::byte> q4_1_bytes(const RowMatrix& m) {
    ByteWriter w;
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index g = 0; g < m.cols(); g += 32) {
            const auto block = m.row(r).segment(g, 32);
            const std::uint16_t d16 = lowbit::io_detail::float_to_f16((block.maxCoeff() - block.minCoeff()) / 15.0f);
            const std::uint16_t m16 = lowbit::io_detail::float_to_f16(block.minCoeff());
            const float d = lowbit::io_detail::f16_to_float(d16), min = lowbit::io_detail::f16_to_float(m16);
            w.put<std::uint16_t>(d16).put<std::uint16_t>(m16);
            const auto code = [&](Eigen::Index j) {
                return static_cast<int>(std::clamp(std::lround((block[j] - min) / d), 0L, 15L));
            };
            for (Eigen::Index j = 0; j < 16; ++j)
                w.put<std::uint8_t>(static_cast<std::uint8_t>(code(j) | code(j + 16) << 4));
        }
    return w.bytes;
}

struct TinyModel {
    TinyVocabulary vocabulary;
    std::vector<std::byte> bytes;
};

/// A random tiny llama GGUF; projections stored as `projection_type` (f32, q8_0 or q4_1). `edit` may
/// change the builder's inputs before it is built (for the bad-input cases).
struct TinyModelSpec {
    std::uint32_t projection_type = ggml_f32;
    std::string architecture = "llama";
    std::uint32_t head_count = heads;
    std::string skip_tensor;
    std::string misshapen_tensor;
};

TinyModel make_tiny_model(const TinyModelSpec& spec) {
    TinyModel model;
    auto rng = lowbit::test::make_rng(4242);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    const auto random = [&](Eigen::Index rows, Eigen::Index cols) {
        RowMatrix m(rows, cols);
        for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
        return m;
    };
    const int vocab = static_cast<int>(model.vocabulary.tokens.size());
    GgufBuilder builder;
    builder.kv_string("general.architecture", spec.architecture)
        .kv_scalar<std::uint32_t>("llama.block_count", gguf_u32, blocks)
        .kv_scalar<std::uint32_t>("llama.embedding_length", gguf_u32, embd)
        .kv_scalar<std::uint32_t>("llama.feed_forward_length", gguf_u32, ff)
        .kv_scalar<std::uint32_t>("llama.attention.head_count", gguf_u32, spec.head_count)
        .kv_scalar<std::uint32_t>("llama.attention.head_count_kv", gguf_u32, kv_heads)
        .kv_scalar<std::uint32_t>("llama.context_length", gguf_u32, 64)
        .kv_scalar<float>("llama.attention.layer_norm_rms_epsilon", gguf_f32, eps)
        .kv_scalar<float>("llama.rope.freq_base", gguf_f32, rope_base)
        .kv_scalar<std::uint8_t>("tokenizer.ggml.add_bos_token", gguf_bool, 0);
    model.vocabulary.write(builder);
    const auto add = [&](const std::string& name, const RowMatrix& m, bool projection) {
        if (name == spec.skip_tensor) return;
        std::vector<std::uint64_t> dims{static_cast<std::uint64_t>(m.cols()), static_cast<std::uint64_t>(m.rows())};
        if (m.rows() == 1) dims.pop_back();
        if (name == spec.misshapen_tensor) dims[0] += 32;
        const std::uint32_t type = projection ? spec.projection_type : ggml_f32;
        const RowMatrix padded = name == spec.misshapen_tensor ? RowMatrix::Zero(m.rows(), m.cols() + 32) : m;
        builder.tensor(name, dims, type,
                       type == ggml_q8_0   ? q8_0_bytes(padded)
                       : type == ggml_q4_1 ? q4_1_bytes(padded)
                                           : f32_bytes(padded));
    };
    add("token_embd.weight", random(vocab, embd), false);
    for (int b = 0; b < blocks; ++b) {
        const std::string p = "blk." + std::to_string(b) + ".";
        add(p + "attn_norm.weight", (random(1, embd).array() + 1.0f).matrix(), false);
        add(p + "ffn_norm.weight", (random(1, embd).array() + 1.0f).matrix(), false);
        add(p + "attn_q.weight", random(embd, embd), true);
        add(p + "attn_k.weight", random(kv_heads * head_dim, embd), true);
        add(p + "attn_v.weight", random(kv_heads * head_dim, embd), true);
        add(p + "attn_output.weight", random(embd, embd), true);
        add(p + "ffn_gate.weight", random(ff, embd), true);
        add(p + "ffn_up.weight", random(ff, embd), true);
        add(p + "ffn_down.weight", random(embd, ff), true);
    }
    add("output_norm.weight", (random(1, embd).array() + 1.0f).matrix(), false);
    model.bytes = builder.build();
    return model;
}

/// The llama forward written out plainly in double from the file's float weights (to_matrix), all
/// tokens at once, no cache: logits [tokens, vocab].
Eigen::MatrixXd naive_forward(const lowbit::GgufFile& file, const std::vector<std::int32_t>& tokens) {
    using Matrix = Eigen::MatrixXd;
    const auto weight = [&](const std::string& name) -> Matrix { return file.to_matrix(name).cast<double>(); };
    const auto n = static_cast<Eigen::Index>(tokens.size());
    const Matrix table = weight("token_embd.weight");
    Matrix x(n, embd);
    for (Eigen::Index t = 0; t < n; ++t) x.row(t) = table.row(tokens[static_cast<std::size_t>(t)]);
    const auto norm = [&](const Matrix& in, const Matrix& w) {
        Matrix out(in.rows(), in.cols());
        for (Eigen::Index t = 0; t < in.rows(); ++t)
            out.row(t) = in.row(t).array() / std::sqrt(in.row(t).squaredNorm() / embd + eps) * w.row(0).array();
        return out;
    };
    const auto rope = [&](Matrix& m, int count) {
        for (Eigen::Index t = 0; t < m.rows(); ++t)
            for (int h = 0; h < count; ++h)
                for (int i = 0; i < head_dim; i += 2) {
                    const double angle =
                        static_cast<double>(t) * std::pow(double{rope_base}, -static_cast<double>(i) / head_dim);
                    double& a = m(t, h * head_dim + i);
                    double& b = m(t, h * head_dim + i + 1);
                    const double a0 = a, b0 = b;
                    a = a0 * std::cos(angle) - b0 * std::sin(angle);
                    b = a0 * std::sin(angle) + b0 * std::cos(angle);
                }
    };
    for (int b = 0; b < blocks; ++b) {
        const std::string p = "blk." + std::to_string(b) + ".";
        Matrix h = norm(x, weight(p + "attn_norm.weight"));
        Matrix q = h * weight(p + "attn_q.weight").transpose();
        Matrix k = h * weight(p + "attn_k.weight").transpose();
        const Matrix v = h * weight(p + "attn_v.weight").transpose();
        rope(q, heads), rope(k, kv_heads);
        Matrix attention(n, embd);
        for (int head = 0; head < heads; ++head) {
            const int kv = head / (heads / kv_heads);
            for (Eigen::Index t = 0; t < n; ++t) {
                Eigen::VectorXd score(t + 1);
                for (Eigen::Index s = 0; s <= t; ++s)
                    score[s] =
                        q.row(t).segment(head * head_dim, head_dim).dot(k.row(s).segment(kv * head_dim, head_dim)) /
                        std::sqrt(double{head_dim});
                score = (score.array() - score.maxCoeff()).exp();
                score /= score.sum();
                Eigen::RowVectorXd out = Eigen::RowVectorXd::Zero(head_dim);
                for (Eigen::Index s = 0; s <= t; ++s) out += score[s] * v.row(s).segment(kv * head_dim, head_dim);
                attention.row(t).segment(head * head_dim, head_dim) = out;
            }
        }
        x += attention * weight(p + "attn_output.weight").transpose();
        h = norm(x, weight(p + "ffn_norm.weight"));
        const Matrix gate = h * weight(p + "ffn_gate.weight").transpose();
        const Matrix up = h * weight(p + "ffn_up.weight").transpose();
        const Matrix act = (gate.array() / (1.0 + (-gate.array()).exp()) * up.array()).matrix();
        x += act * weight(p + "ffn_down.weight").transpose();
    }
    return norm(x, weight("output_norm.weight")) * table.transpose();
}

}  // namespace

TEST_CASE("llm pre-tokenizer: digits alone, GPT-2's pattern, spaces before words", "[llm]") {
    using V = std::vector<std::string>;
    CHECK(words("Hello world 12345, it's a test:  spaces\n\nnewline") == V{"Hello", " world", " ", "1", "2", "3", "4",
                                                                           "5", ",", " it", "'s", " a", " test", ":",
                                                                           " ", " spaces", "\n", "\n", "newline"});
    CHECK(words("we'll they're I've don't") == V{"we", "'ll", " they", "'re", " I", "'ve", " don", "'t"});
    CHECK(words("a  b   ") == V{"a", " ", " b", "   "});                              // trailing spaces: one word
    CHECK(words("x+=y;\t\tz") == V{"x", "+=", "y", ";", "\t", "\t", "z"});            // \s+(?!\S), then \s+
    CHECK(words("café Ωmega ½ ≥ 😀!") == V{"café", " Ωmega", " ", "½", " ≥", " 😀!"});  // ½ is a number, ≥ 😀 not letters
    CHECK(words("").empty());
}

TEST_CASE("llm BPE tokenizer: merges by rank, special tokens, bytes, decoding", "[llm]") {
    const TinyVocabulary v;
    GgufBuilder builder;
    v.write(builder);
    const auto bytes = builder.build();
    const auto file = lowbit::GgufFile::from_bytes(bytes);
    const auto tokenizer = llm::BpeTokenizer::from_gguf(file, "tiny.gguf");
    using Ids = std::vector<std::int32_t>;
    CHECK(tokenizer.encode("hello hello", false) == Ids{v.id("hello"), v.id("Ġhello")});
    // "world": "Ġ w" (rank 5) merges before "o r" (rank 6) would matter only if they overlapped; here
    // both apply, lowest rank first.
    CHECK(tokenizer.encode(" world", false) == Ids{v.id("Ġw"), v.id("or"), v.id("l"), v.id("d")});
    // "hel": h e merges, then no pair of the list is left.
    CHECK(tokenizer.encode("hel", false) == Ids{v.id("he"), v.id("l")});
    CHECK(tokenizer.encode("a<|endoftext|>b", true) == Ids{v.id("a"), 0, v.id("b")});
    CHECK(tokenizer.encode("a<|endoftext|>b", false).size() == 2 + std::string("<|endoftext|>").size());
    const std::string text = "Grüße, 東京! 😀 x\n\ty";
    const auto ids = tokenizer.encode(text, false);
    CHECK(tokenizer.decode(ids) == text);
    CHECK(tokenizer.decode(Ids{0}).empty());  // a control token decodes to nothing
    CHECK_THROWS_AS(tokenizer.decode(std::int32_t{100000}), std::out_of_range);
}

TEST_CASE("llm tokenizer and chat template: bad metadata is named", "[llm]") {
    TinyVocabulary v;
    GgufBuilder sentencepiece;
    sentencepiece.kv_string("tokenizer.ggml.model", "llama")
        .kv("tokenizer.ggml.tokens", gguf_array, string_array(v.tokens));
    const auto sentencepiece_bytes = sentencepiece.build();
    CHECK_THROWS_WITH(llm::BpeTokenizer::from_gguf(lowbit::GgufFile::from_bytes(sentencepiece_bytes), "m.gguf"),
                      ContainsSubstring("m.gguf") && ContainsSubstring("'llama'"));

    GgufBuilder wrong_pre;
    wrong_pre.kv_string("tokenizer.ggml.model", "gpt2").kv_string("tokenizer.ggml.pre", "qwen2");
    wrong_pre.kv("tokenizer.ggml.tokens", gguf_array, string_array(v.tokens))
        .kv("tokenizer.ggml.merges", gguf_array, string_array(v.merges));
    const auto pre_bytes = wrong_pre.build();
    CHECK_THROWS_WITH(llm::BpeTokenizer::from_gguf(lowbit::GgufFile::from_bytes(pre_bytes), "m.gguf"),
                      ContainsSubstring("m.gguf") && ContainsSubstring("'qwen2'"));

    GgufBuilder no_merges;
    no_merges.kv_string("tokenizer.ggml.model", "gpt2").kv("tokenizer.ggml.tokens", gguf_array, string_array(v.tokens));
    const auto merge_bytes = no_merges.build();
    CHECK_THROWS_WITH(llm::BpeTokenizer::from_gguf(lowbit::GgufFile::from_bytes(merge_bytes), "m.gguf"),
                      ContainsSubstring("tokenizer.ggml.merges") && ContainsSubstring("missing"));

    GgufBuilder short_types;
    short_types.kv_string("tokenizer.ggml.model", "gpt2")
        .kv("tokenizer.ggml.tokens", gguf_array, string_array(v.tokens))
        .kv("tokenizer.ggml.merges", gguf_array, string_array(v.merges))
        .kv("tokenizer.ggml.token_type", gguf_array, i32_array({1, 1}));
    const auto type_bytes = short_types.build();
    CHECK_THROWS_WITH(llm::BpeTokenizer::from_gguf(lowbit::GgufFile::from_bytes(type_bytes), "m.gguf"),
                      ContainsSubstring("token_type has 2 entries"));

    GgufBuilder chat;
    chat.kv_string("tokenizer.chat_template",
                   "{% for m in messages %}<|im_start|>system\nBe brief.<|im_end|>{% endfor %}");
    const auto chat_bytes = chat.build();
    const auto chat_template = llm::ChatTemplate::from_gguf(lowbit::GgufFile::from_bytes(chat_bytes), "c.gguf");
    CHECK(chat_template.apply("Hi") ==
          "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    GgufBuilder other_chat;
    other_chat.kv_string("tokenizer.chat_template", "[INST] {{ messages[0]['content'] }} [/INST]");
    const auto other_bytes = other_chat.build();
    CHECK_THROWS_WITH(llm::ChatTemplate::from_gguf(lowbit::GgufFile::from_bytes(other_bytes), "c.gguf"),
                      ContainsSubstring("not ChatML"));
}

TEST_CASE("llm llama forward: the cache token by token equals the whole sequence, both the naive double forward",
          "[llm]") {
    for (const std::uint32_t type : {ggml_f32, ggml_q8_0, ggml_q4_1}) {
        INFO("projection type " << type);
        TinyModelSpec spec;
        spec.projection_type = type;
        const TinyModel tiny = make_tiny_model(spec);
        const auto file = lowbit::GgufFile::from_bytes(tiny.bytes);
        // 70 tokens: attention's blocks of 64 query rows, a full one and a partial one.
        std::vector<std::int32_t> tokens{5, 200, 17, 263, 0, 99, 42, 42, 7, 250, 1, 128};
        for (std::int32_t i = 0; tokens.size() < 70; ++i) tokens.push_back((i * 97 + 13) % 264);
        const Eigen::MatrixXd expected = naive_forward(file, tokens);
        for (const auto activations : {lowbit::Activations::f32, lowbit::Activations::int8}) {
            INFO("activations " << (activations == lowbit::Activations::int8 ? "int8" : "f32"));
            const auto model = llm::LlamaModel::from_gguf(file, "tiny.gguf", activations);
            llm::KvCache whole_cache(model.config(), 80);
            const RowMatrix whole = model.forward(tokens, whole_cache, 0);
            REQUIRE(whole.rows() == static_cast<Eigen::Index>(tokens.size()));
            llm::KvCache step_cache(model.config(), 80);
            RowMatrix steps(whole.rows(), whole.cols());
            // Three tokens at once, then one at a time: the cache carries the rest.
            steps.topRows(3) = model.forward(std::span(tokens).first(3), step_cache, 0);
            for (std::size_t t = 3; t < tokens.size(); ++t)
                steps.row(static_cast<Eigen::Index>(t)) = model.forward(std::span(tokens).subspan(t, 1), step_cache, 0);
            const double scale = expected.cwiseAbs().maxCoeff();
            const Eigen::MatrixXd error = whole.cast<double>() - expected;
            if (activations == lowbit::Activations::f32) {
                CHECK(error.cwiseAbs().maxCoeff() <= 5e-5 * scale);
            } else {
                // int8 activations: N11's bound on each projection, compounded through two random blocks;
                // the real model's check is lowbit-llm's perplexity (within 1 % of f32's).
                INFO("relative error " << error.norm() / expected.norm());
                CHECK(error.norm() <= 0.1 * expected.norm());
            }
            if (activations == lowbit::Activations::f32) {
                // Sums in another order (and, with buffers aligned differently from run to run, a vector
                // loop's peeling too): float rounding apart, amplified by the random blocks to ~1e-5.
                CHECK((steps - whole).cwiseAbs().maxCoeff() <= 1e-4 * scale);
            } else {
                // One row against 70: the int8 GEMV and GEMM sum in other orders, and an activation one
                // ulp apart can round to the neighbouring int8 code, which the random blocks amplify.
                INFO("relative difference " << (steps - whole).norm() / whole.norm());
                CHECK((steps - whole).norm() <= 1e-2 * whole.norm());
            }
            // Logits of the last tokens only: the same rows.
            llm::KvCache tail_cache(model.config(), 80);
            const RowMatrix tail = model.forward(tokens, tail_cache, tokens.size() - 2);
            CHECK((tail - whole.bottomRows(2)).cwiseAbs().maxCoeff() <= 1e-4 * scale);
        }
    }
}

TEST_CASE("llm forward at 1 and 2 threads, around each split's grain", "[llm][threads]") {
    // The splits: attention in (head, 64-row block) tasks; RMSNorm by ranges of 256 rows of 64 values
    // and SwiGLU of 170 rows of 96 (16K values a range); the projections by lowbit's own kernels.
    const TinyModel tiny = make_tiny_model({});
    const auto file = lowbit::GgufFile::from_bytes(tiny.bytes);
    for (const auto activations : {lowbit::Activations::f32, lowbit::Activations::int8}) {
        const auto model = llm::LlamaModel::from_gguf(file, "tiny.gguf", activations);
        for (const std::size_t count : {1, 63, 65, 169, 171, 255, 257}) {
            INFO("tokens " << count << ", activations " << (activations == lowbit::Activations::int8 ? "int8" : "f32"));
            std::vector<std::int32_t> tokens(count);
            for (std::size_t i = 0; i < count; ++i) tokens[i] = static_cast<std::int32_t>((i * 61 + 5) % 264);
            RowMatrix logits[2];
            for (const int threads : {1, 2}) {
                const lowbit::test::ThreadCountGuard guard(threads);
                llm::KvCache cache(model.config(), 260);
                logits[threads - 1] = model.forward(tokens, cache, 0);
            }
            const double scale = logits[0].cwiseAbs().maxCoeff();
            if (activations == lowbit::Activations::f32)
                CHECK((logits[1] - logits[0]).cwiseAbs().maxCoeff() <= 1e-4 * scale);
            else
                CHECK((logits[1] - logits[0]).norm() <= 1e-2 * logits[0].norm());
        }
    }
}

/// `blocks` k-quant super-blocks of `block_bytes` bytes: random bytes, the f16 fields at `f16_offsets`
/// set to small random scales (either sign).
std::vector<std::byte> random_kquant(std::mt19937_64& rng, std::size_t block_bytes,
                                     std::initializer_list<std::size_t> f16_offsets, std::size_t blocks) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
    std::vector<std::byte> bytes(block_bytes * blocks);
    for (auto& b : bytes) b = static_cast<std::byte>(byte(rng));
    for (std::size_t b = 0; b < blocks; ++b)
        for (const std::size_t offset : f16_offsets) {
            const std::uint16_t bits = lowbit::io_detail::float_to_f16(scale(rng));
            std::memcpy(bytes.data() + b * block_bytes + offset, &bits, 2);
        }
    return bytes;
}

TEST_CASE("llm projection: q2_K, q3_K and q6_K run as affine groups of 16, neighbours of one format stacked", "[llm]") {
    auto rng = lowbit::test::make_rng(4343);
    constexpr std::uint32_t q2_k = 10, q3_k = 11, q6_k = 14;
    constexpr std::size_t in = 512, superblocks_per_row = in / 256;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    RowMatrix q4_weight(8, in);
    for (Eigen::Index i = 0; i < q4_weight.size(); ++i) q4_weight.data()[i] = normal(rng);
    const auto bytes = GgufBuilder{}
                           .tensor("a", {in, 8}, q6_k, random_kquant(rng, 210, {208}, 8 * superblocks_per_row))
                           .tensor("b", {in, 24}, q6_k, random_kquant(rng, 210, {208}, 24 * superblocks_per_row))
                           .tensor("c", {in, 16}, q3_k, random_kquant(rng, 110, {108}, 16 * superblocks_per_row))
                           .tensor("d", {in, 8}, q2_k, random_kquant(rng, 84, {80, 82}, 8 * superblocks_per_row))
                           .tensor("e", {in, 8}, ggml_q4_1, q4_1_bytes(q4_weight))
                           .build();
    const auto file = lowbit::GgufFile::from_bytes(bytes);
    const std::vector<std::string> names{"a", "b", "c", "d", "e"};
    const auto projection = llm::Projection::from_gguf(file, "k.gguf", names, in);
    CHECK(projection.runs_as() == "affine g16 6-bit + affine g16 4-bit + affine g16 2-bit + affine g32 4-bit");
    CHECK(projection.outputs() == std::vector<Eigen::Index>{8, 24, 16, 8, 8});
    RowMatrix weight(64, in);
    Eigen::Index row = 0;
    for (const auto& name : names) {
        const RowMatrix part = file.to_matrix(name);
        weight.middleRows(row, part.rows()) = part;
        row += part.rows();
    }
    RowMatrix x(3, in);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    const Eigen::MatrixXd expected = x.cast<double>() * weight.cast<double>().transpose();
    const double scale = expected.cwiseAbs().maxCoeff();
    const Eigen::MatrixXd f32 = projection.forward(x, lowbit::Activations::f32).cast<double>();
    CHECK((f32 - expected).cwiseAbs().maxCoeff() <= 1e-5 * scale);
    const Eigen::MatrixXd int8 = projection.forward(x, lowbit::Activations::int8).cast<double>();
    CHECK((int8 - expected).cwiseAbs().maxCoeff() <= 3e-2 * scale);
}

TEST_CASE("llm perplexity and sampling on the tiny model", "[llm]") {
    const TinyModel tiny = make_tiny_model({});
    const auto file = lowbit::GgufFile::from_bytes(tiny.bytes);
    const auto model = llm::LlamaModel::from_gguf(file, "tiny.gguf", lowbit::Activations::f32);
    std::vector<std::int32_t> tokens(40);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 37) % 264);
    // Context 8: 5 chunks, positions 4..6 of each scored (3 per chunk).
    const auto result = llm::perplexity(model, tokens, 8, 0, -1, false);
    CHECK(result.chunks == 5);
    CHECK(result.scored_tokens == 15);
    double nll = 0;
    for (std::size_t chunk = 0; chunk < 5; ++chunk) {
        llm::KvCache cache(model.config(), 8);
        const RowMatrix logits = model.forward(std::span(tokens).subspan(8 * chunk, 8), cache, 0);
        for (std::size_t i = 4; i < 7; ++i) {
            const Eigen::RowVectorXd row = logits.row(static_cast<Eigen::Index>(i)).cast<double>();
            nll -=
                row[tokens[8 * chunk + i + 1]] - row.maxCoeff() - std::log((row.array() - row.maxCoeff()).exp().sum());
        }
    }
    CHECK(std::abs(result.perplexity - std::exp(nll / 15)) <= 1e-4 * result.perplexity);
    CHECK_THROWS_WITH(llm::perplexity(model, tokens, 24, 0, -1, false), ContainsSubstring("at least 48"));

    Eigen::RowVectorXf logits(5);
    logits << 1.0f, 3.0f, 3.0f, -1.0f, 2.0f;
    CHECK(llm::greedy(logits) == 1);  // the first largest
    llm::Sampler top(1.0f, 0.01f, 7);
    for (int i = 0; i < 20; ++i) CHECK(top(logits) == 1);  // top-p this small keeps only the first largest
    llm::Sampler wide(1.0f, 1.0f, 7);
    std::vector<int> seen(5);
    for (int i = 0; i < 2000; ++i) ++seen[static_cast<std::size_t>(wide(logits))];
    CHECK(seen[1] > seen[4]);
    CHECK(seen[4] > seen[0]);
    CHECK_THROWS_AS(llm::Sampler(1.0f, 0.0f, 1), std::invalid_argument);
}

TEST_CASE("fuzz seeds: tiny llama GGUF files for fuzz_llm", "[llm][fuzz-seeds]") {
    // The seeds load; with LOWBIT_FUZZ_CORPUS set they are also written there for the fuzzer.
    std::vector<std::vector<std::byte>> seeds;
    for (const std::uint32_t type : {ggml_f32, ggml_q4_1}) {
        TinyModelSpec spec;
        spec.projection_type = type;
        seeds.push_back(make_tiny_model(spec).bytes);
        const auto file = lowbit::GgufFile::from_bytes(seeds.back());
        CHECK_NOTHROW(llm::LlamaModel::from_gguf(file, "seed", lowbit::Activations::f32));
        CHECK_NOTHROW(llm::BpeTokenizer::from_gguf(file, "seed"));
    }
    const char* root = std::getenv("LOWBIT_FUZZ_CORPUS");
    if (root == nullptr || *root == '\0') return;
    const std::filesystem::path dir = std::filesystem::path(root) / "llm";
    std::filesystem::create_directories(dir);
    for (std::size_t i = 0; i < seeds.size(); ++i)
        lowbit::test::write_file(dir / ("seed-" + std::to_string(i)), seeds[i]);
}

TEST_CASE("llm bad model files and inputs are named", "[llm]") {
    const auto refused = [](const TinyModelSpec& spec) {
        const TinyModel tiny = make_tiny_model(spec);
        const auto file = lowbit::GgufFile::from_bytes(tiny.bytes);
        try {
            (void)llm::LlamaModel::from_gguf(file, "bad.gguf", lowbit::Activations::f32);
        } catch (const llm::ModelError& error) {
            return std::string(error.what());
        }
        return std::string("accepted");
    };
    TinyModelSpec spec;
    spec.architecture = "gpt2";
    CHECK_THAT(refused(spec), ContainsSubstring("bad.gguf") && ContainsSubstring("'gpt2'"));
    spec = {};
    spec.head_count = 5;
    CHECK_THAT(refused(spec), ContainsSubstring("head_count"));
    spec = {};
    spec.skip_tensor = "blk.1.ffn_up.weight";
    CHECK_THAT(refused(spec), ContainsSubstring("'blk.1.ffn_up.weight' is missing"));
    spec = {};
    spec.misshapen_tensor = "blk.0.attn_k.weight";
    CHECK_THAT(refused(spec), ContainsSubstring("'blk.0.attn_k.weight' has shape [96, 32]"));

    const TinyModel tiny = make_tiny_model({});
    const auto file = lowbit::GgufFile::from_bytes(tiny.bytes);
    const auto model = llm::LlamaModel::from_gguf(file, "tiny.gguf", lowbit::Activations::f32);
    llm::KvCache cache(model.config(), 4);
    const std::vector<std::int32_t> five{1, 2, 3, 4, 5};
    CHECK_THROWS_WITH(model.forward(five, cache, 0), ContainsSubstring("exceed the context of 4"));
    const std::vector<std::int32_t> outside{1, 9999};
    CHECK_THROWS_WITH(model.forward(outside, cache, 0), ContainsSubstring("row 9999"));
}
