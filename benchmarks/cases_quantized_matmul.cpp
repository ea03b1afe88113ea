// lowbit's quantized inference rows: quantize (against the scalar reference rule, split over the same
// threads), and quantized_matmul at the shared matmul shapes beside Eigen fp32 on the same shape (ratio =
// Eigen's median / ours, so above 1 is faster than Eigen). The int8-activation rows ("... lowbit int8",
// docs/numerics.md N11) run QuantizedLinear::forward(x, Activations::int8) on a layer without bias
// (quantized_matmul's result, on the int8 GEMM panels the layer builds on its first int8 call, here
// before timing) and are compared with the exact row of the same shape. M > 1 rows also print their
// fraction of the peak arithmetic row of their kind (cases_peak.cpp): `peak f32 fma` for the exact path,
// `peak int8 dot` for the int8 one (GOP/s in the GFLOP/s column, 2 operations per multiply-add).
//
// The matmul rows are generated from the format list (lowbit::QuantizedFormats): the headline formats
// (q4 g64 and q8 g64) at every shared shape and in --quick, every other format at 4096 x 4096 with M =
// 1, 8, 32 and 512 in the default run. The rows of a float mode (mxfp4, nvfp4) are compared with the MLX
// affine rows of the same bits, group size 32 and kind (f32 or int8), rather than with Eigen.
//
// For M = 1 there are two cases: the cache-warm one reuses one weight (4-bit 4096x4096 is 10 MiB, which
// stays in L3) and the memory-bound one ("dram") rotates over copies totalling at least 256 MiB, so every
// repetition streams its weights from memory; its bandwidth fraction is against "bandwidth read dram".
// Bytes counted: packed codes + per-group parameters + x + out. The "... lowbit dx" rows (q4 g64) time
// the backward's transposed product quantized_matmul_dx at the same shapes, against the forward row.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <lowbit/lowbit.hpp>
#include <lowbit/detail/mlx_affine/packing.hpp>
#include <lowbit/detail/mlx_affine/quantize.hpp>
#include <lowbit/detail/threading/parallel.hpp>

#include "harness.hpp"
#include "shapes.hpp"

namespace lowbit::bench {
namespace {

/// A format's name in the rows: "q4 g64" for MLX affine, its mode otherwise.
template <class Format>
std::string tag() {
    if (std::string_view(Format::mode) != "affine") return Format::mode;
    // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on the chained operator+.
    std::string text = "q";
    text += std::to_string(Format::bits);
    text += " g";
    text += std::to_string(Format::group_size);
    return text;
}

/// Bytes one product reads and writes: codes, per-group scales (and biases), x and out.
template <class Format>
double packed_bytes(const MatmulShape& shape) {
    const double groups = double(shape.n) * shape.k / Format::group_size;
    const double parameters = sizeof(typename Format::scale_type) + (Format::has_biases ? sizeof(float) : 0);
    const double weights = double(shape.n) * shape.k * Format::bits / 8.0 + parameters * groups;
    return weights + 4.0 * (double(shape.m) * shape.k + double(shape.m) * shape.n);
}

template <class Format>
QuantizedMatrixOf<Format> random_quantized(int rows, int cols) {
    return quantize<Format>(RowMatrixXf::Random(rows, cols));
}

/// The scalar reference of quantize: MLX's rule group by group (detail::reference::quantize_group) and
/// the scalar packer, rows split over threads as quantize splits them.
template <int GroupSize, int Bits>
void reference_quantize(const RowMatrixXf& w, QuantizedMatrix<GroupSize, Bits>& q) {
    const Eigen::Index groups = w.cols() / GroupSize;
    lowbit::detail::parallel_for(static_cast<std::size_t>(w.rows()), 16, [&](std::size_t begin, std::size_t end) {
        std::vector<std::int32_t> codes(static_cast<std::size_t>(w.cols()));
        for (auto row = static_cast<Eigen::Index>(begin); row < static_cast<Eigen::Index>(end); ++row) {
            for (Eigen::Index g = 0; g < groups; ++g) {
                const auto [scale, bias] = lowbit::detail::reference::quantize_group<Bits>(
                    &w(row, g * GroupSize), GroupSize, codes.data() + g * GroupSize);
                q.scales(row, g) = scale;
                q.biases(row, g) = bias;
            }
            lowbit::detail::kernels::pack_codes<Bits>(codes.data(), codes.size(), &q.codes(row, 0));
        }
    });
}

template <int GroupSize, int Bits>
void add_quantize_cases(Registry& registry, int threads) {
    constexpr int n = 4096, k = 4096;
    Case c;
    c.name = "quantize " + tag<MlxAffine<GroupSize, Bits>>();
    c.shape = "N=" + std::to_string(n) + " K=" + std::to_string(k);
    c.threads = threads;
    c.bytes = 4.0 * n * k + double(n) * k * Bits / 8.0 + 8.0 * n * k / GroupSize;
    Case reference = c;
    reference.name = c.name + " reference";
    reference.prepare = []() -> Runner {
        auto w = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(n, k));
        auto q = std::make_shared<QuantizedMatrix<GroupSize, Bits>>(quantize<GroupSize, Bits>(*w));
        return [w, q] {
            reference_quantize(*w, *q);
            keep(q->codes.data());
        };
    };
    registry.add(std::move(reference));
    c.baseline = c.name + " reference";
    c.prepare = []() -> Runner {
        auto w = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(n, k));
        return [w] {
            const auto q = quantize<GroupSize, Bits>(*w);
            keep(q.codes.data());
        };
    };
    registry.add(std::move(c));
}

