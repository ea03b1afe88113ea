// examples/minilm: the BERT WordPiece tokenizer on worked examples, the Eigen BERT forward against a
// naive padded-and-masked forward on a tiny random model this test writes itself, their bad-input
// errors, and (when tools/install-deps has fetched all-MiniLM-L6-v2) the real model against the
// reference vectors tools/gen_minilm_reference.py computed with transformers.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <lowbit/io.hpp>

#include "data/minilm_reference.hpp"
#include "io/io_support.hpp"
#include "minilm/bert.hpp"
#include "minilm/distill.hpp"
#include "minilm/tokenizer.hpp"
#include "support/random.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using minilm::RowMatrix;

const std::vector<std::string> tiny_vocabulary{
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox", "un", "##aff", "##able", "caf", "##e",
    "creme", ",", ".", "!", "'", "東", "京", "て", "##す", "a", "b", "ß"};

std::vector<std::string> pieces(const minilm::WordPieceTokenizer& tokenizer, const std::string& text) {
    std::vector<std::string> out;
    for (const auto id : tokenizer.word_pieces(text)) out.push_back(tokenizer.token(id));
    return out;
}

}  // namespace

TEST_CASE("minilm tokenizer: worked examples", "[minilm]") {
    const minilm::WordPieceTokenizer tokenizer(tiny_vocabulary);
    using V = std::vector<std::string>;
    CHECK(pieces(tokenizer, "The quick brown fox.") == V{"the", "quick", "brown", "fox", "."});
    CHECK(pieces(tokenizer, "UNaffable!") == V{"un", "##aff", "##able", "!"});  // greedy longest match
    CHECK(pieces(tokenizer, "Café CRÈME") == V{"caf", "##e", "creme"});         // lower-case, accents stripped
    CHECK(pieces(tokenizer, "a,b'a") == V{"a", ",", "b", "'", "a"});              // punctuation splits
    CHECK(pieces(tokenizer, "東京です") == V{"東", "京", "て", "##す"});           // ideographs split, dakuten dropped
    CHECK(pieces(tokenizer, "fox unknown foxes") == V{"fox", "[UNK]", "[UNK]"});  // no match: the whole word is [UNK]
    CHECK(pieces(tokenizer, "a\xC2\xA0" "b\tc\x01" "a") == V{"a", "b", "[UNK]"});  // NBSP and tab split, control dropped
    CHECK(pieces(tokenizer, "STRASSE ß") == V{"[UNK]", "ß"});
    CHECK(pieces(tokenizer, std::string(101, 'a')) == V{"[UNK]"});  // over 100 characters
    CHECK(tokenizer.basic_tokens("Zoë's naïve Ωmega") == V{"zoe", "'", "s", "naive", "ωmega"});
}

TEST_CASE("minilm tokenizer: [CLS]/[SEP], truncation, empty text, invalid UTF-8", "[minilm]") {
    const minilm::WordPieceTokenizer tokenizer(tiny_vocabulary);
    const auto full = tokenizer.encode("the quick brown fox", 256);
    CHECK(full.ids == std::vector<std::int32_t>{2, 5, 6, 7, 8, 3});
    CHECK_FALSE(full.truncated);
    const auto cut = tokenizer.encode("the quick brown fox", 5);
    CHECK(cut.ids == std::vector<std::int32_t>{2, 5, 6, 7, 3});
    CHECK(cut.truncated);
    CHECK(tokenizer.encode("the quick brown fox", 6).truncated == false);
    CHECK(tokenizer.encode("", 256).ids == std::vector<std::int32_t>{2, 3});
    CHECK(tokenizer.encode(" \t\n", 256).ids == std::vector<std::int32_t>{2, 3});
    CHECK_THROWS_AS(tokenizer.encode("a", 1), minilm::TokenizerError);
    CHECK_THROWS_WITH(tokenizer.encode("ab\xFF", 256), ContainsSubstring("invalid UTF-8 at byte 2"));
    CHECK_THROWS_AS(tokenizer.encode("\xC3", 256), minilm::TokenizerError);          // cut sequence
    CHECK_THROWS_AS(tokenizer.encode("\xC0\xAF", 256), minilm::TokenizerError);      // overlong
    CHECK_THROWS_AS(tokenizer.encode("\xED\xA0\x80", 256), minilm::TokenizerError);  // surrogate
}

