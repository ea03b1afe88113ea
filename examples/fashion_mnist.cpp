// lowbit-fashion-mnist: does quantization-aware training with lowbit recover the accuracy that plain
// rounding loses, how much of it do post-training quantizers recover without training, and does the
// deployed model compute what training saw? Answered on real data.
//
// Trains an MLP 784-256-128-10 (ReLU, softmax cross-entropy, Adam) in plain Eigen on Fashion-MNIST,
// then reports test accuracy for:
//   - float32, and the float model fine-tuned for as many more epochs as QAT runs (QAT's fair reference);
//   - post-training quantization (PTQ) to QuantizedLinear, group 64, activations float: MLX's
//     round-to-nearest (RTN) at 8/4/3/2 bits, and lowbit's clip search, HQQ and GPTQ (lowbit/ptq.hpp) at
//     4/3/2 bits, calibrated on training images only;
//   - QAT at 4/3/2 bits: fine-tuned from the float model through lowbit::QatLinear<64, Bits> (weights
//     fake-quantized in the deployed format, inputs quantized to int8 per group as the deployed int8 path
//     does), then deployed as QuantizedLinear (the deployed model's accuracy is measured separately,
//     through lowbit's packed kernels: it equals training's bit for bit);
//   - BitNet b1.58: fine-tuned through lowbit::BitLinear (absmean ternary weights, per-token 8-bit
//     activations, straight-through gradients), deployed as lowbit::TernaryLinear (equal accuracy).
// Every deployed model is also run with int8 activations (QuantizedLinear::forward(x, Activations::int8)).
// 784 is a multiple of no supported group size, so images are padded with zero features to 832 = 13 x 64
// inputs; the padded columns meet zero inputs, so they change nothing in the float model.
//
// Prints a table and writes fashion_mnist.csv and fashion_mnist.svg (accuracy against bits) to --out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "fashion_mnist/adapters.hpp"
#include "fashion_mnist/deploy.hpp"
#include "fashion_mnist/model.hpp"
#include "fashion_mnist/qat.hpp"
#include "fashion_mnist/report.hpp"
#include "fashion_mnist_data.hpp"

