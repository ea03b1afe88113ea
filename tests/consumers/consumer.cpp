// What a downstream project compiles: the public header, without any lowbit build flag, using both
// halves of the library through the installed (or added) target.
#include <cstdio>

#include <lowbit/lowbit.hpp>

int main() {
    lowbit::FakeQuantize<8> activation_quantizer;
    const Eigen::MatrixXf x = Eigen::MatrixXf::Random(2, 64);
    activation_quantizer.calibrate(x);
    const Eigen::MatrixXf x_fq = activation_quantizer.forward(x);

    const lowbit::QuantizedLinear<64, 4> layer(64, 8, true, 1);
    const lowbit::RowMatrixXf y = layer.forward(x_fq);
    const lowbit::RowMatrixXf expected = x_fq * layer.dequantize().transpose();

    const float error = (y - expected).cwiseAbs().maxCoeff();
    std::printf("lowbit %d.%d.%d (%d threads): y is %tdx%td, max |y - x w^T| = %g\n", LOWBIT_VERSION_MAJOR,
                LOWBIT_VERSION_MINOR, LOWBIT_VERSION_PATCH, lowbit::num_threads(), y.rows(), y.cols(), error);
    return y.rows() == 2 && y.cols() == 8 && error < 1e-4f ? 0 : 1;
}
