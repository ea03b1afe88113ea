// The README's usage example: both halves of lowbit in a few lines.
#include <cstdio>

#include <lowbit/lowbit.hpp>

int main() {
    // Training side: 8-bit fake quantization of activations with a straight-through gradient.
    lowbit::FakeQuantize<8> quantizer;                     // symmetric [-127, 127], round half away from zero
    const Eigen::MatrixXf x = Eigen::MatrixXf::Random(4, 128);
    quantizer.calibrate(x);                                // scale = max|x| / 127
    const Eigen::MatrixXf x_fq = quantizer.forward(x);     // quantize, then dequantize
    const Eigen::MatrixXf grad = Eigen::MatrixXf::Ones(4, 128);
    const Eigen::MatrixXf grad_x = quantizer.backward_clamped(grad, x);  // 0 outside the range

    // Inference side: a float layer converted to 4-bit codes in groups of 64 (MLX's format).
    const lowbit::Linear linear{lowbit::RowMatrixXf::Random(256, 128), Eigen::VectorXf::Zero(256)};
    const auto layer = lowbit::QuantizedLinear<64, 4>::from_linear(linear);
    const lowbit::RowMatrixXf y = layer.forward(x_fq);     // [4, 256], straight from the packed codes

    const lowbit::RowMatrixXf y_float = linear.forward(x_fq);
    std::printf("scale %.5f, %ld of 512 gradients passed, 4-bit output within %.1f%% of float (relative L2)\n",
                quantizer.scale(), static_cast<long>((grad_x.array() != 0).count()),
                100.0 * (y - y_float).norm() / y_float.norm());
    return 0;
}