namespace {

using namespace fashion_mnist;

struct Options {
    std::string data_dir = "/usr/share/datasets/fashion-mnist";
    int epochs = 12;       ///< float training epochs; each QAT fine-tune runs half as many (at least 1)
    int subset = 0;        ///< train on the first N training images (0: all 60000)
    int threads = 0;       ///< 0: all hardware threads
    int calibration = 2048;  ///< training images the calibrated PTQ methods see
    std::string out_dir = ".";
    bool check = false;    ///< exit 1 unless the thresholds of a learning, matching model hold
    std::uint64_t seed = 1;
};

Options parse(int argc, char** argv) {
    Options options;
    auto integer = [](const std::string& flag, const char* text, int minimum) {
        char* end = nullptr;
        const long value = std::strtol(text, &end, 10);
        if (end == text || *end != '\0' || value < minimum || value > 1000000000)
            throw std::invalid_argument(flag + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
        return static_cast<int>(value);
    };
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--data") options.data_dir = value();
        else if (arg == "--epochs") options.epochs = integer(arg, value(), 1);
        else if (arg == "--subset") options.subset = integer(arg, value(), 0);
        else if (arg == "--threads") options.threads = integer(arg, value(), 0);
        else if (arg == "--out") options.out_dir = value();
        else if (arg == "--calibration") options.calibration = integer(arg, value(), 1);
        else if (arg == "--seed") options.seed = static_cast<std::uint64_t>(integer(arg, value(), 0));
        else if (arg == "--check") options.check = true;
        else if (arg == "--help" || arg == "-h") {
            std::printf("usage: lowbit-fashion-mnist [--data DIR] [--epochs N] [--subset N] [--threads N] [--out DIR] "
                        "[--seed N] [--calibration N] [--check]\n");
            std::exit(0);
        } else {
            throw std::invalid_argument("unknown argument '" + arg + "' (see --help)");
        }
    }
    return options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Parameters of the float model (weights and biases of the three layers).
long float_parameters() {
    long count = 0;
    for (int l = 0; l < layers; ++l) count += long(layer_widths[l]) * layer_widths[l + 1] + layer_widths[l + 1];
    return count;
}

/// KiB of deployed layers: packed codes, float scales and biases, the float bias.
template <class Layer>
double deployed_kib(const std::vector<Layer>& deployed) {
    double bytes = 0;
    for (const auto& layer : deployed) {
        const auto& w = layer.weight();
        bytes += 4.0 * double(w.codes.size() + w.scales.size() + w.biases.size() + w.rows());
    }
    return bytes / 1024.0;
}

template <int Bits>
void run_ptq(const Mlp& model, PtqMethod method, const RowMatrix& calibration, const Split& test,
             std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    const auto deployed = deploy<Bits>(model, method, calibration);
    const double acc = accuracy(deployed_predictions(deployed, test.images), test.labels);
    Result r{method_name(method), double(Bits), acc, acc, 0, 0, std::nullopt};
    r.seconds = seconds_since(start);
    r.weight_kib = deployed_kib(deployed);
    r.int8_accuracy = accuracy(deployed_predictions(deployed, test.images, lowbit::Activations::int8), test.labels);
    results.push_back(r);
    std::printf("%s %d-bit: test accuracy %.4f (int8 activations %.4f)\n", r.method.c_str(), Bits, acc, *r.int8_accuracy);
}

template <int Bits>
void run_ptq_methods(const Mlp& model, const RowMatrix& calibration, const Split& test, std::vector<Result>& results) {
    for (PtqMethod method : {PtqMethod::rtn, PtqMethod::clip_search, PtqMethod::hqq, PtqMethod::gptq})
        run_ptq<Bits>(model, method, calibration, test, results);
}

template <int Bits>
void run_qat(const Mlp& float_model, const Split& train_split, const Split& test, const TrainSettings& settings,
             std::uint64_t seed, std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    auto net = qat_layers<Bits>(float_model);
    std::mt19937_64 rng(seed + Bits);
    const double epoch_seconds = train_weights_and_biases(net, train_split, settings, rng);
    const std::vector<int> qat_predictions = argmax_rows(layers_logits(net, test.images));
    std::vector<lowbit::QuantizedLinear<group_size, Bits>> layers_deployed;
    for (const auto& layer : net) layers_deployed.push_back(layer.deploy());
    // What training computed: the deployed layers with int8 activations.
    const std::vector<int> deployed = deployed_predictions(layers_deployed, test.images, lowbit::Activations::int8);
    Result r{"QAT", double(Bits), accuracy(qat_predictions, test.labels), accuracy(deployed, test.labels), 0, 0, std::nullopt};
    for (std::size_t i = 0; i < deployed.size(); ++i) r.deployed_disagreements += deployed[i] != qat_predictions[i];
    r.trainable = float_parameters();
    r.weight_kib = deployed_kib(layers_deployed);
    r.epoch_seconds = epoch_seconds;
    r.int8_accuracy = r.deployed_accuracy;
    r.seconds = seconds_since(start);
    results.push_back(r);
    std::printf(
        "QAT %d-bit: test accuracy %.4f in QAT evaluation, %.4f deployed as QuantizedLinear with int8 "
        "activations (%zu of %zu predictions differ), %.4f with float activations\n",
        Bits, r.accuracy, *r.deployed_accuracy, r.deployed_disagreements, deployed.size(),
        accuracy(deployed_predictions(layers_deployed, test.images), test.labels));
}

/// A 2-bit base (RTN or GPTQ) with LoRA adapters of rank `rank` (at most each layer's width) trained
/// on the labels for settings.epochs; "deployed" is the adapters merged and the layers re-quantized to
/// 2 bits by round-to-nearest.
void run_lora(const Mlp& float_model, PtqMethod method, int rank, const RowMatrix& calibration,
              const Split& train_split, const Split& test, const TrainSettings& settings, std::uint64_t seed,
              std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    const auto base = deploy<2>(float_model, method, calibration);
    std::mt19937_64 rng(seed + 200 + rank);
    const auto net = train_lora(base, rank, train_split, settings, rng);
    std::vector<lowbit::QuantizedLinear<group_size, 2>> merged;
    Result r{std::string("QLoRA ") + (method == PtqMethod::gptq ? "GPTQ" : "RTN") + " r" + std::to_string(rank),
             2,
             accuracy(argmax_rows(layers_logits(net, test.images)), test.labels),
             std::nullopt,
             0,
             0,
             std::nullopt};
    for (const auto& layer : net) {
        merged.push_back(layer.deploy());
        r.trainable += layer.trainable_parameters();
    }
    r.deployed_accuracy = accuracy(deployed_predictions(merged, test.images), test.labels);
    r.weight_kib = deployed_kib(base) + 4.0 * double(r.trainable) / 1024.0;
    r.seconds = seconds_since(start);
    results.push_back(r);
    std::printf("%s: test accuracy %.4f with the adapters, %.4f merged and re-quantized to 2 bits; %ld trainable\n",
                r.method.c_str(), r.accuracy, *r.deployed_accuracy, r.trainable);
}

/// The 2-bit RTN layers with their group scales and biases distilled to the float model's outputs on
/// the training images (codes frozen); deployed bit-exact.
void run_dwq(const Mlp& float_model, const Split& train_split, const Split& test, const TrainSettings& settings,
             std::uint64_t seed, std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    const auto base = deploy<2>(float_model, PtqMethod::rtn, RowMatrix());
    std::mt19937_64 rng(seed + 300);
    const auto net = train_dwq(base, float_model, train_split, settings, rng);
    std::vector<lowbit::QuantizedLinear<group_size, 2>> deployed;
    Result r{"DWQ RTN",   2, accuracy(argmax_rows(layers_logits(net, test.images)), test.labels), std::nullopt, 0, 0,
             std::nullopt};
    for (const auto& layer : net) {
        deployed.push_back(layer.deploy());
        r.trainable += long(layer.weight().scales.size() + layer.weight().biases.size());
    }
    r.deployed_accuracy = accuracy(deployed_predictions(deployed, test.images), test.labels);
    r.weight_kib = deployed_kib(deployed);
    r.seconds = seconds_since(start);
    results.push_back(r);
    std::printf("DWQ RTN 2-bit: test accuracy %.4f, deployed %.4f; %ld trainable\n", r.accuracy, *r.deployed_accuracy,
                r.trainable);
}

/// The float model trained for as many more epochs, at the same learning rate, as each QAT run: what
/// QAT's accuracy should be compared with.
double run_float_fine_tune(const Mlp& float_model, const Split& train_split, const Split& test,
                           const TrainSettings& settings, std::uint64_t seed, std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    Mlp model = float_model;
    std::mt19937_64 rng(seed + 100);
    const double epoch_seconds = train_weights_and_biases(model.dense, train_split, settings, rng);
    const double acc = accuracy(argmax_rows(layers_logits(model.dense, test.images)), test.labels);
    results.push_back({"float fine-tuned", 32, acc, std::nullopt, 0, seconds_since(start), std::nullopt,
                       float_parameters(), 4.0 * double(float_parameters()) / 1024.0, epoch_seconds});
    std::printf("float fine-tuned %d more epochs: test accuracy %.4f\n", settings.epochs, acc);
    return acc;
}

/// BitNet b1.58 fine-tuned through lowbit::BitLinear, then deployed with BitLinear::deploy() as
/// lowbit::TernaryLinear (packed 2-bit codes), whose logits equal the trained ones bit for bit.
double run_bitnet(const Mlp& float_model, const Split& train_split, const Split& test, const TrainSettings& settings,
                  std::mt19937_64& rng, std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    auto net = bitnet_layers(float_model);
    train_weights_and_biases(net, train_split, settings, rng);
    std::vector<lowbit::TernaryLinear> deployed_net;
    for (const auto& layer : net) deployed_net.push_back(layer.deploy(lowbit::TernaryFormat::i2));
    const std::vector<int> trained = argmax_rows(layers_logits(net, test.images));
    const std::vector<int> deployed = argmax_rows(layers_logits(deployed_net, test.images));
    Result result;
    result.method = "BitNet b1.58";
    result.bits = 1.58;
    result.accuracy = accuracy(trained, test.labels);
    result.deployed_accuracy = accuracy(deployed, test.labels);
    for (std::size_t i = 0; i < trained.size(); ++i) result.deployed_disagreements += trained[i] != deployed[i];
    result.trainable = float_parameters();
    for (int l = 0; l < layers; ++l)  // I2 codes (2 bits a weight), a float scale, the float bias
        result.weight_kib +=
            (double(layer_widths[l]) * layer_widths[l + 1] / 4.0 + 4.0 + 4.0 * layer_widths[l + 1]) / 1024.0;
    result.seconds = seconds_since(start);
    results.push_back(result);
    std::printf("BitNet b1.58 (BitLinear): test accuracy %.4f; deployed (TernaryLinear, 2-bit codes) %.4f, %zu "
                "predictions differ\n",
                result.accuracy, *result.deployed_accuracy, result.deployed_disagreements);
    return result.accuracy;
}

// ---------------------------------------------------------------------------------------------

const Result& find(const std::vector<Result>& results, const std::string& method, double bits) {
    for (const Result& r : results)
        if (r.method == method && r.bits == bits) return r;
    throw std::logic_error("no result for " + method);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options options = parse(argc, argv);
        lowbit::set_num_threads(options.threads);
        Eigen::setNbThreads(options.threads == 0 ? 0 : options.threads);

        Split train_split = load_split(options.data_dir, "train", padded_features);
        const Split test = load_split(options.data_dir, "t10k", padded_features);
        if (options.subset > 0 && options.subset < train_split.images.rows()) {
            train_split.images.conservativeResize(options.subset, Eigen::NoChange);
            train_split.labels.resize(options.subset);
        }
        std::printf("Fashion-MNIST from %s: %td training and %td test images; 784 pixels padded with zeros to %d "
                    "inputs (13 groups of 64; the padding meets zero inputs and changes nothing in the float model)\n",
                    options.data_dir.c_str(), train_split.images.rows(), test.images.rows(), padded_features);

        std::vector<Result> results;
        std::mt19937_64 rng(options.seed);
        const TrainSettings float_settings{options.epochs, 1e-3f};
        const TrainSettings qat_settings{std::max(1, options.epochs / 2), 3e-4f};

        auto start = std::chrono::steady_clock::now();
        Mlp float_model = initial_mlp(rng);
        train_weights_and_biases(float_model.dense, train_split, float_settings, rng);
        const double float_acc = accuracy(argmax_rows(layers_logits(float_model.dense, test.images)), test.labels);
        results.push_back({"float", 32, float_acc, std::nullopt, 0, seconds_since(start), std::nullopt,
                           float_parameters(), 4.0 * double(float_parameters()) / 1024.0});
        std::printf("float: test accuracy %.4f after %d epochs\n", float_acc, options.epochs);
        const double fine_tuned_acc =
            run_float_fine_tune(float_model, train_split, test, qat_settings, options.seed, results);

        // Calibration: the first training images (never test images).
        const RowMatrix calibration =
            train_split.images.topRows(std::min<Eigen::Index>(options.calibration, train_split.images.rows()));
        run_ptq<8>(float_model, PtqMethod::rtn, calibration, test, results);
        run_ptq_methods<4>(float_model, calibration, test, results);
        run_ptq_methods<3>(float_model, calibration, test, results);
        run_ptq_methods<2>(float_model, calibration, test, results);

        run_qat<4>(float_model, train_split, test, qat_settings, options.seed, results);
        run_qat<3>(float_model, train_split, test, qat_settings, options.seed, results);
        run_qat<2>(float_model, train_split, test, qat_settings, options.seed, results);

        const double bitnet_acc = run_bitnet(float_model, train_split, test, qat_settings, rng, results);

        // Training through frozen 2-bit layers: LoRA adapters at the float learning rate, DWQ's scales
        // and biases at a tenth of QAT's.
        const TrainSettings adapter_settings{qat_settings.epochs, 1e-3f};
        for (PtqMethod method : {PtqMethod::rtn, PtqMethod::gptq})
            for (int rank : {8, 32})
                run_lora(float_model, method, rank, calibration, train_split, test, adapter_settings, options.seed,
                         results);
        run_dwq(float_model, train_split, test, TrainSettings{qat_settings.epochs, 3e-5f}, options.seed, results);

        print_table(results);
        for (int bits : {4, 3, 2})
            std::printf("QAT %d-bit (deployed) against float: %+.4f; against the float model fine-tuned as long: %+.4f\n",
                        bits, *find(results, "QAT", bits).deployed_accuracy - float_acc,
                        *find(results, "QAT", bits).deployed_accuracy - fine_tuned_acc);
        // The same epochs of the same data, timed by train() itself: what fake quantization costs.
        const double float_epoch = find(results, "float fine-tuned", 32).epoch_seconds;
        for (int bits : {4, 3, 2})
            std::printf("QAT %d-bit epoch %.3f s against the float epoch's %.3f s: %.2fx\n", bits,
                        find(results, "QAT", bits).epoch_seconds, float_epoch,
                        find(results, "QAT", bits).epoch_seconds / float_epoch);
        std::filesystem::create_directories(options.out_dir);
        write_csv(options.out_dir + "/fashion_mnist.csv", results);
        write_svg(options.out_dir + "/fashion_mnist.svg", results);
        std::printf("wrote %s/fashion_mnist.csv and %s/fashion_mnist.svg\n", options.out_dir.c_str(),
                    options.out_dir.c_str());

        if (options.check) {
            // Thresholds a model that does not learn (chance is 0.10), a deployment that does not compute
            // what training computed, or a PTQ method that loses to rounding, fails. Loose enough for a
            // small subset and few epochs.
            std::vector<std::string> failures;
            if (float_acc < 0.75) failures.push_back("float accuracy " + std::to_string(float_acc) + " < 0.75");
            for (int bits : {4, 3, 2}) {
                const Result& qat = find(results, "QAT", bits);
                if (qat.accuracy < 0.70)
                    failures.push_back("QAT " + std::to_string(bits) + "-bit accuracy " + std::to_string(qat.accuracy) + " < 0.70");
                // QatLinear's forward is its deployed layer's: no prediction may differ.
                if (qat.deployed_disagreements != 0)
                    failures.push_back("QAT " + std::to_string(bits) +
                                       "-bit: deployed QuantizedLinear disagrees with "
                                       "QAT evaluation on " +
                                       std::to_string(qat.deployed_disagreements) + " test images (must be 0)");
                // The methods minimise weight or output error, not accuracy: allow a point of noise.
                const double rtn = find(results, "PTQ RTN", bits).accuracy;
                for (const char* method : {"PTQ clip", "PTQ GPTQ"})
                    if (find(results, method, bits).accuracy < rtn - 0.01)
                        failures.push_back(std::string(method) + " " + std::to_string(bits) + "-bit accuracy " +
                                           std::to_string(find(results, method, bits).accuracy) +
                                           " is more than 0.01 below RTN's " + std::to_string(rtn));
            }
            if (find(results, "QAT", 2).accuracy < find(results, "PTQ RTN", 2).accuracy)
                failures.push_back("QAT 2-bit is below PTQ RTN 2-bit");
            // int8 activations (per-row absmax) cost little on a model whose float accuracy is intact.
            for (int bits : {8, 4}) {
                const Result& r = find(results, "PTQ RTN", bits);
                if (*r.int8_accuracy < r.accuracy - 0.02)
                    failures.push_back("PTQ RTN " + std::to_string(bits) + "-bit with int8 activations: " +
                                       std::to_string(*r.int8_accuracy) + " is more than 0.02 below " +
                                       std::to_string(r.accuracy));
            }
            // Training through the frozen 2-bit layers must recover some of what rounding lost, and DWQ's
            // deployed layers are the trained ones (the same product on the same codes).
            const double rtn2 = find(results, "PTQ RTN", 2).accuracy;
            for (const char* method : {"QLoRA RTN r8", "DWQ RTN"})
                if (find(results, method, 2).accuracy <= rtn2)
                    failures.push_back(std::string(method) + " accuracy " +
                                       std::to_string(find(results, method, 2).accuracy) +
                                       " is not above PTQ RTN 2-bit's " + std::to_string(rtn2));
            if (const Result& dwq = find(results, "DWQ RTN", 2); *dwq.deployed_accuracy != dwq.accuracy)
                failures.push_back("DWQ: the deployed layers' accuracy differs from the trained ones'");
            if (bitnet_acc < 0.60) failures.push_back("BitNet accuracy " + std::to_string(bitnet_acc) + " < 0.60");
            // TernaryLinear computes BitLinear's integers and floats in the same order: no prediction may differ.
            if (const std::size_t differ = find(results, "BitNet b1.58", 1.58).deployed_disagreements; differ != 0)
                failures.push_back("BitNet: deployed TernaryLinear disagrees with BitLinear on " + std::to_string(differ) +
                                   " test images (must be 0)");
            for (const auto& failure : failures) std::fprintf(stderr, "check failed: %s\n", failure.c_str());
            if (!failures.empty()) return 1;
            std::printf("check: all thresholds hold\n");
        }
        return 0;
    } catch (const DataError& error) {
        std::fprintf(stderr, "lowbit-fashion-mnist: %s\n", error.what());
        return 2;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "lowbit-fashion-mnist: %s\n", error.what());
        return 1;
    }
}
