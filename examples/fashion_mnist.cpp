// lowbit-fashion-mnist: does quantization-aware training with lowbit recover the accuracy that plain
// rounding loses, and does the deployed model compute what training saw? Answered on real data.
//
// Trains an MLP 784-256-128-10 (ReLU, softmax cross-entropy, Adam) in plain Eigen on Fashion-MNIST,
// then reports test accuracy for:
//   - float32;
//   - post-training quantization (PTQ): the float weights converted to QuantizedLinear at 8/4/3/2 bits,
//     group 64, activations left in float;
//   - QAT at 4/3/2 bits: fine-tuned from the float model with GroupFakeQuantize<64, Bits> on the
//     weights and an 8-bit FakeQuantize on each layer's input, then deployed as QuantizedLinear (the
//     deployed model's accuracy is measured separately, through lowbit's packed kernels);
//   - BitNet b1.58: fine-tuned with absmean ternary weights through ternary_ste and per-token 8-bit
//     activations through int8_ste.
// 784 is a multiple of no supported group size, so images are padded with zero features to 832 = 13 x 64
// inputs; the padded columns meet zero inputs, so they change nothing in the float model.
//
// Prints a table and writes fashion_mnist.csv and fashion_mnist.svg (accuracy against bits) to --out.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "fashion_mnist_data.hpp"

namespace {

using fashion_mnist::RowMatrix;
using Vector = Eigen::VectorXf;

constexpr int padded_features = 832;  // 784 pixels + 48 zero features: 13 groups of 64
constexpr int group_size = 64;
constexpr std::array<int, 4> layer_widths = {padded_features, 256, 128, fashion_mnist::classes};
constexpr int layers = 3;

struct Options {
    std::string data_dir = "/usr/share/datasets/fashion-mnist";
    int epochs = 12;       ///< float training epochs; each QAT fine-tune runs half as many (at least 1)
    int subset = 0;        ///< train on the first N training images (0: all 60000)
    int threads = 0;       ///< 0: all hardware threads
    std::string out_dir = ".";
    bool check = false;    ///< exit 1 unless the thresholds of a learning, matching model hold
    std::uint64_t seed = 1;
};

// ---------------------------------------------------------------------------------------------
// The model and its training loop, in plain Eigen.

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
        std::normal_distribution<float> he(0.0f, std::sqrt(2.0f / static_cast<float>(l == 0 ? fashion_mnist::pixels : in)));
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

void adam_step(Dense& d, const RowMatrix& weight_grad, const Vector& bias_grad, float learning_rate, int step) {
    constexpr float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
    const float correction1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    const float correction2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    const float step_size = learning_rate * std::sqrt(correction2) / correction1;
    d.weight_m = beta1 * d.weight_m + (1 - beta1) * weight_grad;
    d.weight_v = beta2 * d.weight_v + (1 - beta2) * weight_grad.cwiseAbs2();
    d.weight.array() -= step_size * d.weight_m.array() / (d.weight_v.array().sqrt() + epsilon);
    d.bias_m = beta1 * d.bias_m + (1 - beta1) * bias_grad;
    d.bias_v = beta2 * d.bias_v + (1 - beta2) * bias_grad.cwiseAbs2();
    d.bias.array() -= step_size * d.bias_m.array() / (d.bias_v.array().sqrt() + epsilon);
}

/// Minibatch Adam on softmax cross-entropy with a cosine learning-rate decay; gradients flow through
/// the quantizers by their straight-through estimators.
void train(Mlp& model, const Quantization& q, const fashion_mnist::Split& data, const TrainSettings& settings,
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
            // Softmax cross-entropy gradient with respect to the logits, averaged over the batch.
            RowMatrix grad = pre_activations[layers - 1];
            for (int i = 0; i < size; ++i) {
                auto row = grad.row(i);
                row.array() -= row.maxCoeff();
                row = row.array().exp().matrix();
                row /= row.sum();
                row(data.labels[order[first + i]]) -= 1.0f;
            }
            grad /= static_cast<float>(size);

            ++step;
            const float progress = static_cast<float>(step) / static_cast<float>(total_steps);
            const float learning_rate = settings.learning_rate * 0.5f * (1.0f + std::cos(3.14159265f * progress));
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
}

// ---------------------------------------------------------------------------------------------
// Quantization schemes.

/// 8-bit asymmetric fake quantizers, one per layer input (all inputs are >= 0: pixels and ReLU outputs),
/// with moving-average min-max observers as in PyTorch's QAT.
struct ActivationQuantizers {
    using Quantizer = lowbit::FakeQuantize<8, false>;
    std::array<Quantizer, layers> per_layer;