TEST_CASE("minilm tokenizer: bad vocabularies", "[minilm]") {
    CHECK_THROWS_WITH(minilm::WordPieceTokenizer(std::vector<std::string>{"[PAD]", "[CLS]", "[SEP]"}),
                      ContainsSubstring("has no [UNK]"));
    CHECK_THROWS_WITH(minilm::WordPieceTokenizer(std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "a"}),
                      ContainsSubstring("repeats the token 'a' (line 6)"));
    CHECK_THROWS_AS(minilm::WordPieceTokenizer(std::vector<std::string>{}), minilm::TokenizerError);
    CHECK_THROWS_AS(minilm::WordPieceTokenizer::from_file("/nonexistent/vocab.txt"), minilm::TokenizerError);
}

namespace {

constexpr int tiny_hidden = 64, tiny_heads = 4, tiny_ffn = 128, tiny_layers = 2, tiny_positions = 12;

struct TinyBert {
    minilm::BertConfig config;
    std::map<std::string, RowMatrix> tensors;  // vectors as [1, n]
};

TinyBert make_tiny_bert(std::mt19937_64& rng) {
    TinyBert bert;
    bert.config.vocab_size = static_cast<int>(tiny_vocabulary.size());
    bert.config.hidden_size = tiny_hidden;
    bert.config.num_layers = tiny_layers;
    bert.config.num_heads = tiny_heads;
    bert.config.intermediate_size = tiny_ffn;
    bert.config.max_position_embeddings = tiny_positions;
    bert.config.type_vocab_size = 2;
    auto random = [&](Eigen::Index rows, Eigen::Index cols, float low, float high) {
        const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(rows * cols), low, high);
        return RowMatrix(Eigen::Map<const RowMatrix>(values.data(), rows, cols));
    };
    bert.tensors["embeddings.word_embeddings.weight"] = random(bert.config.vocab_size, tiny_hidden, -1, 1);
    bert.tensors["embeddings.position_embeddings.weight"] = random(tiny_positions, tiny_hidden, -0.5f, 0.5f);
    bert.tensors["embeddings.token_type_embeddings.weight"] = random(2, tiny_hidden, -0.5f, 0.5f);
    auto norm = [&](const std::string& name) {
        bert.tensors[name + ".weight"] = random(1, tiny_hidden, 0.5f, 1.5f);
        bert.tensors[name + ".bias"] = random(1, tiny_hidden, -0.2f, 0.2f);
    };
    auto linear = [&](const std::string& name, int out, int in) {
        const float limit = 1.0f / std::sqrt(static_cast<float>(in));
        bert.tensors[name + ".weight"] = random(out, in, -2 * limit, 2 * limit);
        bert.tensors[name + ".bias"] = random(1, out, -0.1f, 0.1f);
    };
    norm("embeddings.LayerNorm");
    for (int l = 0; l < tiny_layers; ++l) {
        const std::string p = "encoder.layer." + std::to_string(l) + ".";
        linear(p + "attention.self.query", tiny_hidden, tiny_hidden);
        linear(p + "attention.self.key", tiny_hidden, tiny_hidden);
        linear(p + "attention.self.value", tiny_hidden, tiny_hidden);
        linear(p + "attention.output.dense", tiny_hidden, tiny_hidden);
        norm(p + "attention.output.LayerNorm");
        linear(p + "intermediate.dense", tiny_ffn, tiny_hidden);
        linear(p + "output.dense", tiny_hidden, tiny_ffn);
        norm(p + "output.LayerNorm");
    }
    return bert;
}

std::string config_json(const minilm::BertConfig& c) {
    return "{\"architectures\": [\"BertModel\"], \"hidden_act\": \"gelu\", \"hidden_size\": " + std::to_string(c.hidden_size) +
           ", \"intermediate_size\": " + std::to_string(c.intermediate_size) + ", \"layer_norm_eps\": 1e-12" +
           ", \"max_position_embeddings\": " + std::to_string(c.max_position_embeddings) +
           ", \"num_attention_heads\": " + std::to_string(c.num_heads) + ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
           ", \"type_vocab_size\": " + std::to_string(c.type_vocab_size) + ", \"vocab_size\": " + std::to_string(c.vocab_size) + "}";
}

