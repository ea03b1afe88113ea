// The layers of MLX's float modes (mxfp4, nvfp4, mxfp8): f32 and int8 forward against x * dequantize(q)^T, at
// M = 1 (the GEMV), 5 (the batch GEMV) and 40 (the panel GEMM), with a row length that is not a
// multiple of 32 where the group allows it.
#include <algorithm>
#include <cmath>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>

#include <lowbit/lowbit.hpp>

#include "support/random.hpp"
#include "support/tolerance.hpp"

TEMPLATE_TEST_CASE("QuantizedLinearOf a float mode: f32 and int8 forward against x * dequantize(q)^T",
                   "[quantized_linear][mxfp4][nvfp4][mxfp8]", lowbit::Mxfp4, lowbit::Nvfp4, lowbit::Mxfp8) {
    using lowbit::RowMatrixXf;
    auto rng = lowbit::test::make_rng(1604 + TestType::group_size);
    constexpr Eigen::Index out = 19, in = 7 * 16 + (TestType::group_size == 32 ? 16 : 0);  // 112 or 128
    const RowMatrixXf w = lowbit::test::random_weights(rng, out, in);
    const auto layer = lowbit::QuantizedLinearOf<TestType>::from_linear(lowbit::Linear{w, Eigen::VectorXf::Zero(out)});
    const RowMatrixXf deq = layer.dequantize();
    for (const Eigen::Index M : {1, 5, 40}) {
        INFO(TestType::mode << ", M = " << M);
        RowMatrixXf x(M, in);
        const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(M * in), -1.0f, 1.0f);
        std::copy(values.begin(), values.end(), x.data());
        const RowMatrixXf y = layer.forward(x);
        const RowMatrixXf y8 = layer.forward(x, lowbit::Activations::int8);
        for (Eigen::Index m = 0; m < M; ++m)
            for (Eigen::Index n = 0; n < out; ++n) {
                double exact = 0.0, abs_sum = 0.0, abs_w = 0.0;
                for (Eigen::Index k = 0; k < in; ++k) {
                    exact += double(x(m, k)) * double(deq(n, k));
                    abs_sum += std::fabs(double(x(m, k)) * double(deq(n, k)));
                    abs_w += std::fabs(double(deq(n, k)));
                }
                const double f32_bound = lowbit::test::dot_tolerance(static_cast<std::size_t>(in), abs_sum);
                CHECK(std::fabs(double(y(m, n)) - exact) <= f32_bound);
                // int8 activations: each x within half a step a / 2 of its code, a = max|x| / 127 <= 1 / 127.
                CHECK(std::fabs(double(y8(m, n)) - exact) <= 0.5 / 127.0 * abs_w + 2.0 * f32_bound);
            }
    }
}
