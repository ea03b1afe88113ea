// The deployed BitNet b1.58 layer (TernaryLinear, docs/numerics.md N14) at the shared matmul shapes:
// packed ternary codes (I2: 2 bits per weight; TQ1: 5 weights per byte) times per-token int8
// activations, compared with the int8 4-bit row of the same shape ("qmatmul q4 g64 lowbit int8"); M > 1
// also against `peak int8 dot`, M = 1 against `bandwidth read cache`, and a DRAM-rotating M = 1 row
// against `bandwidth read dram`. Bytes counted: the 2-bit panels both formats run on (their first forward
// builds them from the packed codes) + x + out (the per-tensor scale is 4 bytes).
#include <memory>
#include <string>
#include <vector>

#include <lowbit/lowbit.hpp>

#include "harness.hpp"
#include "shapes.hpp"

namespace lowbit::bench {
namespace {

/// Bytes a forward reads and writes: the int8 GEMM's 2-bit panels (both formats run on them), x and out.
double ternary_bytes(const MatmulShape& shape) {
    return double(shape.n) * double(shape.k) / 4.0 + 4.0 * (double(shape.m) * shape.k + double(shape.m) * shape.n);
}

TernaryLinear random_ternary(const MatmulShape& shape, TernaryFormat format) {
    return TernaryLinear(quantize_ternary_per_tensor(RowMatrixXf::Random(shape.n, shape.k)), std::nullopt, format);
}

void add_format_cases(Registry& registry, int threads, TernaryFormat format) {
    const std::string name = std::string("qmatmul ternary ") + ternary_format_name(format) + " lowbit";
    for (const MatmulShape& shape : matmul_shapes()) {
        Case c;
        c.name = name;
        c.shape = shape.label();
        c.threads = threads;
        c.flops = shape.flops();
        c.bytes = ternary_bytes(shape);
        c.baseline = "qmatmul q4 g64 lowbit int8";
        c.bandwidth_of = shape.m == 1 ? "bandwidth read cache" : "";
        c.peak_of = shape.m == 1 ? "" : peak_int8_dot_name;
        c.slow = shape.slow();
        c.prepare = [shape, format]() -> Runner {
            auto layer = std::make_shared<TernaryLinear>(random_ternary(shape, format));
            auto x = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(shape.m, shape.k));
            return [layer, x] { keep(layer->forward(*x).data()); };
        };
        registry.add(c);

        if (shape.m != 1) continue;
        Case dram = c;
        dram.name = name + " dram";
        dram.baseline = "qmatmul q4 g64 lowbit int8 dram";
        dram.bandwidth_of = "bandwidth read dram";
        dram.slow = true;  // --quick keeps one DRAM-rotating row per MLX format
        dram.prepare = [shape, format]() -> Runner {
            const TernaryLinear one = random_ternary(shape, format);
            const double weight_bytes = double(shape.n) * double(one.row_bytes());
            const int copies = static_cast<int>((256.0 * (1 << 20)) / weight_bytes) + 1;  // >= 256 MiB in all
            // Separate layers, not copies: copies would share the int8 panels the first forward builds.
            const TernaryWeights weights = one.ternary_weights();
            auto layers = std::make_shared<std::vector<TernaryLinear>>();
            for (int i = 0; i < copies; ++i) layers->emplace_back(weights, std::nullopt, format);
            auto x = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(1, shape.k));
            for (const TernaryLinear& layer : *layers) keep(layer.forward(*x).data());  // builds the panels, untimed
            auto next = std::make_shared<std::size_t>(0);
            return [layers, x, next] {
                const TernaryLinear& layer = (*layers)[*next];
                *next = (*next + 1) % layers->size();
                keep(layer.forward(*x).data());
            };
        };
        registry.add(std::move(dram));
    }
}

}  // namespace

void add_ternary_cases(Registry& registry) {
    for (int threads : registry.options().thread_counts()) {
        add_format_cases(registry, threads, TernaryFormat::i2);
        add_format_cases(registry, threads, TernaryFormat::tq1);
    }
}

}  // namespace lowbit::bench