/// A layer without bias on q (forward = quantized_matmul), with its int8 panels built when the rows
/// are int8 ones (QuantizedLinear keeps them from its first int8 forward; built here, untimed).
template <class Format>
std::shared_ptr<QuantizedLinearOf<Format>> int8_layer(QuantizedMatrixOf<Format> q, const RowMatrixXf& x,
                                                      Activations activations = Activations::int8) {
    auto layer = std::make_shared<QuantizedLinearOf<Format>>(std::move(q));
    if (activations == Activations::int8) keep(layer->forward(x, Activations::int8).data());
    return layer;
}

/// The formats timed at every shared shape, in --quick and with DRAM-rotating GEMV rows.
template <class Format>
constexpr bool headline_format = std::is_same_v<Format, MlxAffine<64, 4>> || std::is_same_v<Format, MlxAffine<64, 8>>;

/// The shapes a format's matmul rows run at (see the top of this file).
template <class Format>
std::vector<MatmulShape> format_shapes() {
    if constexpr (headline_format<Format>) return matmul_shapes();
    std::vector<MatmulShape> shapes;
    for (int m : {1, 8, 32, 512}) shapes.push_back({m, 4096, 4096});
    return shapes;
}

/// The row a format's f32 row is compared with: Eigen fp32 for MLX affine; for a float mode the
/// affine row of the same bits and group size 32 (its int8 row then against that row's int8 one).
template <class Format>
std::string f32_baseline() {
    if (std::string_view(Format::mode) == "affine") return eigen_matmul_name;
    return "qmatmul " + tag<MlxAffine<32, Format::bits>>() + " lowbit";
}

template <class Format>
void add_matmul_cases(Registry& registry, int threads) {
    const bool affine = std::string_view(Format::mode) == "affine";
    for (const MatmulShape& shape : format_shapes<Format>()) {
        Case c;
        c.name = "qmatmul " + tag<Format>() + " lowbit";
        c.shape = shape.label();
        c.threads = threads;
        c.flops = shape.flops();
        c.bytes = packed_bytes<Format>(shape);
        c.baseline = f32_baseline<Format>();
        c.bandwidth_of = shape.m == 1 ? "bandwidth read cache" : "";
        c.peak_of = shape.m == 1 ? "" : peak_f32_fma_name;
        c.slow = shape.slow() || !headline_format<Format>;
        c.prepare = [shape]() -> Runner {
            auto q = std::make_shared<QuantizedMatrixOf<Format>>(random_quantized<Format>(shape.n, shape.k));
            auto x = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(shape.m, shape.k));
            return [q, x] { keep(quantized_matmul(*x, *q).data()); };
        };
        registry.add(c);

        Case int8 = c;
        int8.name = c.name + " int8";
        int8.baseline = affine ? c.name : c.baseline + " int8";
        int8.peak_of = shape.m == 1 ? "" : peak_int8_dot_name;
        int8.prepare = [shape]() -> Runner {
            auto x = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(shape.m, shape.k));
            auto layer = int8_layer(random_quantized<Format>(shape.n, shape.k), *x);
            return [layer, x] { keep(layer->forward(*x, Activations::int8).data()); };
        };
        registry.add(int8);

        if constexpr (std::is_same_v<Format, MlxAffine<64, 4>>) {
            // The transposed product of the backward (dx = dy * dequantize(q)), against the forward.
            Case dx = c;
            dx.name = c.name + " dx";
            dx.baseline = c.name;
            dx.slow = c.slow || shape.m != 1;  // --quick keeps the GEMV's
            dx.prepare = [shape]() -> Runner {
                auto q = std::make_shared<QuantizedMatrixOf<Format>>(random_quantized<Format>(shape.n, shape.k));
                auto dy = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(shape.m, shape.n));
                return [q, dy] { keep(quantized_matmul_dx(*dy, *q).data()); };
            };
            registry.add(dx);
        }

        if (shape.m != 1 || !headline_format<Format>) continue;
        // The memory-bound GEMV of both paths; the int8 one against the exact one of the same kind.
        for (const Activations activations : {Activations::f32, Activations::int8}) {
            Case dram = activations == Activations::f32 ? c : int8;
            dram.name += " dram";
            if (activations == Activations::int8) {
                dram.baseline = c.name + " dram";
                dram.slow = true;  // --quick keeps one DRAM-rotating row per format (each allocates 256 MiB)
            }
            dram.bandwidth_of = "bandwidth read dram";
            dram.prepare = [shape, activations]() -> Runner {
                const auto one = random_quantized<Format>(shape.n, shape.k);
                const double weight_bytes = packed_bytes<Format>(MatmulShape{0, shape.n, shape.k});
                const int copies = static_cast<int>((256.0 * (1 << 20)) / weight_bytes) + 1;  // >= 256 MiB in all
                auto x = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(1, shape.k));
                // Distinct layers (a copy would share its panels), each with its panels built.
                auto layers = std::make_shared<std::vector<std::shared_ptr<QuantizedLinearOf<Format>>>>();
                for (int i = 0; i < copies; ++i) layers->push_back(int8_layer(one, *x, activations));
                auto next = std::make_shared<std::size_t>(0);
                return [layers, x, next, activations] {
                    const auto& layer = *(*layers)[*next];
                    *next = (*next + 1) % layers->size();
                    keep(layer.forward(*x, activations).data());
                };
            };
            registry.add(std::move(dram));
        }
    }
}

}  // namespace

void add_quantized_matmul_cases(Registry& registry) {
    for (int threads : registry.options().thread_counts()) {
        add_quantize_cases<64, 4>(registry, threads);
        add_quantize_cases<64, 8>(registry, threads);
        lowbit::detail::for_each_format(
            [&]<class Format>(std::type_identity<Format>) { add_matmul_cases<Format>(registry, threads); });
    }
}

}  // namespace lowbit::bench