void write_model(const TinyBert& bert, const std::filesystem::path& dir, const std::string& skip = "") {
    lowbit::SafetensorsWriter writer;
    for (const auto& [name, m] : bert.tensors) {
        if (name == skip) continue;
        if (m.rows() == 1 && name.find("embeddings.weight") == std::string::npos)
            writer.add(name, Eigen::VectorXf(m.row(0).transpose()));
        else
            writer.add(name, m);
    }
    writer.write(dir / "model.safetensors");
    lowbit::test::write_text(dir / "config.json", config_json(bert.config));
}

/// The textbook forward in double on a padded batch: additive mask -1e30 on padded keys, mean pooling
/// over the mask, weights taken as given (float or dequantized).
RowMatrix naive_embeddings(const TinyBert& bert, const std::vector<std::vector<std::int32_t>>& batch,
                           const std::map<std::string, RowMatrix>& weights) {
    using MatrixD = Eigen::MatrixXd;
    std::size_t longest = 0;
    for (const auto& s : batch) longest = std::max(longest, s.size());
    const auto T = static_cast<Eigen::Index>(longest);
    const auto& t = bert.tensors;
    auto vec = [&](const std::string& name) { return Eigen::RowVectorXd(t.at(name).row(0).cast<double>()); };
    auto layer_norm = [&](MatrixD x, const std::string& name) {
        for (Eigen::Index r = 0; r < x.rows(); ++r) {
            const double mean = x.row(r).mean();
            const double var = (x.row(r).array() - mean).square().mean();
            x.row(r) = ((x.row(r).array() - mean) / std::sqrt(var + 1e-12)).matrix().cwiseProduct(vec(name + ".weight")) +
                       vec(name + ".bias");
        }
        return x;
    };
    auto linear = [&](const MatrixD& x, const std::string& name) {
        MatrixD y = x * weights.at(name + ".weight").cast<double>().transpose();
        y.rowwise() += vec(name + ".bias");
        return y;
    };
    RowMatrix out(static_cast<Eigen::Index>(batch.size()), tiny_hidden);
    for (std::size_t s = 0; s < batch.size(); ++s) {
        std::vector<std::int32_t> ids = batch[s];
        const auto real = static_cast<Eigen::Index>(ids.size());
        ids.resize(longest, 0);  // [PAD]
        MatrixD x(T, tiny_hidden);
        for (Eigen::Index p = 0; p < T; ++p)
            x.row(p) = t.at("embeddings.word_embeddings.weight").row(ids[static_cast<std::size_t>(p)]).cast<double>() +
                       t.at("embeddings.position_embeddings.weight").row(p).cast<double>() +
                       t.at("embeddings.token_type_embeddings.weight").row(0).cast<double>();
        x = layer_norm(x, "embeddings.LayerNorm");
        for (int l = 0; l < tiny_layers; ++l) {
            const std::string p = "encoder.layer." + std::to_string(l) + ".";
            const MatrixD q = linear(x, p + "attention.self.query"), k = linear(x, p + "attention.self.key"),
                          v = linear(x, p + "attention.self.value");
            MatrixD context(T, tiny_hidden);
            const int d = tiny_hidden / tiny_heads;
            for (int h = 0; h < tiny_heads; ++h) {
                MatrixD scores = q.middleCols(h * d, d) * k.middleCols(h * d, d).transpose() / std::sqrt(double(d));
                for (Eigen::Index c = real; c < T; ++c) scores.col(c).array() += -1e30;
                for (Eigen::Index r = 0; r < T; ++r) {
                    scores.row(r).array() = (scores.row(r).array() - scores.row(r).maxCoeff()).exp();
                    scores.row(r) /= scores.row(r).sum();
                }
                context.middleCols(h * d, d) = scores * v.middleCols(h * d, d);
            }
            x = layer_norm(x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm");
            MatrixD inner = linear(x, p + "intermediate.dense");
            inner = inner.unaryExpr([](double u) { return 0.5 * u * (1 + std::erf(u / std::sqrt(2.0))); });
            x = layer_norm(x + linear(inner, p + "output.dense"), p + "output.LayerNorm");
        }
        Eigen::RowVectorXd pooled = x.topRows(real).colwise().mean();
        out.row(static_cast<Eigen::Index>(s)) = (pooled / pooled.norm()).cast<float>();
    }
    return out;
}

}  // namespace

