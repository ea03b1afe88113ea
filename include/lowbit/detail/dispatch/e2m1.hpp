// dispatch/: the matmul on E2M1 codes (mxfp4, nvfp4). run_quantized_matmul and run_quantized_matmul_int8
// below are what FormatKernels<Format> calls for these formats (format_kernels.hpp): the format-generic
// f32 kernels (f32_whole_words.hpp) on the E2M1 code decode (e2m1/f32_codes.hpp), and the int8 panel
// GEMM of e2m1/int8_gemm.hpp (panel_int8.hpp). Each format's row quantizer is in its own folder (mxfp4/, nvfp4/
// quantize.hpp).
#pragma once

#include "../config.hpp"

#include <Eigen/Core>

#include "../../formats/minifloats.hpp"
#include "../e2m1/f32_codes.hpp"
#include "../e2m1/int8_gemm.hpp"
#include "../mxfp4/quantize.hpp"
#include "../nvfp4/quantize.hpp"
#include "../quantized_view.hpp"
#include "f32_whole_words.hpp"
#include "format_kernels.hpp"
#include "instruction_sets.hpp"
#include "panel_int8.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// FormatKernels::matmul of an E2M1 format (contract there): run_whole_word_matmul_f32 on its codes
/// (e2m1/f32_codes.hpp).
template <class Arch = dispatch_arch, E2m1Format Format>
KernelRun run_quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                               float* out, Eigen::Index out_stride, MatmulKernel kernel) {
    return run_whole_word_matmul_f32<Arch>(x, x_stride, M, q, out, out_stride, kernel);
}

/// FormatKernels::matmul_int8 of an E2M1 format (contract there): run_panel_matmul_int8 on the panel
/// GEMM of e2m1/int8_gemm.hpp.
template <class Ops = dispatch_int8_ops, E2m1Format Format>
KernelRun run_quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                    const QuantizedView<Format>& q, float* out, Eigen::Index out_stride,
                                    MatmulKernel kernel, Int8PanelCache* panels) {
    return run_panel_matmul_int8<kernels::E2m1Int8Gemm, Ops>(x, x_stride, M, q, out, out_stride, kernel, panels);
}

}  // namespace detail
LOWBIT_END_NAMESPACE
