// The results of lowbit-minilm: one row per model (float, and each quantized variant), written as a
// table, a CSV and an SVG chart (mean cosine to float against bits per weight, one line per group size).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace minilm {

struct ResultRow {
    std::string name;              ///< "float", "rtn b4 g64 f32", "gptq b4 g64 int8", ...
    std::string method = "float";  ///< "float", or the quantization method's --methods name
    int bits = 32;                 ///< 32 for float
    int group_size = 0;            ///< 0 for float
    std::string activations;       ///< "f32" or "int8"
    double bits_per_weight = 32;   ///< codes + float32 scale and bias per group
    std::size_t memory_bytes = 0;  ///< all linear layers' parameters
    double memory_ratio = 1;       ///< memory_bytes / float's
    double mean_cosine = 1, worst_cosine = 1, top1_agreement = 1, top10_overlap = 1;
    double weight_error_mean = 0, weight_error_max = 0, output_error_mean = 0, output_error_max = 0;
    std::vector<double> layer_output_errors;   ///< relative output error per linear layer
    std::vector<double> sentences_per_second;  ///< one per thread count
    std::vector<double> tokens_per_second;
    std::vector<double> linear_ms_per_sentence;  ///< time in the 36 linear layers
    std::vector<double> speedup;                 ///< float's seconds / this model's, per thread count
};

namespace report_detail {

inline double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const std::size_t middle = values.size() / 2;
    return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

}  // namespace report_detail

/// The rtn row of the same bits, group size and activations as `row`, or nullptr.
inline const ResultRow* rtn_counterpart(const std::vector<ResultRow>& rows, const ResultRow& row) {
    for (const ResultRow& r : rows)
        if (r.method == "rtn" && r.bits == row.bits && r.group_size == row.group_size && r.activations == row.activations)
            return &r;
    return nullptr;
}

