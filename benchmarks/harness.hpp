// lowbit-bench's harness: cases, timing (median and spread over repeated runs after a warm-up), the
// side-by-side table and the JSON dump. Case files (cases_*.cpp) only describe what to run.
//
// Every figure is a median over repeats on a shared, noisy machine; the spread column shows how noisy.
// Ratios compare two cases of the same run: `baseline` names another case with the same shape and
// thread count, and the ratio printed is baseline median / this median (above 1: faster than it).
// `bandwidth_of` names a bandwidth case (same thread count) whose GB/s this case's GB/s is divided by;
// `peak_of` names a peak-arithmetic case (cases_peak.cpp) whose GFLOP/s this case's GFLOP/s is divided by.
// A case run at N > 1 threads also has its throughput divided by its own at 1 thread (the scaling). Each
// row is timed in rounds beside the cases it is divided by (lowbit_bench.cpp, measure_side_by_side), so
// those ratios compare figures taken under the same machine load, not minutes apart (--quick excepted).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace lowbit::bench {

struct Options {
    int max_threads = 1;        ///< --threads N: cases run at 1 thread and, if N > 1, at N threads
    bool quick = false;         ///< --quick: fewer repeats and the largest shapes skipped; about two minutes on 2 cores
    std::vector<std::string>
        filters;  ///< --filter PATTERN (repeatable): substrings of "name shape", one of which a case must contain
    std::string json_path;      ///< --json FILE

    /// Thread counts every threaded case is run at: {1} or {1, max_threads}.
    std::vector<int> thread_counts() const {
        return max_threads > 1 ? std::vector<int>{1, max_threads} : std::vector<int>{1};
    }
};

/// Runs one timed repetition of a case. Built by Case::prepare, which owns the case's data.
using Runner = std::function<void()>;

struct Case {
    std::string name;          ///< what runs, e.g. "gemv eigen fp32" or "qmatmul q4 g64 lowbit"
    std::string shape;         ///< e.g. "M=1 N=4096 K=4096" or "16M floats"
    int threads = 1;           ///< lowbit::set_num_threads and Eigen's thread count while it runs
    double bytes = 0;          ///< bytes one repetition must move (for GB/s); 0 if not meaningful
    double flops = 0;          ///< floating-point operations of one repetition; 0 if not meaningful
    std::string baseline;      ///< name of the case (same shape and threads) this one is compared with
    std::string bandwidth_of;  ///< name of the bandwidth case (same threads) for the fraction column
    std::string peak_of;       ///< name of the peak case (same threads) for the fraction column
    bool slow = false;         ///< skipped by --quick
    bool opt_in = false;       ///< run only when --filter selects it (cases that take seconds)
    std::function<Runner()> prepare;  ///< allocates inputs, returns the repetition; data freed after
};

/// Where case files add their cases.
class Registry {
public:
    explicit Registry(const Options& options) : options_(options) {}
    const Options& options() const { return options_; }
    void add(Case c) { cases_.push_back(std::move(c)); }
    std::vector<Case>& cases() { return cases_; }

private:
    Options options_;
    std::vector<Case> cases_;
};

/// Keeps the compiler from discarding a result.
void keep(const void* pointer);
inline void keep(float value) { keep(&value); }

/// The peak-arithmetic rows (cases_peak.cpp), named by the cases that divide by them.
inline const char* const peak_f32_fma_name = "peak f32 fma";
inline const char* const peak_int8_dot_name = "peak int8 dot";

// Case files. Each adds its cases in the order they should print.
void add_bandwidth_cases(Registry& registry);
void add_peak_cases(Registry& registry);
void add_eigen_cases(Registry& registry);
void add_fake_quant_cases(Registry& registry);
void add_quantized_matmul_cases(Registry& registry);
void add_ternary_cases(Registry& registry);
void add_ptq_cases(Registry& registry);
void add_gguf_cases(Registry& registry);

}  // namespace lowbit::bench
