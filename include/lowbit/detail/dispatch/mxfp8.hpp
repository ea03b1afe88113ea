// dispatch/: the matmul on mxfp8's E4M3 codes. run_quantized_matmul and run_quantized_matmul_int8 below
// are what FormatKernels<Mxfp8> calls (format_kernels.hpp): the format-generic f32 kernels
// (f32_whole_words.hpp) on the E4M3 code decode (mxfp8/f32_codes.hpp), and the int8 panel GEMM on digit
// planes of mxfp8/int8_gemm.hpp (panel_int8.hpp). The row quantizer is mxfp8/quantize.hpp.
#pragma once

#include "../config.hpp"

#include <Eigen/Core>

#include "../../formats/mxfp8.hpp"
#include "../mxfp8/f32_codes.hpp"
#include "../mxfp8/int8_gemm.hpp"
#include "../mxfp8/quantize.hpp"
#include "../quantized_view.hpp"
#include "f32_whole_words.hpp"
#include "format_kernels.hpp"
#include "instruction_sets.hpp"
#include "panel_int8.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// FormatKernels<Mxfp8>::matmul (contract there): run_whole_word_matmul_f32 on its codes.
template <class Arch = dispatch_arch>
KernelRun run_quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Mxfp8>& q,
                               float* out, Eigen::Index out_stride, MatmulKernel kernel) {
    return run_whole_word_matmul_f32<Arch>(x, x_stride, M, q, out, out_stride, kernel);
}

/// FormatKernels<Mxfp8>::matmul_int8 (contract there): run_panel_matmul_int8 on the digit-plane GEMM.
template <class Ops = dispatch_int8_ops>
KernelRun run_quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                    const QuantizedView<Mxfp8>& q, float* out, Eigen::Index out_stride,
                                    MatmulKernel kernel, Int8PanelCache* panels) {
    return run_panel_matmul_int8<kernels::Mxfp8Int8Gemm, Ops>(x, x_stride, M, q, out, out_stride, kernel, panels);
}

}  // namespace detail
LOWBIT_END_NAMESPACE
