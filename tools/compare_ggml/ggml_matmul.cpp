// ggml-matmul: times ggml_mul_mat on the CPU backend for tools/compare-ggml, with each weight placed the
// way llama.cpp's model loader places it: in the first of the CPU device's extra buffer types
// (ggml_backend_dev_get_extra_bufts: the repack buffer, which converts q4_0, q4_K, iq4_nl, ... into
// interleaved blocks when the weight is set) whose device supports the product with a 512-row
// activation, else in the plain CPU buffer. Built against a ggml source tree by tools/compare-ggml;
// never part of lowbit's build.
//
//   ggml-matmul --types q4_0,q4_K --m 1,8 --n 4096 --k 4096 --threads 1,2 [--seconds S]
//
// prints one line per (type, M, threads):
//   ggml <type> M=<m> N=<n> K=<k> threads=<t> buffer=<name> median_s=<s> repeats=<r>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace {

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> parts;
    std::size_t begin = 0;
    while (begin <= text.size()) {
        const std::size_t end = std::min(text.find(',', begin), text.size());
        if (end > begin) parts.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    return parts;
}

ggml_type type_named(const std::string& name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char* type_name = ggml_type_name(static_cast<ggml_type>(t));
        if (type_name != nullptr && name == type_name) return static_cast<ggml_type>(t);
    }
    throw std::invalid_argument("ggml-matmul: unknown ggml type '" + name + "'");
}

/// llama.cpp's rule: the first extra buffer type whose device supports mul_mat(w, b[K, 512]) with w in
/// that buffer type, else the device's own buffer type.
ggml_backend_buffer_type_t weight_buffer_type(ggml_backend_dev_t device, ggml_type type, int n, int k) {
    auto* reg = ggml_backend_dev_backend_reg(device);
    auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (get_extra != nullptr) {
        for (ggml_backend_buffer_type_t* buft = get_extra(device); buft != nullptr && *buft != nullptr; ++buft) {
            ggml_init_params params = {ggml_tensor_overhead() * 8, nullptr, true};
            ggml_context* ctx = ggml_init(params);
            ggml_tensor* w = ggml_new_tensor_2d(ctx, type, k, n);
            ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, 512);
            ggml_tensor* op = ggml_mul_mat(ctx, w, b);
            ggml_backend_buffer_t dummy = ggml_backend_buft_alloc_buffer(*buft, 0);
            w->buffer = dummy;
            const bool supported = ggml_backend_dev_supports_op(device, op);
            ggml_backend_buffer_free(dummy);
            ggml_free(ctx);
            if (supported) return *buft;
        }
    }
    return ggml_backend_dev_buffer_type(device);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::vector<std::string> types{"q4_0"};
        std::vector<int> ms{1}, threads{1};
        int n = 4096, k = 4096;
        double seconds = 0.5;
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            if (i + 1 >= argc) throw std::invalid_argument("ggml-matmul: " + arg + " needs a value");
            const std::string value = argv[++i];
            auto ints = [&] {
                std::vector<int> out;
                for (const auto& part : split(value)) out.push_back(std::stoi(part));
                return out;
            };
            if (arg == "--types") types = split(value);
            else if (arg == "--m") ms = ints();
            else if (arg == "--threads") threads = ints();
            else if (arg == "--n") n = std::stoi(value);
            else if (arg == "--k") k = std::stoi(value);
            else if (arg == "--seconds") seconds = std::stod(value);
            else throw std::invalid_argument("ggml-matmul: unknown argument " + arg);
        }
        ggml_backend_t backend = ggml_backend_cpu_init();
        ggml_backend_dev_t device = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        std::vector<float> weights(static_cast<std::size_t>(n) * k);
        for (float& value : weights) value = uniform(rng);

        for (const std::string& name : types) {
            const ggml_type type = type_named(name);
            // The weight, quantized by ggml and set through its buffer (the repack buffer converts it).
            ggml_backend_buffer_type_t buft = weight_buffer_type(device, type, n, k);
            ggml_init_params weight_params = {ggml_tensor_overhead() * 2, nullptr, true};
            ggml_context* weight_ctx = ggml_init(weight_params);
            ggml_tensor* w = ggml_new_tensor_2d(weight_ctx, type, k, n);
            ggml_backend_buffer_t weight_buffer = ggml_backend_alloc_ctx_tensors_from_buft(weight_ctx, buft);
            ggml_backend_buffer_set_usage(weight_buffer, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            std::vector<char> quantized(ggml_row_size(type, k) * static_cast<std::size_t>(n));
            ggml_quantize_chunk(type, weights.data(), quantized.data(), 0, n, k, nullptr);
            ggml_backend_tensor_set(w, quantized.data(), 0, quantized.size());

            for (const int m : ms) {
                ggml_init_params params = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
                ggml_context* ctx = ggml_init(params);
                ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, m);
                ggml_tensor* out = ggml_mul_mat(ctx, w, x);
                ggml_cgraph* graph = ggml_new_graph(ctx);
                ggml_build_forward_expand(graph, out);
                ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
                std::vector<float> x_values(static_cast<std::size_t>(m) * k);
                for (float& value : x_values) value = uniform(rng);
                ggml_backend_tensor_set(x, x_values.data(), 0, x_values.size() * sizeof(float));
                for (const int t : threads) {
                    ggml_backend_cpu_set_n_threads(backend, t);
                    for (int warm = 0; warm < 2; ++warm) ggml_backend_graph_compute(backend, graph);
                    std::vector<double> times;
                    double spent = 0.0;
                    while ((spent < seconds || times.size() < 5) && times.size() < 200) {
                        const auto start = std::chrono::steady_clock::now();
                        ggml_backend_graph_compute(backend, graph);
                        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
                        spent += times.back();
                    }
                    std::sort(times.begin(), times.end());
                    std::printf("ggml %s M=%d N=%d K=%d threads=%d buffer=%s median_s=%.9g repeats=%zu\n", name.c_str(), m, n,
                                k, t, ggml_backend_buft_name(buft), times[times.size() / 2], times.size());
                    std::fflush(stdout);
                }
                ggml_backend_buffer_free(buffer);
                ggml_free(ctx);
            }
            ggml_backend_buffer_free(weight_buffer);
            ggml_free(weight_ctx);
        }
        ggml_backend_free(backend);
        return 0;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "%s\n", error.what());
        return 2;
    }
}
