// lowbit-minilm: does lowbit keep a real pretrained transformer's behaviour, and run it faster?
// Answered on sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 36 linear layers).
//
// The float model (examples/minilm/bert.hpp) matches sentence-transformers to cosine >= 0.99999
// (tests/examples/test_minilm.cpp checks the committed reference vectors). Each variant quantizes all 36
// linear layers (QuantizedLinear, MLX affine format) with one method (examples/minilm/quantizers.hpp:
// round-to-nearest at every --bits x --groups; clip search, HQQ and GPTQ at the --bits of 4 and below x
// --ptq-groups; "-bc" adds bias correction, "-dwq" and "-e2e" distil the scales and biases), run with f32 or int8
// activations, and is compared with float on real sentences from the `fortunes` package (examples/minilm/corpus.hpp).
// The calibrated methods (clip search weighted by the inputs' mean squares, GPTQ) see each layer's inputs on
// --calibration-sentences other sentences of the corpus (spread over those not used for evaluation), from the float
// model or, with "-seq", from the partly quantized one:
//   fidelity  mean and worst cosine of the embeddings to float's; for each sentence, is its nearest
//             neighbour (top-1) the same as float's, and how much of its 10 nearest neighbours (top-10)
//             float's 10 share; per layer, relative weight error ||W_q - W|| / ||W|| and relative output
//             error on the real inputs that layer sees in the float model on --layer-sentences
//             evaluation sentences (both Frobenius norms), and each method's against RTN's;
//   speed     sentences/s and tokens/s, one sentence at a time (batch 1), at each thread count, for float
//             and RTN (a PTQ model has its format's RTN kernels, so its speed);
//   memory    bytes of the linear layers' parameters.
// Prints a table and writes minilm.csv, minilm_layers.csv and minilm.svg to --out.
//
// lowbit-minilm --embed FILE [--bits B --group G [--int8]] prints one embedding per line of FILE (384
// comma-separated %.9g floats). An empty line embeds "[CLS] [SEP]"; a line longer than the model's
// 256 tokens ([CLS] + 254 word pieces + [SEP]) is truncated (said on stderr); invalid UTF-8 is an error naming the
// line. Exit status: 0 on success, 1 on an error or a failed --check, 77 when the model files or the corpus are missing
// (so ctest can skip).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/parallel.hpp>

#include "minilm/bert.hpp"
#include "minilm/corpus.hpp"
#include "minilm/quantizers.hpp"
#include "minilm/report.hpp"
#include "minilm/tokenizer.hpp"

#ifndef LOWBIT_MINILM_DEFAULT_DIR
#define LOWBIT_MINILM_DEFAULT_DIR "build/deps/minilm"
#endif

namespace {

using minilm::Batch;
using minilm::RowMatrix;

constexpr int missing_model_status = 77;

struct Options {
    std::string model_dir = LOWBIT_MINILM_DEFAULT_DIR;
    std::string corpus = "/usr/share/games/fortunes";
    std::string out_dir = "build/minilm";
    std::string embed_file;
    std::size_t sentences = 2000, speed_sentences = 100, layer_sentences = 32, calibration_sentences = 512;
    int repeats = 3;
    std::vector<int> bits{8, 6, 4, 3, 2}, groups{32, 64, 128}, ptq_groups{64}, threads{1, 2};
    std::vector<std::string> activations{"f32", "int8"};
    std::vector<minilm::Method> methods{minilm::Method::parse("rtn"), minilm::Method::parse("clip"),
                                        minilm::Method::parse("hqq"), minilm::Method::parse("gptq"),
                                        minilm::Method::parse("clip-gptq"), minilm::Method::parse("clip-gptq-bc")};
    lowbit::GptqOptions gptq;
    minilm::EndToEndSettings end_to_end;  ///< the -e2e methods' training
    int embed_bits = 0, embed_group = 64;
    bool embed_int8 = false, check = false;
    bool e2e_fit_evaluation = false;  ///< -e2e trains on the evaluation sentences: a bound, not a result
};

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> items;
    std::stringstream stream(text);
    for (std::string item; std::getline(stream, item, ',');)
        if (!item.empty()) items.push_back(item);
    return items;
}