    ActivationQuantizers() {
        lowbit::FakeQuantConfig config;
        config.observer = lowbit::Observer::moving_average;
        for (auto& quantizer : per_layer) quantizer = Quantizer(config);
    }
    RowMatrix forward(int layer, const RowMatrix& input, bool observe) {
        if (observe) per_layer[layer].observe(input);
        return per_layer[layer].forward(input);
    }
    RowMatrix backward(int layer, const RowMatrix& grad, const RowMatrix& input) const {
        return per_layer[layer].backward_clamped(grad, input);
    }
};

template <int Bits>
Quantization group_qat(std::shared_ptr<ActivationQuantizers> activations) {
    Quantization q;
    q.name = "QAT " + std::to_string(Bits) + "-bit";
    q.weight = [](int, const RowMatrix& w) -> RowMatrix { return lowbit::GroupFakeQuantize<group_size, Bits>().forward(w); };
    q.weight_grad = [](int, const RowMatrix& grad, const RowMatrix& w) -> RowMatrix {
        return lowbit::GroupFakeQuantize<group_size, Bits>().backward(grad, w);
    };
    q.activation = [activations](int l, const RowMatrix& a, bool observe) { return activations->forward(l, a, observe); };
    q.activation_grad = [activations](int l, const RowMatrix& g, const RowMatrix& a) { return activations->backward(l, g, a); };
    return q;
}

/// BitNet b1.58: per-tensor absmean ternary weights, per-token absmax int8 activations, identity STE.
Quantization bitnet_qat() {
    Quantization q;
    q.name = "BitNet b1.58";
    q.weight = [](int, const RowMatrix& w) -> RowMatrix { return lowbit::ternary_ste(w, lowbit::absmean_scale(w)); };
    q.weight_grad = [](int, const RowMatrix& grad, const RowMatrix&) -> RowMatrix { return lowbit::ste_backward(grad); };
    q.activation = [](int, const RowMatrix& a, bool) -> RowMatrix { return lowbit::fake_quantize_activations_int8(a); };
    q.activation_grad = [](int, const RowMatrix& grad, const RowMatrix&) -> RowMatrix { return lowbit::ste_backward(grad); };
    return q;
}

// ---------------------------------------------------------------------------------------------
// Deployment: the trained float weights converted to lowbit::QuantizedLinear.

template <int Bits>
std::vector<int> deployed_predictions(const Mlp& model, const RowMatrix& x, const Quantization* activations) {
    std::vector<lowbit::QuantizedLinear<group_size, Bits>> deployed;
    for (const Dense& d : model.dense) {
        lowbit::Linear linear{d.weight, Eigen::VectorXf(d.bias)};
        deployed.push_back(lowbit::QuantizedLinear<group_size, Bits>::from_linear(linear));
    }
    RowMatrix input = x;
    for (int l = 0; l < layers; ++l) {
        const RowMatrix a = activations != nullptr ? activations->activation(l, input, false) : input;
        RowMatrix z = deployed[l].forward(a);
        input = l + 1 < layers ? relu(z) : z;
    }
    return argmax_rows(input);
}

// ---------------------------------------------------------------------------------------------
// Reporting.

struct Result {
    std::string method;  ///< "float", "PTQ", "QAT", "BitNet b1.58"
    double bits;         ///< weight bits (32 for float, 1.58 for ternary)
    double accuracy;     ///< test accuracy as evaluated (for QAT: during QAT evaluation)
    std::optional<double> deployed_accuracy;  ///< through QuantizedLinear, measured separately
    std::size_t deployed_disagreements = 0;   ///< test images where deployed and QAT predictions differ
    double seconds = 0;
};

void print_table(const std::vector<Result>& results) {
    std::printf("\n%-14s %6s %-34s %10s %10s %9s\n", "method", "bits", "weights / activations", "accuracy",
                "deployed", "time");
    for (const Result& r : results) {
        std::string what;
        if (r.method == "float") what = "fp32 / fp32";
        else if (r.method == "PTQ") what = "QuantizedLinear g64 / fp32";
        else if (r.method == "QAT") what = "GroupFakeQuantize g64 / 8-bit FQ";
        else what = "absmean ternary / int8 per token";
        char bits[16], deployed[32];
        std::snprintf(bits, sizeof bits, r.bits == 32 ? "%.0f" : (r.bits == std::floor(r.bits) ? "%.0f" : "%.2f"), r.bits);
        if (r.deployed_accuracy) std::snprintf(deployed, sizeof deployed, "%.4f", *r.deployed_accuracy);
        else std::snprintf(deployed, sizeof deployed, "-");
        std::printf("%-14s %6s %-34s %10.4f %10s %8.1fs\n", r.method.c_str(), bits, what.c_str(), r.accuracy, deployed,
                    r.seconds);
    }
}

void write_csv(const std::string& path, const std::vector<Result>& results) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << "method,bits,accuracy,deployed_accuracy,deployed_disagreements,seconds\n";
    for (const Result& r : results) {
        out << r.method << ',' << r.bits << ',' << r.accuracy << ',';
        if (r.deployed_accuracy) out << *r.deployed_accuracy;
        out << ',' << r.deployed_disagreements << ',' << r.seconds << '\n';
    }
}