inline void print_table(const std::vector<ResultRow>& rows, const std::vector<int>& thread_counts) {
    std::printf("\n| model | bits/weight | linear memory | mean cos | worst cos | top-1 | top-10 | weight err | output err |");
    for (int t : thread_counts) std::printf(" sent/s %dt | speedup %dt |", t, t);
    std::printf("\n|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (std::size_t i = 0; i < thread_counts.size(); ++i) std::printf("---:|---:|");
    std::printf("\n");
    for (const ResultRow& r : rows) {
        std::printf("| %s | %.2f | %.1f MB (%.3f) | %.6f | %.6f | %.3f | %.3f | %.4f | %.4f |", r.name.c_str(), r.bits_per_weight,
                    static_cast<double>(r.memory_bytes) / 1e6, r.memory_ratio, r.mean_cosine, r.worst_cosine, r.top1_agreement,
                    r.top10_overlap, r.weight_error_mean, r.output_error_mean);
        for (std::size_t i = 0; i < thread_counts.size(); ++i) {
            if (i < r.sentences_per_second.size() && i < r.speedup.size()) std::printf(" %.1f | %.2fx |", r.sentences_per_second[i], r.speedup[i]);
            else std::printf(" - | - |");  // not measured (a PTQ model runs the kernels of its format's RTN row)
        }
        std::printf("\n");
    }
}

/// Per model of a method other than rtn (f32 activations), its layers' relative output errors against
/// the rtn model of the same format: the mean error of both, and over the layers the median, mean and
/// largest ratio (method / rtn) and how many layers are below rtn's error.
inline void print_layer_summary(const std::vector<ResultRow>& rows) {
    bool header = false;
    for (const ResultRow& r : rows) {
        if (r.method == "float" || r.method == "rtn" || r.activations != "f32") continue;
        const ResultRow* rtn = rtn_counterpart(rows, r);
        if (rtn == nullptr || rtn->layer_output_errors.size() != r.layer_output_errors.size() || r.layer_output_errors.empty())
            continue;
        if (!header) {
            std::printf("\nper-layer relative output error against RTN's (same format, f32 activations):\n"
                        "| model | layer output err | RTN's | median ratio | mean ratio | worst ratio | layers below RTN |\n"
                        "|---|---:|---:|---:|---:|---:|---:|\n");
            header = true;
        }
        std::vector<double> ratios;
        int below = 0;
        for (std::size_t l = 0; l < r.layer_output_errors.size(); ++l) {
            ratios.push_back(r.layer_output_errors[l] / rtn->layer_output_errors[l]);
            below += r.layer_output_errors[l] < rtn->layer_output_errors[l];
        }
        double sum = 0;
        for (double ratio : ratios) sum += ratio;
        std::printf("| %s | %.4f | %.4f | %.3f | %.3f | %.3f | %d of %zu |\n", r.name.c_str(), r.output_error_mean,
                    rtn->output_error_mean, report_detail::median(ratios), sum / static_cast<double>(ratios.size()),
                    *std::max_element(ratios.begin(), ratios.end()), below, ratios.size());
    }
}

inline void write_csv(const std::string& path, const std::vector<ResultRow>& rows, const std::vector<int>& thread_counts) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << "model,method,bits,group_size,activations,bits_per_weight,linear_memory_bytes,memory_ratio,mean_cosine,worst_cosine,"
           "top1_agreement,top10_overlap,weight_error_mean,weight_error_max,output_error_mean,output_error_max";
    for (int t : thread_counts)
        out << ",sentences_per_s_" << t << "t,tokens_per_s_" << t << "t,linear_ms_per_sentence_" << t << "t,speedup_" << t << "t";
    out << '\n';
    char buffer[64];
    auto number = [&](double v) {
        std::snprintf(buffer, sizeof buffer, "%.9g", v);
        return std::string(buffer);
    };
    for (const ResultRow& r : rows) {
        out << r.name << ',' << r.method << ',' << r.bits << ',' << r.group_size << ',' << r.activations << ',' << number(r.bits_per_weight) << ','
            << r.memory_bytes << ',' << number(r.memory_ratio) << ',' << number(r.mean_cosine) << ',' << number(r.worst_cosine)
            << ',' << number(r.top1_agreement) << ',' << number(r.top10_overlap) << ',' << number(r.weight_error_mean) << ','
            << number(r.weight_error_max) << ',' << number(r.output_error_mean) << ',' << number(r.output_error_max);
        for (std::size_t i = 0; i < thread_counts.size(); ++i) {
            auto at = [&](const std::vector<double>& v) { return i < v.size() ? number(v[i]) : std::string(); };
            out << ',' << at(r.sentences_per_second) << ',' << at(r.tokens_per_second) << ',' << at(r.linear_ms_per_sentence)
                << ',' << at(r.speedup);
        }
        out << '\n';
    }
}