long integer(const std::string& flag, const std::string& text, long minimum) {
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < minimum || value > 1000000000)
        throw std::invalid_argument(flag + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
    return value;
}

std::vector<int> integer_list(const std::string& flag, const std::string& text, long minimum) {
    std::vector<int> values;
    for (const std::string& item : split_list(text)) values.push_back(static_cast<int>(integer(flag, item, minimum)));
    if (values.empty()) throw std::invalid_argument(flag + " needs a comma-separated list, got '" + text + "'");
    return values;
}

Options parse(int argc, char** argv) {
    Options o;
    bool bits_given = false, group_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--model") o.model_dir = value();
        else if (arg == "--corpus") o.corpus = value();
        else if (arg == "--out") o.out_dir = value();
        else if (arg == "--embed") o.embed_file = value();
        else if (arg == "--sentences") o.sentences = static_cast<std::size_t>(integer(arg, value(), 20));
        else if (arg == "--speed-sentences") o.speed_sentences = static_cast<std::size_t>(integer(arg, value(), 0));
        else if (arg == "--layer-sentences") o.layer_sentences = static_cast<std::size_t>(integer(arg, value(), 1));
        else if (arg == "--repeats") o.repeats = static_cast<int>(integer(arg, value(), 1));
        else if (arg == "--int8") o.embed_int8 = true;
        else if (arg == "--bits") {
            o.bits = integer_list(arg, value(), 2);
            bits_given = true;
        } else if (arg == "--groups" || arg == "--group") {
            o.groups = integer_list(arg, value(), 1);
            group_given = true;
        }
        else if (arg == "--threads") o.threads = integer_list(arg, value(), 1);
        else if (arg == "--ptq-groups") o.ptq_groups = integer_list(arg, value(), 1);
        else if (arg == "--calibration-sentences") o.calibration_sentences = static_cast<std::size_t>(integer(arg, value(), 1));
        else if (arg == "--methods") {
            o.methods.clear();
            for (const std::string& name : split_list(value())) o.methods.push_back(minilm::Method::parse(name));
            if (o.methods.empty()) throw std::invalid_argument("--methods needs a comma-separated list of methods");
        } else if (arg == "--gptq-damping") {
            const std::string text = value();
            char* end = nullptr;
            o.gptq.damping = std::strtof(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !(o.gptq.damping >= 0.0f && o.gptq.damping <= 10.0f))
                throw std::invalid_argument("--gptq-damping needs a number in [0, 10], got '" + text + "'");
        } else if (arg == "--e2e-fit-evaluation")
            o.e2e_fit_evaluation = true;
        else if (arg == "--e2e-epochs")
            o.end_to_end.epochs = integer(arg, value(), 1);
        else if (arg == "--e2e-learning-rate") {
            const std::string text = value();
            char* end = nullptr;
            o.end_to_end.learning_rate = std::strtof(text.c_str(), &end);
            if (text.empty() || *end != '\0' ||
                !(o.end_to_end.learning_rate > 0.0f && o.end_to_end.learning_rate <= 1.0f))
                throw std::invalid_argument("--e2e-learning-rate needs a number in (0, 1], got '" + text + "'");
        } else if (arg == "--activations") {
            o.activations = split_list(value());
            for (const auto& a : o.activations)
                if (a != "f32" && a != "int8") throw std::invalid_argument("--activations takes f32 and/or int8, got '" + a + "'");
        } else if (arg == "--check")
            o.check = true;
        else if (arg == "--help" || arg == "-h") {
            std::printf(
                "usage: lowbit-minilm [--model DIR] [--corpus FILE_OR_DIR] [--out DIR] [--sentences N] "
                "[--speed-sentences N]\n"
                "                     [--layer-sentences N] [--repeats N] [--bits 8,6,4,3,2] [--groups 32,64,128]\n"
                "                     [--activations f32,int8] [--threads 1,2] [--check]\n"
                "                     [--methods rtn,clip,hqq,gptq,clip-gptq,clip-gptq-bc] [--ptq-groups 64] "
                "[--calibration-sentences 512]\n"
                "                     [--gptq-damping 0.01] [--e2e-epochs 8] [--e2e-learning-rate 1e-5]\n"
                "                     [--e2e-fit-evaluation]  (-e2e trains on the evaluation sentences: what the method\n"
                "                     could reach at best, not a result)\n"
                "       lowbit-minilm --embed FILE [--bits B --group G [--int8]] [--model DIR]\n"
                "DIR holds model.safetensors, config.json and vocab.txt (tools/install-deps puts them in "
                "build/deps/minilm).\n"
                "Methods: rtn (at every --bits x --groups), clip, hqq, gptq, clip-gptq (at the --bits <= 4 x "
                "--ptq-groups);\n"
                "each may add -bc (bias correction from the calibration inputs' mean), then -dwq (scales and biases "
                "fitted\n"
                "to the float layer's outputs), then -seq (calibration inputs from\n"
                "the partly quantized model; methods with calibration inputs only), then -e2e (every layer's scales "
                "and\n"
                "biases trained together to the float model's last hidden states, 2 to 4 bits). See "
                "examples/minilm/quantizers.hpp.\n"
                "Calibration: N sentences spread over the corpus sentences not used for evaluation.\n");
            std::exit(0);
        } else {
            throw std::invalid_argument("unknown argument '" + arg + "' (see --help)");
        }
    }
    if (!o.embed_file.empty()) {
        if ((bits_given && o.bits.size() != 1) || (group_given && o.groups.size() != 1))
            throw std::invalid_argument("--embed takes one --bits and one --group");
        o.embed_bits = bits_given ? o.bits.front() : 0;
        o.embed_group = group_given ? o.groups.front() : 64;
        if (o.embed_int8 && !bits_given) throw std::invalid_argument("--int8 needs --bits (a quantized model)");
    }
    return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The model's sequence limit: sentence_bert_config.json's max_seq_length (256 for all-MiniLM-L6-v2),