/// Accuracy against weight bits: PTQ and QAT as two lines, BitNet as a point at 1.58 bits, float as a
/// dashed reference line.
void write_svg(const std::string& path, const std::vector<Result>& results) {
    constexpr double width = 640, height = 420, left = 70, right = 160, top = 40, bottom = 60;
    const double plot_w = width - left - right, plot_h = height - top - bottom;
    double low = 1.0, high = 0.0;
    for (const Result& r : results) {
        low = std::min(low, r.accuracy);
        high = std::max(high, r.accuracy);
    }
    // Ticks every 0.01 for a narrow range, every 0.05 for a wide one; the axis ends on ticks.
    const double tick = high - low <= 0.1 ? 0.01 : 0.05;
    low = std::floor(low / tick - 1e-9) * tick;
    high = std::min(1.0, std::ceil(high / tick + 1e-9) * tick);
    // x: log2 of bits from 1.5 to 8.
    auto x_of = [&](double bits) { return left + plot_w * (std::log2(bits) - std::log2(1.5)) / (3.0 - std::log2(1.5)); };
    auto y_of = [&](double acc) { return top + plot_h * (high - acc) / (high - low); };

    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">Fashion-MNIST MLP 784-256-128-10: test accuracy against weight bits</text>\n";
    // Axes, grid and ticks.
    for (double acc = low; acc <= high + 1e-9; acc += tick) {
        out << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y_of(acc) << "\" y2=\"" << y_of(acc)
            << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 8 << "\" y=\"" << y_of(acc) + 4
            << "\" text-anchor=\"end\">" << std::to_string(acc + 1e-9).substr(0, 4) << "</text>\n";
    }
    for (double bits : {1.58, 2.0, 3.0, 4.0, 8.0}) {
        out << "<line x1=\"" << x_of(bits) << "\" x2=\"" << x_of(bits) << "\" y1=\"" << top << "\" y2=\"" << top + plot_h
            << "\" stroke=\"#eee\"/>\n<text x=\"" << x_of(bits) << "\" y=\"" << top + plot_h + 18
            << "\" text-anchor=\"middle\">" << (bits == 1.58 ? std::string("1.58") : std::to_string(int(bits)))
            << "</text>\n";
    }
    out << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 18 << "\" text-anchor=\"middle\">weight bits (log scale)</text>\n"
        << "<text transform=\"translate(18," << top + plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">test accuracy</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
        << "\" fill=\"none\" stroke=\"#444\"/>\n";
    // QAT is drawn at its deployed accuracy (what a user of the converted model gets).
    auto shown = [](const Result& r) { return r.method == "QAT" && r.deployed_accuracy ? *r.deployed_accuracy : r.accuracy; };
    auto series = [&](const std::string& method, const char* colour, const char* label, double legend_y) {
        std::vector<const Result*> points;
        for (const Result& r : results)
            if (r.method == method) points.push_back(&r);
        std::sort(points.begin(), points.end(), [](auto* a, auto* b) { return a->bits < b->bits; });
        if (points.empty()) return;
        out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
        for (const Result* p : points) out << x_of(p->bits) << ',' << y_of(shown(*p)) << ' ';
        out << "\"/>\n";
        for (const Result* p : points)
            out << "<circle cx=\"" << x_of(p->bits) << "\" cy=\"" << y_of(shown(*p)) << "\" r=\"4\" fill=\"" << colour
                << "\"><title>" << method << ' ' << p->bits << " bits: " << shown(*p) << "</title></circle>\n";
        out << "<line x1=\"" << left + plot_w + 14 << "\" x2=\"" << left + plot_w + 38 << "\" y1=\"" << legend_y
            << "\" y2=\"" << legend_y << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/>\n<text x=\""
            << left + plot_w + 44 << "\" y=\"" << legend_y + 4 << "\">" << label << "</text>\n";
    };
    for (const Result& r : results) {
        if (r.method != "float") continue;
        out << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y_of(r.accuracy) << "\" y2=\""
            << y_of(r.accuracy) << "\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n"
            << "<line x1=\"" << left + plot_w + 14 << "\" x2=\"" << left + plot_w + 38 << "\" y1=\"" << top + 10
            << "\" y2=\"" << top + 10 << "\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n<text x=\"" << left + plot_w + 44
            << "\" y=\"" << top + 14 << "\">float32</text>\n";
    }
    series("PTQ", "#d62728", "PTQ", top + 32);
    series("QAT", "#1f77b4", "QAT (deployed)", top + 54);
    series("BitNet b1.58", "#2ca02c", "BitNet b1.58", top + 76);
    out << "</svg>\n";
}