namespace {

/// RTN for the three formats the tests use (the example's round_to_nearest would compile all 18).
minilm::QuantizedLayer test_quantizer(std::size_t /*index*/, const lowbit::Linear& layer, int group_size, int bits,
                                      lowbit::Activations activations) {
    if (group_size == 32 && bits == 8)
        return minilm::make_quantized_layer(lowbit::QuantizedLinear<32, 8>::from_linear(layer), activations);
    if (group_size == 64 && bits == 4)
        return minilm::make_quantized_layer(lowbit::QuantizedLinear<64, 4>::from_linear(layer), activations);
    if (group_size == 128 && bits == 4)
        return minilm::make_quantized_layer(lowbit::QuantizedLinear<128, 4>::from_linear(layer), activations);
    throw std::invalid_argument("test_quantizer: no format g" + std::to_string(group_size) + " b" + std::to_string(bits));
}

}  // namespace

TEST_CASE("minilm BERT forward: a tiny random model against a naive padded forward", "[minilm]") {
    auto rng = lowbit::test::make_rng(1301);
    const TinyBert bert = make_tiny_bert(rng);
    lowbit::test::TempDir dir;
    write_model(bert, dir.path());
    const minilm::BertModel model = minilm::BertModel::load(dir.path(), tiny_vocabulary.size());
    const std::vector<std::vector<std::int32_t>> batch{{2, 5, 6, 7, 8, 3}, {2, 3}, {2, 9, 10, 11, 17, 23, 24, 19, 20, 21, 22, 3}};

    const RowMatrix packed = model.embed(batch);
    const RowMatrix naive = naive_embeddings(bert, batch, bert.tensors);
    CHECK((packed - naive).cwiseAbs().maxCoeff() < 2e-5f);
    for (std::size_t s = 0; s < batch.size(); ++s) {  // one at a time equals the batch
        const RowMatrix alone = model.embed({batch[s]});
        CHECK((alone.row(0) - packed.row(static_cast<Eigen::Index>(s))).cwiseAbs().maxCoeff() < 1e-6f);
    }
    CHECK(model.linear_layers().size() == 6 * tiny_layers);
    CHECK(model.linear_name(7) == "encoder.layer.1.attention.self.key");

    SECTION("quantized layers compute the naive forward of their dequantized weights") {
        for (const auto activations : {lowbit::Activations::f32, lowbit::Activations::int8}) {
            const minilm::BertModel quantized = model.quantized(32, 8, activations, test_quantizer);
            std::map<std::string, RowMatrix> dequantized = bert.tensors;
            const auto layers = quantized.linear_layers();
            for (std::size_t l = 0; l < layers.size(); ++l) {
                dequantized[quantized.linear_name(l) + ".weight"] = layers[l]->weight();
                CHECK(layers[l]->is_quantized());
            }
            const RowMatrix expected = naive_embeddings(bert, batch, dequantized);
            const RowMatrix got = quantized.embed(batch);
            const float tolerance = activations == lowbit::Activations::f32 ? 1e-4f : 2e-2f;
            CHECK((got - expected).cwiseAbs().maxCoeff() < tolerance);
            CHECK(quantized.linear_memory_bytes() < model.linear_memory_bytes() / 3);
        }
        const minilm::BertModel four = model.quantized(64, 4, lowbit::Activations::f32, test_quantizer);
        // 4-bit codes + float32 scale and bias per 64 weights, + float biases: 5 / 32 of float plus the biases.
        const double ratio = double(four.linear_memory_bytes()) / double(model.linear_memory_bytes());
        CHECK(ratio > 5.0 / 32);
        CHECK(ratio < 0.18);
        CHECK_THROWS_WITH(model.quantized(128, 4, lowbit::Activations::f32, test_quantizer), ContainsSubstring("128"));  // in = 64
    }

    SECTION("the quantizer gets each layer with its index in linear_layers() order") {
        const auto float_layers = model.linear_layers();
        std::vector<std::size_t> seen;
        const minilm::BertModel quantized = model.quantized(
            32, 8, lowbit::Activations::f32,
            [&](std::size_t index, const lowbit::Linear& layer, int group_size, int bits, lowbit::Activations activations) {
                const lowbit::Linear& expected = float_layers.at(index)->float_layer();
                CHECK((layer.weight.rows() == expected.weight.rows() && layer.weight.cols() == expected.weight.cols() &&
                       layer.weight == expected.weight));
                seen.push_back(index);
                return test_quantizer(index, layer, group_size, bits, activations);
            });
        std::vector<std::size_t> in_order(float_layers.size());
        std::iota(in_order.begin(), in_order.end(), std::size_t{0});
        CHECK(seen == in_order);
    }
}