/// else 256; never above the position table.
std::size_t max_sequence_length(const std::filesystem::path& dir, const minilm::BertModel& model) {
    std::size_t limit = 256;
    std::ifstream in(dir / "sentence_bert_config.json");
    if (in) {
        const auto json = nlohmann::json::parse(in, nullptr, false);
        if (json.is_object() && json.contains("max_seq_length") && json["max_seq_length"].is_number_integer() &&
            json["max_seq_length"].get<long long>() >= 2)
            limit = json["max_seq_length"].get<std::size_t>();
    }
    return std::min(limit, model.max_positions());
}

RowMatrix embed_all(const minilm::BertModel& model, const Batch& sentences, std::size_t chunk = 32) {
    RowMatrix out(static_cast<Eigen::Index>(sentences.size()), model.config().hidden_size);
    for (std::size_t begin = 0; begin < sentences.size(); begin += chunk) {
        const std::size_t end = std::min(sentences.size(), begin + chunk);
        const Batch part(sentences.begin() + static_cast<std::ptrdiff_t>(begin), sentences.begin() + static_cast<std::ptrdiff_t>(end));
        out.middleRows(static_cast<Eigen::Index>(begin), static_cast<Eigen::Index>(end - begin)) = model.embed(part);
    }
    return out;
}