// ---------------------------------------------------------------------------------------------

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
        else if (arg == "--seed") options.seed = static_cast<std::uint64_t>(integer(arg, value(), 0));
        else if (arg == "--check") options.check = true;
        else if (arg == "--help" || arg == "-h") {
            std::printf("usage: lowbit-fashion-mnist [--data DIR] [--epochs N] [--subset N] [--threads N] [--out DIR] "
                        "[--seed N] [--check]\n");
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

template <int Bits>
void run_ptq(const Mlp& model, const fashion_mnist::Split& test, std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    const double acc = accuracy(deployed_predictions<Bits>(model, test.images, nullptr), test.labels);
    results.push_back({"PTQ", double(Bits), acc, acc, 0, seconds_since(start)});
    std::printf("PTQ %d-bit: test accuracy %.4f\n", Bits, acc);
}

template <int Bits>
void run_qat(const Mlp& float_model, const fashion_mnist::Split& train_split, const fashion_mnist::Split& test,
             const TrainSettings& settings, std::uint64_t seed, std::vector<Result>& results) {
    const auto start = std::chrono::steady_clock::now();
    Mlp model = float_model;
    auto activations = std::make_shared<ActivationQuantizers>();
    const Quantization q = group_qat<Bits>(activations);
    std::mt19937_64 rng(seed + Bits);
    train(model, q, train_split, settings, rng);
    const std::vector<int> qat_predictions = argmax_rows(logits(model, q, test.images));
    const std::vector<int> deployed = deployed_predictions<Bits>(model, test.images, &q);
    Result r{"QAT", double(Bits), accuracy(qat_predictions, test.labels), accuracy(deployed, test.labels), 0, 0};
    for (std::size_t i = 0; i < deployed.size(); ++i) r.deployed_disagreements += deployed[i] != qat_predictions[i];
    r.seconds = seconds_since(start);
    results.push_back(r);
    std::printf("QAT %d-bit: test accuracy %.4f in QAT evaluation, %.4f deployed as QuantizedLinear "
                "(%zu of %zu predictions differ)\n",
                Bits, r.accuracy, *r.deployed_accuracy, r.deployed_disagreements, deployed.size());
}

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

        fashion_mnist::Split train_split = fashion_mnist::load_split(options.data_dir, "train", padded_features);
        const fashion_mnist::Split test = fashion_mnist::load_split(options.data_dir, "t10k", padded_features);
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
        const Quantization none{"float", {}, {}, {}, {}};
        train(float_model, none, train_split, float_settings, rng);
        const double float_acc = accuracy(argmax_rows(logits(float_model, none, test.images)), test.labels);
        results.push_back({"float", 32, float_acc, std::nullopt, 0, seconds_since(start)});
        std::printf("float: test accuracy %.4f after %d epochs\n", float_acc, options.epochs);

        run_ptq<8>(float_model, test, results);
        run_ptq<4>(float_model, test, results);
        run_ptq<3>(float_model, test, results);
        run_ptq<2>(float_model, test, results);

        run_qat<4>(float_model, train_split, test, qat_settings, options.seed, results);
        run_qat<3>(float_model, train_split, test, qat_settings, options.seed, results);
        run_qat<2>(float_model, train_split, test, qat_settings, options.seed, results);

        start = std::chrono::steady_clock::now();
        Mlp bitnet_model = float_model;
        const Quantization bitnet = bitnet_qat();
        train(bitnet_model, bitnet, train_split, qat_settings, rng);
        const double bitnet_acc = accuracy(argmax_rows(logits(bitnet_model, bitnet, test.images)), test.labels);
        results.push_back({"BitNet b1.58", 1.58, bitnet_acc, std::nullopt, 0, seconds_since(start)});
        std::printf("BitNet b1.58: test accuracy %.4f\n", bitnet_acc);

        print_table(results);
        std::filesystem::create_directories(options.out_dir);
        write_csv(options.out_dir + "/fashion_mnist.csv", results);
        write_svg(options.out_dir + "/fashion_mnist.svg", results);
        std::printf("wrote %s/fashion_mnist.csv and %s/fashion_mnist.svg\n", options.out_dir.c_str(),
                    options.out_dir.c_str());

        if (options.check) {
            // Thresholds a model that does not learn (chance is 0.10), or a deployment that does not
            // compute what training computed, fails. Loose enough for a small subset and few epochs.
            std::vector<std::string> failures;
            if (float_acc < 0.75) failures.push_back("float accuracy " + std::to_string(float_acc) + " < 0.75");
            for (int bits : {4, 3, 2}) {
                const Result& qat = find(results, "QAT", bits);
                if (qat.accuracy < 0.70)
                    failures.push_back("QAT " + std::to_string(bits) + "-bit accuracy " + std::to_string(qat.accuracy) + " < 0.70");
                // The deployed matmul sums s * sum(x q) + b * sum(x) per group on packed codes, training
                // sums x * w_fq in float: logits agree to rounding, so only a near-tie can flip a prediction.
                const std::size_t allowed = std::max<std::size_t>(2, test.labels.size() / 1000);
                if (qat.deployed_disagreements > allowed)
                    failures.push_back("QAT " + std::to_string(bits) + "-bit: deployed QuantizedLinear disagrees with "
                                       "QAT evaluation on " + std::to_string(qat.deployed_disagreements) +
                                       " test images (allowed: " + std::to_string(allowed) + ")");
            }
            if (find(results, "QAT", 2).accuracy < find(results, "PTQ", 2).accuracy)
                failures.push_back("QAT 2-bit is below PTQ 2-bit");
            if (bitnet_acc < 0.60) failures.push_back("BitNet accuracy " + std::to_string(bitnet_acc) + " < 0.60");
            for (const auto& failure : failures) std::fprintf(stderr, "check failed: %s\n", failure.c_str());
            if (!failures.empty()) return 1;
            std::printf("check: all thresholds hold\n");
        }
        return 0;
    } catch (const fashion_mnist::DataError& error) {
        std::fprintf(stderr, "lowbit-fashion-mnist: %s\n", error.what());
        return 2;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "lowbit-fashion-mnist: %s\n", error.what());
        return 1;
    }
}
