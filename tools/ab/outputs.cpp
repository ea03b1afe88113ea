// A/B check of a refactor: writes every quantize, matmul and ternary output of the public API, as raw
// bytes, to stdout. tools/ab/compare builds this file against two revisions of the headers and compares
// the two streams byte for byte (a refactor that keeps the numerics leaves them identical).
//
// Covered: the 18 MLX affine formats (quantize's codes, scales and biases; quantized_matmul with f32
// and int8 activations; QuantizedLinear::forward with int8, which runs on the layer's panels), ternary
// I2 and TQ1 layers (per tensor and per group), for M = 1..33 and 512, with 1 and 2 threads. Inputs
// come from std::mt19937_64 with fixed seeds, so both builds see the same values.
#include <lowbit/lowbit.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

namespace {

void write_bytes(const void* data, std::size_t bytes) {
    std::fwrite(data, 1, bytes, stdout);
}

template <class Matrix>
void write_matrix(const Matrix& m) {
    write_bytes(m.data(), static_cast<std::size_t>(m.size()) * sizeof(typename Matrix::Scalar));
}

lowbit::RowMatrixXf random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    lowbit::RowMatrixXf m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(generator);
    return m;
}

std::vector<Eigen::Index> batch_sizes() {
    std::vector<Eigen::Index> sizes;
    for (Eigen::Index m = 1; m <= 33; ++m) sizes.push_back(m);
    sizes.push_back(512);
    return sizes;
}

template <int GroupSize, int Bits>
void affine_outputs(std::uint64_t seed) {
    constexpr Eigen::Index out = 67, in = 768;  // out not a multiple of any tile; in = 2..24 groups
    const lowbit::RowMatrixXf w = random_matrix(out, in, seed);
    const auto q = lowbit::quantize<GroupSize, Bits>(w);
    write_matrix(q.codes);
    write_matrix(q.scales);
    write_matrix(q.biases);
    const lowbit::QuantizedLinear<GroupSize, Bits> layer(q);
    for (const Eigen::Index M : batch_sizes()) {
        const lowbit::RowMatrixXf x = random_matrix(M, in, seed + static_cast<std::uint64_t>(M));
        write_matrix(lowbit::quantized_matmul(x, q));
        write_matrix(lowbit::quantized_matmul(x, q, lowbit::Activations::int8));
        write_matrix(layer.forward(x, lowbit::Activations::int8));
    }
}

void ternary_outputs(lowbit::TernaryFormat format, bool per_tensor, std::uint64_t seed) {
    constexpr Eigen::Index out = 37, in = 640;  // two 320-weight TQ1 chunks, 2.5 I2 chunks of 256
    std::mt19937_64 generator(seed);
    std::uniform_int_distribution<int> code(-1, 1);
    std::uniform_real_distribution<float> scale(0.01f, 2.0f);
    lowbit::TernaryWeights weights;
    weights.per_tensor = per_tensor;
    weights.group_size = per_tensor ? static_cast<int>(in) : 64;
    weights.codes.resize(out, in);
    for (Eigen::Index i = 0; i < weights.codes.size(); ++i)
        weights.codes.data()[i] = static_cast<std::int8_t>(code(generator));
    weights.scales.resize(per_tensor ? 1 : out, per_tensor ? 1 : in / 64);
    for (Eigen::Index i = 0; i < weights.scales.size(); ++i) weights.scales.data()[i] = scale(generator);
    const lowbit::TernaryLinear layer(weights, std::nullopt, format);
    for (const Eigen::Index M : batch_sizes())
        write_matrix(layer.forward(random_matrix(M, in, seed + static_cast<std::uint64_t>(M))));
}

template <class... Formats>
void every_affine_format(std::tuple<Formats...>*) {
    std::uint64_t seed = 1000;
    (affine_outputs<Formats::group_size, Formats::bits>(seed++), ...);
}

}  // namespace

int main() {
    for (const int threads : {1, 2}) {
        lowbit::set_num_threads(threads);
        every_affine_format(static_cast<lowbit::MlxAffineFormats*>(nullptr));
        std::uint64_t seed = 2000;
        for (const auto format : {lowbit::TernaryFormat::i2, lowbit::TernaryFormat::tq1})
            for (const bool per_tensor : {true, false}) ternary_outputs(format, per_tensor, seed++);
    }
    return 0;
}