TEST_CASE("minilm end-to-end distillation: gradients against central differences of the loss", "[minilm]") {
    auto rng = lowbit::test::make_rng(1303);
    const TinyBert bert = make_tiny_bert(rng);
    lowbit::test::TempDir dir;
    write_model(bert, dir.path());
    const minilm::BertModel model = minilm::BertModel::load(dir.path(), tiny_vocabulary.size());
    const std::vector<std::vector<std::int32_t>> batch{{2, 5, 6, 7, 8, 3}, {2, 3}, {2, 9, 10, 11, 17, 23, 24, 19, 20, 3}};
    std::vector<lowbit::DwqLinear<32, 4>> layers;
    for (const auto* layer : model.linear_layers())
        layers.emplace_back(lowbit::QuantizedLinear<32, 4>::from_linear(layer->float_layer()));

    std::vector<lowbit::DwqLinear<32, 4>::Grads> grads;
    const double loss = minilm::end_to_end_loss(model, layers, batch, &grads);
    CHECK(loss == minilm::end_to_end_loss(model, layers, batch));  // the same forward with or without gradients
    CHECK(loss > 1e-4);                                                // 4-bit codes: the model is not float's
    REQUIRE(grads.size() == layers.size());
    // In every layer, the scale and the bias with the largest gradient, against (L(p + h) - L(p - h)) / 2h.
    for (std::size_t l = 0; l < layers.size(); ++l)
        for (const bool bias : {false, true}) {
            const lowbit::RowMatrixXf& gradient = bias ? grads[l].biases : grads[l].scales;
            Eigen::Index row = 0, group = 0;
            gradient.cwiseAbs().maxCoeff(&row, &group);
            float& parameter = (bias ? layers[l].biases() : layers[l].scales())(row, group);
            const float saved = parameter, h = 1e-2f * std::max(std::abs(saved), 1e-2f);
            parameter = saved + h;
            const double above = minilm::end_to_end_loss(model, layers, batch);
            parameter = saved - h;
            const double below = minilm::end_to_end_loss(model, layers, batch);
            parameter = saved;
            const double numeric = (above - below) / (2.0 * static_cast<double>(h));
            INFO("layer " << l << (bias ? " bias" : " scale") << " [" << row << ", " << group << "]: analytic "
                          << gradient(row, group) << ", central difference " << numeric);
            CHECK(std::abs(numeric - gradient(row, group)) <= 2e-3 * std::abs(numeric) + 1e-6);
        }
    CHECK_THROWS_WITH(minilm::end_to_end_loss(model, std::vector<lowbit::DwqLinear<32, 4>>(layers.begin(), layers.end() - 1), batch),
                      ContainsSubstring("11 layers for a model with 12"));
}

