// lowbit-bench: times lowbit's kernels beside baselines measured in the same run (memory bandwidth,
// Eigen fp32, scalar references) and prints one table of medians and ratios. See --help.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "harness.hpp"

namespace lowbit::bench {

void keep(const void* pointer) {
    // An opaque use: the compiler must assume the memory behind `pointer` is read.
    asm volatile("" : : "g"(pointer) : "memory");
}

namespace {

struct Measurement {
    const Case* spec = nullptr;
    int repeats = 0;
    double median_s = 0;
    double low_s = 0;   ///< 10th percentile
    double high_s = 0;  ///< 90th percentile
};

double percentile(std::vector<double> sorted, double fraction) {
    const double position = fraction * static_cast<double>(sorted.size() - 1);
    const auto below = static_cast<std::size_t>(position);
    const std::size_t above = std::min(below + 1, sorted.size() - 1);
    const double weight = position - static_cast<double>(below);
    return sorted[below] * (1 - weight) + sorted[above] * weight;
}

void set_threads(int threads) {
    lowbit::set_num_threads(threads);
    Eigen::setNbThreads(threads);
}

/// Times a case and the cases it is read against (its baseline, its 1-thread twin, its limit row) side by
/// side: in rounds, each case in turn runs one untimed warm-up (its own data back in the caches, its
/// thread count set) and then `round_repeats` timed repetitions, until every case has min_repeats and
/// the group has run for its budget (a case alone, or one whose repetition is long, warms up once).
/// The machine's speed drifts over seconds to minutes; cases timed in the same rounds see the same
/// drift, so the ratios between them keep little of it.
std::vector<Measurement> measure_side_by_side(const std::vector<const Case*>& group, const Options& options) {
    using clock = std::chrono::steady_clock;
    std::vector<Runner> runners;
    for (const Case* spec : group) {
        set_threads(spec->threads);
        runners.push_back(spec->prepare());
    }
    const double budget_s = options.quick ? 0.05 : std::max(0.6, 0.2 * static_cast<double>(group.size()));
    const int min_repeats = options.quick ? 3 : 6, round_repeats = 3, max_repeats = 500;
    // A repetition this long refills the caches in well under 1 % of its time: it warms up only once.
    constexpr double long_repetition_s = 0.02;
    std::vector<std::vector<double>> seconds(group.size());
    const auto started = clock::now();
    for (bool first_round = true;; first_round = false) {
        for (std::size_t c = 0; c < group.size(); ++c) {
            set_threads(group[c]->threads);
            // warm-up: page faults, caches, thread start-up
            if (first_round || (group.size() > 1 && seconds[c].back() < long_repetition_s)) runners[c]();
            for (int r = 0; r < round_repeats; ++r) {
                const auto begin = clock::now();
                runners[c]();
                seconds[c].push_back(std::chrono::duration<double>(clock::now() - begin).count());
            }
        }
        const double elapsed = std::chrono::duration<double>(clock::now() - started).count();
        if (static_cast<int>(seconds[0].size()) >= max_repeats) break;
        if (static_cast<int>(seconds[0].size()) >= min_repeats && elapsed >= budget_s) break;
    }
    std::vector<Measurement> results;
    for (std::size_t c = 0; c < group.size(); ++c) {
        std::sort(seconds[c].begin(), seconds[c].end());
        Measurement result;
        result.spec = group[c];
        result.repeats = static_cast<int>(seconds[c].size());
        result.median_s = percentile(seconds[c], 0.5);
        result.low_s = percentile(seconds[c], 0.1);
        result.high_s = percentile(seconds[c], 0.9);
        results.push_back(result);
    }
    return results;
}

std::string format_time(double seconds) {
    char text[32];
    if (seconds >= 1) std::snprintf(text, sizeof text, "%.3f s", seconds);
    else if (seconds >= 1e-3) std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
    else std::snprintf(text, sizeof text, "%.2f us", seconds * 1e6);
    return text;
}

struct Row {
    Measurement measurement;
    double gbps = 0, gflops = 0, ratio = 0;
    double bandwidth_fraction = 0;  ///< GB/s over the bandwidth_of case's (timed beside this one)
    double peak_fraction = 0;       ///< GFLOP/s over the peak_of case's (timed beside this one)
    double scaling = 0;             ///< throughput over the same case's at 1 thread (timed beside it)
};

void print_header() {
    std::printf("%-34s %-22s %3s %11s %7s %9s %9s %8s %-26s %8s %7s\n", "case", "shape", "thr", "median",
                "spread", "GB/s", "GFLOP/s", "ratio", "ratio against", "of limit", "x 1 thr");
}

void print_row(const Row& row) {
    const Case& spec = *row.measurement.spec;
    const double spread = (row.measurement.high_s - row.measurement.low_s) / row.measurement.median_s;
    char gbps[16] = "-", gflops[16] = "-", ratio[16] = "-", fraction[16] = "-", scaling[16] = "-";
    if (row.gbps > 0) std::snprintf(gbps, sizeof gbps, "%.1f", row.gbps);
    if (row.gflops > 0) std::snprintf(gflops, sizeof gflops, "%.1f", row.gflops);
    if (row.ratio > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", row.ratio);
    if (row.bandwidth_fraction > 0) std::snprintf(fraction, sizeof fraction, "%.2f BW", row.bandwidth_fraction);
    else if (row.peak_fraction > 0) std::snprintf(fraction, sizeof fraction, "%.2f pk", row.peak_fraction);
    if (row.scaling > 0) std::snprintf(scaling, sizeof scaling, "%.2fx", row.scaling);
    std::printf("%-34s %-22s %3d %11s %6.0f%% %9s %9s %8s %-26s %8s %7s\n", spec.name.c_str(), spec.shape.c_str(),
                spec.threads, format_time(row.measurement.median_s).c_str(), 100 * spread, gbps, gflops, ratio,
                row.ratio > 0 ? spec.baseline.c_str() : "", fraction, scaling);
    std::fflush(stdout);
}

void write_json(const std::string& path, const std::vector<Row>& rows, const Options& options) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("lowbit-bench: cannot write " + path);
    auto quoted = [](const std::string& text) { return "\"" + text + "\""; };
    out << "{\n  \"lowbit_version\": \"" << LOWBIT_VERSION_MAJOR << '.' << LOWBIT_VERSION_MINOR << '.'
        << LOWBIT_VERSION_PATCH << "\",\n  \"quick\": " << (options.quick ? "true" : "false")
        << ",\n  \"statistic\": \"median over repeats, timed in rounds beside the baseline, 1-thread and limit cases the "
           "row is read against (a warm-up per case and round, once for repetitions over 20 ms); low/high are the "
           "10th/90th percentiles\","
        << "\n  \"cases\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& row = rows[i];
        const Case& spec = *row.measurement.spec;
        out << "    {\"name\": " << quoted(spec.name) << ", \"shape\": " << quoted(spec.shape)
            << ", \"threads\": " << spec.threads << ", \"repeats\": " << row.measurement.repeats
            << ", \"median_s\": " << row.measurement.median_s << ", \"low_s\": " << row.measurement.low_s
            << ", \"high_s\": " << row.measurement.high_s << ", \"gb_per_s\": " << row.gbps
            << ", \"gflop_per_s\": " << row.gflops << ", \"baseline\": " << quoted(spec.baseline)
            << ", \"ratio_to_baseline\": " << row.ratio << ", \"bandwidth_of\": " << quoted(spec.bandwidth_of)
            << ", \"fraction_of_bandwidth\": " << row.bandwidth_fraction << ", \"peak_of\": " << quoted(spec.peak_of)
            << ", \"fraction_of_peak\": " << row.peak_fraction << ", \"scaling_from_1_thread\": " << row.scaling << "}"
            << (i + 1 < rows.size() ? ",\n" : "\n");
    }
    out << "  ]\n}\n";
}

void print_usage() {
    std::printf(
        "usage: lowbit-bench [--threads N] [--quick] [--filter PATTERN] [--json FILE]\n"
        "  --threads N       run threaded cases at 1 and N threads (default: all hardware threads)\n"
        "  --quick           fewer repeats, largest shapes skipped (about two minutes on 2 cores)\n"
        "  --filter PATTERN  only cases whose \"name shape\" contains PATTERN (baselines they need run too);\n"
        "                    repeat it to select the cases matching any of several patterns;\n"
        "                    the post-training quantizer rows run only when selected this way (--filter ptq)\n"
        "  --json FILE       also write the figures as JSON\n");
}

Options parse(int argc, char** argv) {
    Options options;
    const unsigned hardware = std::thread::hardware_concurrency();
    options.max_threads = hardware == 0 ? 1 : static_cast<int>(hardware);
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--threads") {
            const std::string text = value();
            char* end = nullptr;
            const long threads = std::strtol(text.c_str(), &end, 10);
            if (end == text.c_str() || *end != '\0' || threads < 1 || threads > 1024)
                throw std::invalid_argument("--threads needs a count from 1 to 1024, got '" + text + "'");
            options.max_threads = static_cast<int>(threads);
        } else if (arg == "--quick") {
            options.quick = true;
        } else if (arg == "--filter") {
            options.filters.push_back(value());
        } else if (arg == "--json") {
            options.json_path = value();
        } else if (arg == "--help" || arg == "-h") {
            print_usage();
            std::exit(0);
        } else {
            throw std::invalid_argument("unknown argument '" + arg + "' (see --help)");
        }
    }
    return options;
}

