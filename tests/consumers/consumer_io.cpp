// What a downstream project using the checkpoint IO compiles: <lowbit/io.hpp> through the lowbit::io
// target (which brings nlohmann-json), or through lowbit::io_compiled (the same, LOWBIT_EXTERN_IO). Saves a quantized
// layer as an MLX safetensors file in memory, reads it back and checks that the loaded layer computes what the saved
// one computed.
#include <cstdio>

#include <lowbit/io.hpp>
#include <lowbit/lowbit.hpp>

int main() {
    const lowbit::Linear linear{lowbit::RowMatrixXf::Random(8, 64), Eigen::VectorXf::Random(8)};
    const auto layer = lowbit::AnyQuantizedLinear::from_linear(linear, 64, 4);
    lowbit::SafetensorsWriter writer;
    lowbit::save_mlx_linear(writer, "proj", layer);
    const std::vector<std::byte> bytes = writer.to_bytes();
    const auto file = lowbit::SafetensorsFile::from_bytes(bytes);
    const auto loaded = lowbit::load_mlx_linear(file, "proj", 64, 4);

    const lowbit::RowMatrixXf x = lowbit::RowMatrixXf::Random(2, 64);
    const float difference = (loaded.forward(x) - layer.forward(x)).cwiseAbs().maxCoeff();
    std::printf("lowbit::io: %zu-byte MLX safetensors file, max |loaded - saved| = %g\n", bytes.size(), difference);
    return difference == 0.0f ? 0 : 1;
}
