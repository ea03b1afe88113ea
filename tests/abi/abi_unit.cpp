// One ABI test unit: compiled twice (tests/abi/CMakeLists.txt), as abi_run_baseline() for the baseline
// instruction set and as abi_run_avx2() with -mavx2 -mfma. Both instantiate the same lowbit kernels.
#include <cstddef>
#include <string>

#include <lowbit/lowbit.hpp>

#include "abi_results.hpp"

#define LOWBIT_ABI_TEST_STRING2(x) #x
#define LOWBIT_ABI_TEST_STRING(x) LOWBIT_ABI_TEST_STRING2(x)
#define LOWBIT_ABI_TEST_PASTE2(a, b) a##b
#define LOWBIT_ABI_TEST_PASTE(a, b) LOWBIT_ABI_TEST_PASTE2(a, b)

namespace {

/// Exactly representable, unit-independent data: small integers over a power of two.
float value(int i, int salt) { return static_cast<float>(((i * 37 + salt * 11) % 97) - 48) / 32.0f; }

}  // namespace

AbiResults LOWBIT_ABI_TEST_PASTE(abi_run_, LOWBIT_ABI_UNIT)() {
    AbiResults r;
    r.simd_arch = lowbit::detail::simd::arch::name();
#if defined(LOWBIT_ABI_NAMESPACE)
    r.abi_namespace = LOWBIT_ABI_TEST_STRING(LOWBIT_ABI_NAMESPACE);
#endif
    r.rows = 48;
    r.cols = 256;
    r.batch = 5;
    lowbit::RowMatrixXf w(r.rows, r.cols), x(r.batch, r.cols);
    for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = value(static_cast<int>(i), 1);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = value(static_cast<int>(i), 2);
    r.weights.assign(w.data(), w.data() + w.size());
    r.x.assign(x.data(), x.data() + x.size());

    const auto q = lowbit::quantize<64, 4>(w);
    r.codes.assign(q.codes.data(), q.codes.data() + q.codes.size());
    r.scales.assign(q.scales.data(), q.scales.data() + q.scales.size());
    r.biases.assign(q.biases.data(), q.biases.data() + q.biases.size());
    const lowbit::RowMatrixXf dq = lowbit::dequantize(q);
    r.dequantized.assign(dq.data(), dq.data() + dq.size());
    const lowbit::RowMatrixXf y = lowbit::quantized_matmul(x, q);
    r.matmul.assign(y.data(), y.data() + y.size());
    const lowbit::RowMatrixXf v = lowbit::quantized_matmul(x.row(0), q);
    r.matvec.assign(v.data(), v.data() + v.size());

    for (int i = 0; i < 1000; ++i) r.activations.push_back(value(i, 3) * 0.75f + 0.5f);
    lowbit::FakeQuantize<8, false> quantizer;
    quantizer.calibrate(r.activations);
    r.calibrated_min = quantizer.observed_min();
    r.calibrated_max = quantizer.observed_max();
    r.calibrated_scale = quantizer.scale();
    r.calibrated_zero_point = quantizer.zero_point();
    r.fake_quant = quantizer.forward(r.activations);
    // Narrow the band so the mask cuts some elements off.
    lowbit::FakeQuantize<4> narrow;
    narrow.set_qparams(0.05f, 0);
    r.backward = narrow.backward_clamped(std::vector<float>(r.activations.size(), 1.0f), r.activations);
    return r;
}