/// The cases to run: those matching the filter, plus the baselines and bandwidth cases they refer to.
std::vector<const Case*> select(const std::vector<Case>& cases, const Options& options) {
    std::vector<bool> chosen(cases.size(), false);
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        if (options.quick && c.slow) continue;
        if (c.opt_in && options.filters.empty()) continue;
        const std::string label = c.name + " " + c.shape;
        chosen[i] = options.filters.empty() ||
                    std::any_of(options.filters.begin(), options.filters.end(),
                                [&](const std::string& pattern) { return label.find(pattern) != std::string::npos; });
    }
    for (std::size_t i = 0; i < cases.size(); ++i) {
        if (!chosen[i]) continue;
        for (std::size_t j = 0; j < cases.size(); ++j) {
            const Case& other = cases[j];
            if (other.threads != cases[i].threads) continue;
            const bool is_baseline = other.name == cases[i].baseline && other.shape == cases[i].shape;
            const bool is_limit = other.name == cases[i].bandwidth_of || other.name == cases[i].peak_of;
            if (is_baseline || is_limit) chosen[j] = true;
        }
    }
    std::vector<const Case*> selected;
    for (std::size_t i = 0; i < cases.size(); ++i)
        if (chosen[i]) selected.push_back(&cases[i]);
    return selected;
}

}  // namespace
}  // namespace lowbit::bench

