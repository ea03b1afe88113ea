// What each ABI test unit computes (plain C++ types only, so abi_main.cpp does not include lowbit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct AbiResults {
    std::string simd_arch;            ///< xsimd's name of the architecture the unit's kernels use
    std::string abi_namespace;        ///< lowbit's inline namespace in that unit (empty before it existed)
    int rows = 0, cols = 0, batch = 0;
    std::vector<float> weights;       ///< [rows, cols] input of quantize
    std::vector<float> x;             ///< [batch, cols]
    std::vector<std::uint32_t> codes; ///< quantize<64, 4>(weights)
    std::vector<float> scales, biases, dequantized;
    std::vector<float> matmul;        ///< quantized_matmul(x, q), [batch, rows] (qgemm)
    std::vector<float> matvec;        ///< quantized_matmul(x.row(0), q), [rows] (qgemv)
    std::vector<float> activations;   ///< FakeQuantize input
    float calibrated_min = 0, calibrated_max = 0, calibrated_scale = 0;
    int calibrated_zero_point = 0;
    std::vector<float> fake_quant;    ///< FakeQuantize<8, false> forward after calibrate
    std::vector<float> backward;      ///< backward_clamped(ones, activations)
};

AbiResults abi_run_baseline();
AbiResults abi_run_avx2();