/// Each row's k nearest other rows by cosine (rows are unit vectors), nearest first.
std::vector<std::vector<int>> nearest_neighbours(const RowMatrix& embeddings, int k) {
    const RowMatrix similarity = embeddings * embeddings.transpose();
    const int n = static_cast<int>(embeddings.rows());
    std::vector<std::vector<int>> result(static_cast<std::size_t>(n));
    std::vector<int> order;
    for (int i = 0; i < n; ++i) {
        order.resize(static_cast<std::size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        order.erase(order.begin() + i);
        const int take = std::min<int>(k, static_cast<int>(order.size()));
        std::partial_sort(order.begin(), order.begin() + take, order.end(),
                          [&](int a, int b) { return similarity(i, a) > similarity(i, b) || (similarity(i, a) == similarity(i, b) && a < b); });
        result[static_cast<std::size_t>(i)].assign(order.begin(), order.begin() + take);
    }
    return result;
}

void fill_fidelity(minilm::ResultRow& row, const RowMatrix& reference, const std::vector<std::vector<int>>& reference_neighbours,
                   const RowMatrix& embeddings) {
    const Eigen::VectorXf cosine = (reference.array() * embeddings.array()).rowwise().sum();
    row.mean_cosine = cosine.cast<double>().mean();
    row.worst_cosine = cosine.minCoeff();
    const auto neighbours = nearest_neighbours(embeddings, 10);
    double top1 = 0, top10 = 0;
    for (std::size_t i = 0; i < neighbours.size(); ++i) {
        top1 += neighbours[i][0] == reference_neighbours[i][0];
        int shared = 0;
        for (int a : neighbours[i]) shared += std::count(reference_neighbours[i].begin(), reference_neighbours[i].end(), a) > 0;
        top10 += shared / static_cast<double>(neighbours[i].size());
    }
    row.top1_agreement = top1 / static_cast<double>(neighbours.size());
    row.top10_overlap = top10 / static_cast<double>(neighbours.size());
}

/// Median over `repeats` runs of embedding every sentence alone; sets sentences/s, tokens/s and
/// the linear layers' ms per sentence for thread-count slot `slot`.
double measure_speed(const minilm::BertModel& model, const Batch& sentences, int repeats, minilm::ResultRow& row) {
    std::size_t tokens = 0;
    for (const auto& s : sentences) tokens += s.size();
    for (std::size_t i = 0; i < std::min<std::size_t>(3, sentences.size()); ++i) model.embed({sentences[i]});  // warm-up
    std::vector<std::pair<double, double>> runs;  // (total seconds, linear seconds)
    for (int r = 0; r < repeats; ++r) {
        double linear = 0;
        const auto start = std::chrono::steady_clock::now();
        for (const auto& s : sentences) model.embed({s}, nullptr, &linear);
        runs.emplace_back(seconds_since(start), linear);
    }
    std::sort(runs.begin(), runs.end());
    const auto [seconds, linear] = runs[runs.size() / 2];
    row.sentences_per_second.push_back(static_cast<double>(sentences.size()) / seconds);
    row.tokens_per_second.push_back(static_cast<double>(tokens) / seconds);
    row.linear_ms_per_sentence.push_back(1e3 * linear / static_cast<double>(sentences.size()));
    return seconds;
}

int run_embed(const Options& o, const minilm::WordPieceTokenizer& tokenizer, const minilm::BertModel& float_model,
              std::size_t max_tokens) {
    std::ifstream in(o.embed_file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + o.embed_file);
    const minilm::BertModel model =
        o.embed_bits == 0 ? float_model
                          : float_model.quantized(o.embed_group, o.embed_bits, o.embed_int8 ? lowbit::Activations::int8 : lowbit::Activations::f32, minilm::round_to_nearest);
    std::size_t line_number = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        minilm::Encoding encoding;
        try {
            encoding = tokenizer.encode(line, max_tokens);
        } catch (const minilm::TokenizerError& error) {
            throw minilm::TokenizerError(o.embed_file + ", line " + std::to_string(line_number) + ": " + error.what());
        }
        if (encoding.truncated)
            std::fprintf(stderr, "lowbit-minilm: %s, line %zu: truncated to %zu tokens ([CLS], %zu word pieces, [SEP])\n",
                         o.embed_file.c_str(), line_number, max_tokens, max_tokens - 2);
        const RowMatrix embedding = model.embed({encoding.ids});
        for (Eigen::Index c = 0; c < embedding.cols(); ++c) std::printf(c ? ",%.9g" : "%.9g", embedding(0, c));
        std::printf("\n");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        const std::filesystem::path dir = o.model_dir;
        for (const char* file : {"vocab.txt", "config.json", "model.safetensors"})
            if (!std::filesystem::is_regular_file(dir / file)) {
                std::fprintf(stderr,
                             "lowbit-minilm: %s is missing; get the model with `sudo tools/install-deps` (it unpacks "
                             "all-MiniLM-L6-v2 into build/deps/minilm) or pass --model DIR\n",
                             (dir / file).string().c_str());
                return missing_model_status;
            }
        const auto tokenizer = minilm::WordPieceTokenizer::from_file((dir / "vocab.txt").string());
        const minilm::BertModel float_model = minilm::BertModel::load(dir, tokenizer.vocabulary_size());
        const std::size_t max_tokens = max_sequence_length(dir, float_model);
        if (!o.embed_file.empty()) return run_embed(o, tokenizer, float_model, max_tokens);

        // Corpus.
        if (!std::filesystem::exists(o.corpus)) {
            std::fprintf(stderr, "lowbit-minilm: the corpus %s is missing; install Debian's `fortunes` package "
                                 "(tools/install-deps does) or pass --corpus FILE_OR_DIR\n", o.corpus.c_str());
            return missing_model_status;
        }
        const auto all_sentences = minilm::read_fortune_sentences(o.corpus);
        const auto texts = minilm::spread_sample(all_sentences, o.sentences);
        std::size_t tokens = 0, truncated = 0;
        auto encode_all = [&](const std::vector<std::string>& sample) {
            Batch batch;
            for (const auto& text : sample) {
                auto encoding = tokenizer.encode(text, max_tokens);
                truncated += encoding.truncated;
                batch.push_back(std::move(encoding.ids));
            }
            return batch;
        };
        const Batch sentences = encode_all(texts);
        for (const auto& s : sentences) tokens += s.size();
        const Batch speed_sentences(sentences.begin(), sentences.begin() + static_cast<std::ptrdiff_t>(std::min(o.speed_sentences, sentences.size())));
        const Batch layer_sentences(sentences.begin(), sentences.begin() + static_cast<std::ptrdiff_t>(std::min(o.layer_sentences, sentences.size())));
        std::printf("all-MiniLM-L6-v2 from %s; corpus %s: %zu sentences extracted, %zu used (%.1f tokens each with [CLS]/[SEP], "
                    "%zu truncated to %zu)\n",
                    o.model_dir.c_str(), o.corpus.c_str(), all_sentences.size(), sentences.size(),
                    static_cast<double>(tokens) / static_cast<double>(sentences.size()), truncated, max_tokens);
        const bool calibrated = std::any_of(o.methods.begin(), o.methods.end(),
                                            [](const auto& m) { return m.calibrated() || m.end_to_end; });
        Batch calibration;
        if (calibrated) {
            calibration = encode_all(minilm::spread_sample(minilm::sentences_not_in(all_sentences, texts), o.calibration_sentences));
            if (calibration.empty()) throw std::invalid_argument("no corpus sentences are left for calibration (lower --sentences)");
            std::size_t calibration_tokens = 0;
            for (const auto& s : calibration) calibration_tokens += s.size();
            std::printf("calibration: %zu other sentences (%zu token rows), spread over the %zu not used for evaluation\n",
                        calibration.size(), calibration_tokens, all_sentences.size() - texts.size());
        }

        // Float reference.
        auto start = std::chrono::steady_clock::now();
        lowbit::set_num_threads(0);
        const RowMatrix reference = embed_all(float_model, sentences);
        const auto reference_neighbours = nearest_neighbours(reference, 10);
        const auto layer_inputs = minilm::capture_linear_inputs(float_model, layer_sentences);
        std::vector<RowMatrix> float_outputs, float_weights;
        const auto float_layers = float_model.linear_layers();
        for (std::size_t l = 0; l < float_layers.size(); ++l) {
            float_outputs.push_back(float_layers[l]->forward(layer_inputs[l]));
            float_weights.push_back(float_layers[l]->weight());
        }
        const bool float_calibration =
            std::any_of(o.methods.begin(), o.methods.end(), [](const auto& m) { return m.needs_float_inputs(); });
        const std::vector<RowMatrix> calibration_inputs =
            float_calibration ? minilm::capture_linear_inputs(float_model, calibration) : std::vector<RowMatrix>();
        std::printf("float embeddings of the corpus in %.1f s\n", seconds_since(start));

        std::vector<minilm::ResultRow> rows;
        std::vector<std::pair<std::size_t, minilm::BertModel>> speed_models{{0, float_model}};  // (row, model)
        minilm::ResultRow float_row;
        float_row.name = "float";
        float_row.activations = "f32";
        float_row.memory_bytes = float_model.linear_memory_bytes();
        rows.push_back(float_row);

        std::ofstream layers_csv;
        std::filesystem::create_directories(o.out_dir);
        layers_csv.open(o.out_dir + "/minilm_layers.csv");
        if (!layers_csv) throw std::runtime_error("cannot write " + o.out_dir + "/minilm_layers.csv");
        layers_csv << "model,method,bits,group_size,activations,layer,relative_weight_error,relative_output_error\n";

        struct Variant {
            minilm::Method method;
            int bits, group;
        };
        std::vector<Variant> variants;
        for (const minilm::Method& method : o.methods)
            for (int bits : o.bits)
                for (int group : method.is_plain_rtn() ? o.groups : o.ptq_groups)
                    if (method.is_plain_rtn() || bits <= 4) variants.push_back({method, bits, group});

        for (const Variant& variant : variants) {
            start = std::chrono::steady_clock::now();
            auto quantized_layers = minilm::quantize_linear_layers(
                float_model, variant.method, variant.group, variant.bits, calibration_inputs, calibration, o.gptq);
            if (variant.method.end_to_end)
                quantized_layers =
                    minilm::distill_layers_end_to_end(float_model, quantized_layers,
                                                                     o.e2e_fit_evaluation ? sentences : calibration, o.end_to_end);
            const double quantize_seconds = seconds_since(start);
            for (const std::string& activations : o.activations) {
                start = std::chrono::steady_clock::now();
                const auto mode = activations == "int8" ? lowbit::Activations::int8 : lowbit::Activations::f32;
                minilm::BertModel model = float_model.quantized(
                    variant.group, variant.bits, mode,
                    [&](std::size_t index, const lowbit::Linear&, int, int, lowbit::Activations a) {
                        return minilm::as_quantized_layer(quantized_layers[index], a);
                    });
                minilm::ResultRow row;
                row.method = variant.method.name();
                row.name = row.method + " b" + std::to_string(variant.bits) + " g" + std::to_string(variant.group) + " " + activations;
                row.bits = variant.bits;
                row.group_size = variant.group;
                row.activations = activations;
                row.bits_per_weight = variant.bits + 64.0 / variant.group;
                row.memory_bytes = model.linear_memory_bytes();
                row.memory_ratio = static_cast<double>(row.memory_bytes) / static_cast<double>(float_row.memory_bytes);
                fill_fidelity(row, reference, reference_neighbours, embed_all(model, sentences));
                const auto layers = model.linear_layers();
                double weight_sum = 0, output_sum = 0;
                for (std::size_t l = 0; l < layers.size(); ++l) {
                    const double weight_error = (layers[l]->weight() - float_weights[l]).norm() / float_weights[l].norm();
                    const double output_error = (layers[l]->forward(layer_inputs[l]) - float_outputs[l]).norm() / float_outputs[l].norm();
                    weight_sum += weight_error;
                    output_sum += output_error;
                    row.weight_error_max = std::max(row.weight_error_max, weight_error);
                    row.output_error_max = std::max(row.output_error_max, output_error);
                    row.layer_output_errors.push_back(output_error);
                    layers_csv << row.name << ',' << row.method << ',' << row.bits << ',' << row.group_size << ',' << activations
                               << ',' << model.linear_name(l) << ',' << weight_error << ',' << output_error << '\n';
                }
                row.weight_error_mean = weight_sum / static_cast<double>(layers.size());
                row.output_error_mean = output_sum / static_cast<double>(layers.size());
                std::printf("%-26s mean cosine %.6f, worst %.6f, top-1 %.3f, top-10 %.3f, layer output error %.4f "
                            "(quantized in %.1f s, evaluated in %.1f s)\n",
                            row.name.c_str(), row.mean_cosine, row.worst_cosine, row.top1_agreement, row.top10_overlap,
                            row.output_error_mean, quantize_seconds, seconds_since(start));
                std::fflush(stdout);
                rows.push_back(row);
                if (variant.method.is_plain_rtn()) speed_models.emplace_back(rows.size() - 1, std::move(model));
            }
        }

        // Speed, one sentence at a time: float and RTN.
        if (!speed_sentences.empty()) {
            for (int threads : o.threads) {
                lowbit::set_num_threads(threads);
                Eigen::setNbThreads(threads);
                std::printf("speed at %d thread(s) (lowbit %d, Eigen %d): %zu sentences one at a time, median of %d runs\n", threads,
                            lowbit::num_threads(), Eigen::nbThreads(), speed_sentences.size(), o.repeats);
                std::fflush(stdout);
                double float_seconds = 0;
                for (auto& [row, model] : speed_models) {
                    const double seconds = measure_speed(model, speed_sentences, o.repeats, rows[row]);
                    if (row == 0) float_seconds = seconds;
                    rows[row].speedup.push_back(float_seconds / seconds);
                }
            }
        }

        print_table(rows, o.threads);
        print_layer_summary(rows);
        write_csv(o.out_dir + "/minilm.csv", rows, o.threads);
        write_svg(o.out_dir + "/minilm.svg", rows, sentences.size());
        std::printf("\nlinear layers' share of the float model's time at %d thread(s): %.0f%% (%.2f of %.2f ms per sentence)\n",
                    o.threads.front(), rows[0].linear_ms_per_sentence.empty() ? 0.0 : 100.0 * rows[0].linear_ms_per_sentence[0] * 1e-3 * rows[0].sentences_per_second[0],
                    rows[0].linear_ms_per_sentence.empty() ? 0.0 : rows[0].linear_ms_per_sentence[0],
                    rows[0].sentences_per_second.empty() ? 0.0 : 1e3 / rows[0].sentences_per_second[0]);
        std::printf("wrote %s/minilm.csv, %s/minilm_layers.csv and %s/minilm.svg\n", o.out_dir.c_str(), o.out_dir.c_str(), o.out_dir.c_str());

        if (o.check) {
            // Floors below what RTN reaches on a 200-sentence slice (b8 f32 0.9998, b8 int8 0.9993, b4 g64
            // 0.96 f32 and int8), far above what a broken forward or quantized path gives (int8 activations
            // whose bias term used the f32 sum of x gave b8 0.991); and the
            // methods that minimise a layer's output error (GPTQ's) below RTN's mean layer output error, and
            // -e2e methods' mean cosine above RTN's.
            std::vector<std::string> failures;
            for (const auto& row : rows) {
                const bool int8 = row.activations == "int8";
                const double floor = row.bits == 8                           ? (int8 ? 0.998 : 0.999)
                                     : row.bits == 4 && row.group_size <= 64 ? 0.9
                                                                             : -1.0;
                if (row.mean_cosine < floor)
                    failures.push_back(row.name + ": mean cosine " + std::to_string(row.mean_cosine) + " < " + std::to_string(floor));
                const minilm::ResultRow* rtn = minilm::rtn_counterpart(rows, row);
                if (row.method.find("gptq") != std::string::npos && !int8 && rtn != nullptr &&
                    !(row.output_error_mean < rtn->output_error_mean))
                    failures.push_back(row.name + ": mean layer output error " + std::to_string(row.output_error_mean) +
                                       " is not below RTN's " + std::to_string(rtn->output_error_mean));
                if (row.method.ends_with("-e2e") && rtn != nullptr && !(row.mean_cosine > rtn->mean_cosine))
                    failures.push_back(row.name + ": mean cosine " + std::to_string(row.mean_cosine) +
                                       " after end-to-end distillation is not above RTN's " +
                                       std::to_string(rtn->mean_cosine));
            }
            for (const auto& failure : failures) std::fprintf(stderr, "check failed: %s\n", failure.c_str());
            if (!failures.empty()) return 1;
            std::printf("check: all thresholds hold\n");
        }
        return 0;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "lowbit-minilm: %s\n", error.what());
        return 1;
    }
}