int main(int argc, char** argv) {
    using namespace lowbit::bench;
    try {
        const Options options = parse(argc, argv);
        Registry registry(options);
        add_bandwidth_cases(registry);
        add_peak_cases(registry);
        add_eigen_cases(registry);
        add_fake_quant_cases(registry);
        add_quantized_matmul_cases(registry);
        add_ternary_cases(registry);
        add_ptq_cases(registry);
        add_gguf_cases(registry);

        const std::vector<const Case*> selected = select(registry.cases(), options);
        std::printf("lowbit-bench %d.%d.%d: %zu cases, threads 1..%d%s; median of repeats, each row timed in rounds "
                    "beside the rows it is read against; spread = (p90 - p10) / median; ratio = baseline median / "
                    "this median; x 1 thr = throughput / the 1-thread row's\n",
                    LOWBIT_VERSION_MAJOR, LOWBIT_VERSION_MINOR, LOWBIT_VERSION_PATCH, selected.size(),
                    options.max_threads, options.quick ? ", quick" : "");
        print_header();
        std::vector<Row> rows;
        for (const Case* spec : selected) {
            // The cases this row is read against, timed beside it (measure_side_by_side).
            auto find = [&](auto matches) -> const Case* {
                for (const Case* other : selected)
                    if (other != spec && matches(*other)) return other;
                return nullptr;
            };
            const Case* baseline = spec->baseline.empty() ? nullptr : find([&](const Case& other) {
                return other.name == spec->baseline && other.shape == spec->shape && other.threads == spec->threads;
            });
            const Case* one_thread = spec->threads == 1 ? nullptr : find([&](const Case& other) {
                return other.name == spec->name && other.shape == spec->shape && other.threads == 1;
            });
            // Bandwidth and peak cases are named uniquely per thread count, whatever their shape.
            const std::string& limit_name = !spec->bandwidth_of.empty() ? spec->bandwidth_of : spec->peak_of;
            const Case* limit = limit_name.empty() ? nullptr : find([&](const Case& other) {
                return other.name == limit_name && other.threads == spec->threads;
            });
            // --quick times each row alone (preparing a partner again costs more than timing it) and
            // reads the partner's median off its own row, timed earlier in the run.
            std::vector<const Case*> group{spec};
            if (!options.quick)
                for (const Case* partner : {baseline, one_thread, limit})
                    if (partner) group.push_back(partner);
            const std::vector<Measurement> measured = measure_side_by_side(group, options);
            auto median_of = [&](const Case* partner) {
                for (const Measurement& m : measured)
                    if (m.spec == partner) return m.median_s;
                for (const Row& earlier : rows)
                    if (earlier.measurement.spec == partner) return earlier.measurement.median_s;
                return 0.0;
            };
            Row row;
            row.measurement = measured[0];
            const double seconds = row.measurement.median_s;
            if (spec->bytes > 0) row.gbps = spec->bytes / seconds / 1e9;
            if (spec->flops > 0) row.gflops = spec->flops / seconds / 1e9;
            const double baseline_s = median_of(baseline), one_thread_s = median_of(one_thread), limit_s = median_of(limit);
            if (baseline_s > 0) row.ratio = baseline_s / seconds;
            // Throughput over the 1-thread row's (cases that give each thread its own work, such as the
            // bandwidth and peak rows, say so in their bytes or flops).
            auto work = [](const Case& c) { return c.flops > 0 ? c.flops : c.bytes > 0 ? c.bytes : 1.0; };
            if (one_thread_s > 0) row.scaling = one_thread_s / seconds * work(*spec) / work(*one_thread);
            if (limit_s > 0 && !spec->bandwidth_of.empty() && row.gbps > 0 && limit->bytes > 0)
                row.bandwidth_fraction = row.gbps / (limit->bytes / limit_s / 1e9);
            if (limit_s > 0 && spec->bandwidth_of.empty() && row.gflops > 0 && limit->flops > 0)
                row.peak_fraction = row.gflops / (limit->flops / limit_s / 1e9);
            rows.push_back(row);
            print_row(row);
        }
        lowbit::set_num_threads(0);
        if (!options.json_path.empty()) write_json(options.json_path, rows, options);
        return 0;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "lowbit-bench: %s\n", error.what());
        return 2;
    }
}
