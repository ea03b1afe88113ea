// The Fashion-MNIST example's results: the printed table, the CSV and the SVG plot.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

struct Result {
    std::string method;  ///< "float", "float fine-tuned", "PTQ RTN" / "PTQ clip" / "PTQ HQQ" / "PTQ GPTQ", "QAT", "BitNet b1.58"
    double bits;         ///< weight bits (32 for float, 1.58 for ternary)
    double accuracy;     ///< test accuracy as evaluated (for QAT: during QAT evaluation)
    std::optional<double> deployed_accuracy;  ///< through QuantizedLinear, measured separately
    std::size_t deployed_disagreements = 0;   ///< test images where deployed and QAT predictions differ
    double seconds = 0;
    std::optional<double> int8_accuracy;  ///< the deployed model with int8 activations (Activations::int8)
    long trainable = 0;                   ///< parameters the row's training updated (0: none, post-training only)
    double weight_kib = 0;  ///< the weights as the row's model runs: packed codes, scales, biases, adapters
    double epoch_seconds = 0;  ///< seconds per training epoch (train()'s own timer), 0 where not timed
};

/// The weights / activations column of the table.
inline std::string scheme_text(const std::string& method) {
    if (method == "float" || method == "float fine-tuned") return "fp32 / fp32";
    if (method == "PTQ RTN") return "MLX round-to-nearest g64 / fp32";
    if (method == "PTQ clip") return "clip search (act.-weighted) g64 / fp32";
    if (method == "PTQ HQQ") return "HQQ (l0.7, no data) g64 / fp32";
    if (method == "PTQ GPTQ") return "GPTQ g64 / fp32";
    if (method == "QAT") return "QatLinear g64 / int8 per group";
    if (method.rfind("QLoRA", 0) == 0) return "frozen g64 base + float LoRA / fp32";
    if (method.rfind("DWQ", 0) == 0) return "g64, scales+biases distilled / fp32";
    return "absmean ternary / int8 per token";
}

inline void print_table(const std::vector<Result>& results) {
    std::printf("\n%-16s %5s %-40s %9s %9s %9s %9s %8s %8s\n", "method", "bits", "weights / activations", "accuracy",
                "deployed", "int8 act", "trainable", "KiB", "time");
    for (const Result& r : results) {
        char bits[16], deployed[32], int8[32];
        std::snprintf(bits, sizeof bits, r.bits == std::floor(r.bits) ? "%.0f" : "%.2f", r.bits);
        if (r.deployed_accuracy) std::snprintf(deployed, sizeof deployed, "%.4f", *r.deployed_accuracy);
        else std::snprintf(deployed, sizeof deployed, "-");
        if (r.int8_accuracy) std::snprintf(int8, sizeof int8, "%.4f", *r.int8_accuracy);
        else std::snprintf(int8, sizeof int8, "-");
        std::printf("%-16s %5s %-40s %9.4f %9s %9s %9ld %8.1f %7.1fs\n", r.method.c_str(), bits,
                    scheme_text(r.method).c_str(), r.accuracy, deployed, int8, r.trainable, r.weight_kib, r.seconds);
    }
}

inline void write_csv(const std::string& path, const std::vector<Result>& results) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << "method,bits,accuracy,deployed_accuracy,deployed_disagreements,seconds,int8_activations_accuracy,trainable,"
           "weight_kib\n";
    for (const Result& r : results) {
        out << r.method << ',' << r.bits << ',' << r.accuracy << ',';
        if (r.deployed_accuracy) out << *r.deployed_accuracy;
        out << ',' << r.deployed_disagreements << ',' << r.seconds << ',';
        if (r.int8_accuracy) out << *r.int8_accuracy;
        out << ',' << r.trainable << ',' << r.weight_kib << '\n';
    }
}

/// Accuracy against weight bits: PTQ (RTN and GPTQ) and QAT as lines, BitNet as a point at 1.58 bits, float as a
/// dashed reference line.
inline void write_svg(const std::string& path, const std::vector<Result>& results) {
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
        if (r.method != "float") continue;  // (the fine-tuned float model is in the table, not the plot)
        out << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y_of(r.accuracy) << "\" y2=\""
            << y_of(r.accuracy) << "\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n"
            << "<line x1=\"" << left + plot_w + 14 << "\" x2=\"" << left + plot_w + 38 << "\" y1=\"" << top + 10
            << "\" y2=\"" << top + 10 << "\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n<text x=\"" << left + plot_w + 44
            << "\" y=\"" << top + 14 << "\">float32</text>\n";
    }
    series("PTQ RTN", "#d62728", "PTQ RTN", top + 32);
    series("PTQ GPTQ", "#ff7f0e", "PTQ GPTQ", top + 54);
    series("QAT", "#1f77b4", "QAT (deployed)", top + 76);
    series("BitNet b1.58", "#2ca02c", "BitNet b1.58", top + 98);
    out << "</svg>\n";
}

}  // namespace fashion_mnist
