// Links the baseline and the AVX2 + FMA unit into one program and checks that both compute the right
// results: quantize / dequantize / fake quantization exactly equal (their kernels are bit-identical to
// the scalar references by contract), the matmuls within the float dot-product bound of a double
// product computed here. Exits 77 (ctest: skipped) on a CPU without AVX2 and FMA.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "abi_results.hpp"

namespace {

int failures = 0;

void expect(bool condition, const std::string& what) {
    if (!condition) {
        std::printf("FAILED: %s\n", what.c_str());
        ++failures;
    }
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// The matmul of one unit against a double product of x and that unit's dequantized weights.
void check_matmul(const AbiResults& r, const char* unit) {
    for (int m = 0; m < r.batch; ++m)
        for (int n = 0; n < r.rows; ++n) {
            double exact = 0.0, magnitude = 0.0;
            for (int k = 0; k < r.cols; ++k) {
                const double term = double(r.x[std::size_t(m * r.cols + k)]) * double(r.dequantized[std::size_t(n * r.cols + k)]);
                exact += term;
                magnitude += std::fabs(term) + std::fabs(double(r.x[std::size_t(m * r.cols + k)]) *
                                                         double(r.biases[std::size_t(n * (r.cols / 64) + k / 64)]));
            }
            const double bound = 8.0 * std::sqrt(double(r.cols)) * 0x1.0p-24 * magnitude + 1e-30;
            const double got = r.matmul[std::size_t(m * r.rows + n)];
            if (std::fabs(got - exact) > bound)
                expect(false, std::string(unit) + ": quantized_matmul(" + std::to_string(m) + ", " + std::to_string(n) +
                                  ") = " + std::to_string(got) + ", exact " + std::to_string(exact));
            if (m == 0 && std::fabs(double(r.matvec[std::size_t(n)]) - exact) > bound)
                expect(false, std::string(unit) + ": quantized_matmul(row 0)[" + std::to_string(n) + "] = " +
                                  std::to_string(r.matvec[std::size_t(n)]) + ", exact " + std::to_string(exact));
        }
}

}  // namespace

int main() {
    const AbiResults base = abi_run_baseline();
    std::printf("baseline unit: xsimd arch %s, lowbit namespace %s\n", base.simd_arch.c_str(), base.abi_namespace.c_str());
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        std::printf("this CPU has no AVX2 + FMA: the AVX2 unit cannot run here; skipped\n");
        return 77;
    }
    const AbiResults avx2 = abi_run_avx2();
    std::printf("avx2 unit:     xsimd arch %s, lowbit namespace %s\n", avx2.simd_arch.c_str(), avx2.abi_namespace.c_str());

    expect(base.simd_arch != avx2.simd_arch, "both units report the same SIMD architecture (" + base.simd_arch +
                                                 "): one unit runs the other's lowbit code");
    expect(base.abi_namespace != avx2.abi_namespace || base.abi_namespace.empty(),
           "both units use the lowbit namespace " + base.abi_namespace);
    expect(same_bits(base.codes, avx2.codes), "quantize: codes differ between the units");
    expect(same_bits(base.scales, avx2.scales), "quantize: scales differ between the units");
    expect(same_bits(base.biases, avx2.biases), "quantize: biases differ between the units");
    expect(same_bits(base.dequantized, avx2.dequantized), "dequantize differs between the units");
    expect(same_bits(base.fake_quant, avx2.fake_quant), "FakeQuantize::forward differs between the units");
    expect(same_bits(base.backward, avx2.backward), "FakeQuantize::backward_clamped differs between the units");
    expect(base.calibrated_scale == avx2.calibrated_scale && base.calibrated_zero_point == avx2.calibrated_zero_point,
           "FakeQuantize::calibrate gives different qparams");

    // Known values: the activations span [min, max] with min < 0 < max; A4's asymmetric qparams.
    float lo = base.activations[0], hi = base.activations[0];
    for (float a : base.activations) {
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    for (const AbiResults* r : {&base, &avx2}) {
        const std::string unit = r == &base ? "baseline" : "avx2";
        expect(r->calibrated_min == lo && r->calibrated_max == hi, unit + ": calibrate found the wrong range");
        expect(r->calibrated_scale == (hi - lo) / 255.0f, unit + ": calibrated scale is not (max - min) / 255");
        expect(r->dequantized.size() == std::size_t(r->rows * r->cols), unit + ": dequantize has the wrong size");
        for (std::size_t i = 0; i < r->dequantized.size(); ++i) {
            const float s = std::fabs(r->scales[i / std::size_t(r->cols) * std::size_t(r->cols / 64) + i % std::size_t(r->cols) / 64]);
            if (std::fabs(r->dequantized[i] - r->weights[i]) > s * 1.0001f) {
                expect(false, unit + ": dequantize(quantize(w)) is more than one step from w at " + std::to_string(i));
                break;
            }
        }
        std::size_t passed = 0;
        for (std::size_t i = 0; i < r->activations.size(); ++i) {
            const bool inside = r->activations[i] >= -7 * 0.05f && r->activations[i] <= 7 * 0.05f;
            expect(r->backward[i] == (inside ? 1.0f : 0.0f), unit + ": backward_clamped mask wrong at " + std::to_string(i));
            passed += inside ? 1 : 0;
        }
        expect(passed > 0 && passed < r->activations.size(), unit + ": the mask test data is degenerate");
        check_matmul(*r, unit.c_str());
    }
    std::printf("%s\n", failures == 0 ? "both units correct" : "FAILED");
    return failures == 0 ? 0 : 1;
}