/// Mean cosine to float (y, scaled as 1 - cosine on a log axis so 0.9 and 0.9999 both show) against
/// bits per weight (x), one line per method, group size and activation mode (RTN coloured by group
/// size, the other methods by method; int8 activations dashed).
inline void write_svg(const std::string& path, const std::vector<ResultRow>& rows, std::size_t sentences) {
    struct Series {
        std::string method, activations;
        int group;
        bool operator<(const Series& o) const {
            return std::tie(method, group, activations) < std::tie(o.method, o.group, o.activations);
        }
    };
    std::map<Series, std::vector<const ResultRow*>> series;
    for (const ResultRow& r : rows)
        if (r.method != "float") series[{r.method, r.activations, r.group_size}].push_back(&r);
    constexpr double width = 720, left = 80, right = 210, top = 46, bottom = 60;
    const double height = std::max(440.0, top + bottom + 20.0 * static_cast<double>(series.size()) + 20);
    const double plot_w = width - left - right, plot_h = height - top - bottom;
    // y: log10(1 - cosine) from 1e-6 (top) to 1 (bottom).
    auto y_of = [&](double cosine) {
        const double gap = std::clamp(1.0 - cosine, 1e-6, 1.0);
        return top + plot_h * (std::log10(gap) + 6.0) / 6.0;
    };
    auto x_of = [&](double bpw) { return left + plot_w * (bpw - 2.0) / (10.5 - 2.0); };
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\">all-MiniLM-L6-v2: embedding cosine to float against bits per weight</text>\n"
        << "<text x=\"" << left << "\" y=\"38\" fill=\"#555\">" << sentences << " fortune sentences; bits per weight = code bits + 64 / group size (float32 scale and bias)</text>\n";
    for (int e = 0; e <= 6; ++e) {
        const double cosine = 1.0 - std::pow(10.0, -e);
        const double y = y_of(cosine);
        char label[32];
        std::snprintf(label, sizeof label, e == 0 ? "0" : "%.*f", e, cosine);
        out << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"#ddd\"/>\n"
            << "<text x=\"" << left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << label << "</text>\n";
    }
    for (int bpw = 2; bpw <= 10; ++bpw)
        out << "<line x1=\"" << x_of(bpw) << "\" x2=\"" << x_of(bpw) << "\" y1=\"" << top << "\" y2=\"" << top + plot_h
            << "\" stroke=\"#eee\"/>\n<text x=\"" << x_of(bpw) << "\" y=\"" << top + plot_h + 18 << "\" text-anchor=\"middle\">"
            << bpw << "</text>\n";
    out << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 18 << "\" text-anchor=\"middle\">bits per weight</text>\n"
        << "<text transform=\"translate(18," << top + plot_h / 2
        << ") rotate(-90)\" text-anchor=\"middle\">mean cosine to float (log of 1 - cosine)</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
        << "\" fill=\"none\" stroke=\"#444\"/>\n";
    const std::map<int, const char*> group_colours{{32, "#d62728"}, {64, "#1f77b4"}, {128, "#2ca02c"}};
    const std::map<std::string, const char*> method_colours{{"clip", "#9467bd"},      {"hqq", "#8c564b"},
                                                            {"gptq", "#ff7f0e"},      {"clip-gptq", "#e377c2"},
                                                            {"clip-seq", "#bcbd22"},  {"gptq-seq", "#17becf"},
                                                            {"clip-gptq-seq", "#7f7f7f"}};
    auto colour_of = [&](const Series& s) -> const char* {
        if (s.method == "rtn") return group_colours.count(s.group) ? group_colours.at(s.group) : "#000";
        return method_colours.count(s.method) ? method_colours.at(s.method) : "#000";
    };
    // RTN first (the reference lines), then the other methods.
    std::vector<std::pair<Series, std::vector<const ResultRow*>>> ordered(series.begin(), series.end());
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
        return (a.first.method == "rtn") > (b.first.method == "rtn");
    });
    double legend_y = top + 10;
    for (auto& [key, points] : ordered) {
        std::sort(points.begin(), points.end(), [](auto* a, auto* b) { return a->bits_per_weight < b->bits_per_weight; });
        const char* colour = colour_of(key);
        const char* dash = key.activations == "int8" ? " stroke-dasharray=\"5 3\"" : "";
        out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash << " points=\"";
        for (const ResultRow* p : points) out << x_of(p->bits_per_weight) << ',' << y_of(p->mean_cosine) << ' ';
        out << "\"/>\n";
        for (const ResultRow* p : points)
            out << "<circle cx=\"" << x_of(p->bits_per_weight) << "\" cy=\"" << y_of(p->mean_cosine) << "\" r=\"3.5\" fill=\""
                << colour << "\"><title>" << p->name << ": mean cosine " << p->mean_cosine << "</title></circle>\n";
        out << "<line x1=\"" << left + plot_w + 14 << "\" x2=\"" << left + plot_w + 38 << "\" y1=\"" << legend_y << "\" y2=\""
            << legend_y << "\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash << "/>\n<text x=\""
            << left + plot_w + 44 << "\" y=\"" << legend_y + 4 << "\">" << key.method << " g" << key.group << ", "
            << key.activations << "</text>\n";
        legend_y += 20;
    }
    out << "</svg>\n";
}

}  // namespace minilm