TEST_CASE("minilm BERT forward: bad model files and inputs", "[minilm]") {
    auto rng = lowbit::test::make_rng(1302);
    const TinyBert bert = make_tiny_bert(rng);
    lowbit::test::TempDir dir;
    CHECK_THROWS_WITH(minilm::BertModel::load(dir.path(), tiny_vocabulary.size()), ContainsSubstring("missing model file"));
    write_model(bert, dir.path(), "encoder.layer.1.output.dense.bias");
    CHECK_THROWS_WITH(minilm::BertModel::load(dir.path(), tiny_vocabulary.size()),
                      ContainsSubstring("missing tensor 'encoder.layer.1.output.dense.bias'"));
    write_model(bert, dir.path());
    CHECK_THROWS_WITH(minilm::BertModel::load(dir.path(), tiny_vocabulary.size() + 4),
                      ContainsSubstring("vocabulary has 30 tokens but config.json says vocab_size = 26"));

    TinyBert wrong_vocab = bert;  // config and vocabulary agree, the embedding table does not
    wrong_vocab.config.vocab_size += 1;
    write_model(wrong_vocab, dir.path());
    CHECK_THROWS_WITH(minilm::BertModel::load(dir.path(), tiny_vocabulary.size() + 1),
                      ContainsSubstring("does the vocabulary match the model?"));

    write_model(bert, dir.path());
    lowbit::test::write_text(dir / "config.json", "{\"hidden_size\": 64");
    CHECK_THROWS_WITH(minilm::BertModel::load(dir.path(), tiny_vocabulary.size()), ContainsSubstring("not JSON"));
    lowbit::test::write_text(dir / "config.json", "{\"hidden_size\": 64}");
    CHECK_THROWS_WITH(minilm::BertModel::load(dir.path(), tiny_vocabulary.size()), ContainsSubstring("'vocab_size'"));
    write_model(bert, dir.path());
    {
        // A truncated checkpoint: SafetensorsFile refuses it.
        lowbit::SafetensorsWriter writer;
        writer.add("embeddings.word_embeddings.weight", bert.tensors.at("embeddings.word_embeddings.weight"));
        auto bytes = writer.to_bytes();
        bytes.resize(bytes.size() - 16);
        lowbit::test::write_file(dir / "model.safetensors", bytes);
        CHECK_THROWS_AS(minilm::BertModel::load(dir.path(), tiny_vocabulary.size()), std::invalid_argument);
    }
    write_model(bert, dir.path());
    const minilm::BertModel model = minilm::BertModel::load(dir.path(), tiny_vocabulary.size());
    CHECK_THROWS_WITH(model.embed({{2, 26, 3}}), ContainsSubstring("id 26 at position 1 is outside the vocabulary of 26"));
    CHECK_THROWS_WITH(model.embed({std::vector<std::int32_t>(tiny_positions + 1, 5)}), ContainsSubstring("1 to 12"));
    CHECK_THROWS_AS(model.embed({{}}), minilm::ModelError);
    CHECK_THROWS_AS(model.embed({}), minilm::ModelError);
}

namespace {

std::filesystem::path real_model_dir() {
    if (const char* dir = std::getenv("LOWBIT_MINILM_DIR")) return dir;
    // tests/unit/ -> the checkout's build/deps/minilm, where tools/install-deps unpacks the model.
    return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "build" / "deps" / "minilm";
}

}  // namespace

TEST_CASE("minilm: the real all-MiniLM-L6-v2 matches the transformers reference", "[minilm][model]") {
    const auto dir = real_model_dir();
    if (!std::filesystem::is_regular_file(dir / "model.safetensors") || !std::filesystem::is_regular_file(dir / "vocab.txt"))
        SKIP("all-MiniLM-L6-v2 is not in " << dir.string() << " (tools/install-deps fetches it; or set LOWBIT_MINILM_DIR)");
    const auto tokenizer = minilm::WordPieceTokenizer::from_file((dir / "vocab.txt").string());
    const auto model = minilm::BertModel::load(dir, tokenizer.vocabulary_size());
    std::vector<std::vector<std::int32_t>> batch;
    for (const auto& sentence : minilm_reference::sentences()) {
        INFO(sentence.text);
        const auto encoding = tokenizer.encode(sentence.text, 256);
        CHECK(encoding.ids == sentence.ids);
        CHECK(encoding.truncated == (sentence.ids.size() == 256));
        batch.push_back(encoding.ids);
    }
    const RowMatrix embeddings = model.embed(batch);
    for (std::size_t s = 0; s < batch.size(); ++s) {
        INFO(minilm_reference::sentences()[s].text);
        const Eigen::Map<const Eigen::RowVectorXf> reference(minilm_reference::sentences()[s].embedding.data(), 384);
        const double cosine = embeddings.row(static_cast<Eigen::Index>(s)).cast<double>().dot(reference.cast<double>()) /
                              (embeddings.row(static_cast<Eigen::Index>(s)).cast<double>().norm() * reference.cast<double>().norm());
        CHECK(cosine >= 0.99999);
    }
}
