// dispatch/: FormatKernels<Format>, the compiled entries of one weight format (every matmul kernel,
// the backward's transposed product and the row quantizer), and the recorded calls the public
// functions make through them.
//
// The entries are static members defined outside the class (so not inline), which lets one explicit
// instantiation compile a format's kernels and one `extern template` declaration link every other
// translation unit to that copy (format_instances.hpp). The transposed product is format-generic
// (gemm/f32_dx.hpp); each other entry calls its format's dispatch
// function, found by argument-dependent lookup on QuantizedView<Format> or FormatTag<Format>: for MLX
// affine in dispatch/mlx_affine.hpp and dispatch/mlx_affine_quantize.hpp. A new format defines those
// three functions for its view and tag in its own dispatch header, listed in dispatch/formats.hpp;
// nothing here changes.
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../gemm/f32_dx.hpp"
#include "../gemm/int8_weight_panels.hpp"
#include "../kernel_paths.hpp"
#include "../quantized_view.hpp"
#include "../row_fault.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The kernel a matmul runs: the dispatch's choice by M (automatic), or one kernel for any M (gemv:
/// one row at a time; batch: the batch GEMV; gemm: the GEMM). The kernel tests drive each kernel over
/// every shape this way, through the same compiled entry. A kernel that this build or format lacks
/// runs as the reference.
enum class MatmulKernel { automatic, gemv, batch, gemm, reference };

/// What a matmul ran, for the caller to record (kernel_paths.hpp): the entries below do not record
/// themselves, so that their compiled code does not depend on LOWBIT_RECORD_KERNEL_PATHS and one copy
/// serves every translation unit.
struct KernelRun {
    KernelOp op;
    KernelPath path;
};

/// An empty value whose type names a format, for dispatch functions that take no view.
template <class Format>
struct FormatTag {};

/// The compiled entries of Format (see the top of this file). `Selected` is true everywhere but in
/// the kernel instance files, which instantiate FormatKernels<Format, false> (empty) for the formats
/// another file compiles.
template <class Format, bool Selected = true>
struct FormatKernels {
    /// out = x * dequantize(q)^T on raw row-major storage (x [M, K] with row stride x_stride, out
    /// [M, N] with row stride out_stride), threads inside; `kernel` as above. Returns what ran.
    static KernelRun matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                            float* out, Eigen::Index out_stride, MatmulKernel kernel);
    /// The int8-activation matmul (docs/numerics.md N11) likewise; x must be finite (the caller
    /// checks). `panels`: the layer's cache of prepacked weight panels, or null.
    static KernelRun matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                                 float* out, Eigen::Index out_stride, MatmulKernel kernel, Int8PanelCache* panels);
    /// dx = dy * dequantize(q) (docs/numerics.md N20, gemm/f32_dx.hpp) on raw row-major storage (dy
    /// [M, N] with row stride dy_stride, dx [M, K] with row stride dx_stride), M >= 1, threads inside.
    static void matmul_dx(const float* dy, Eigen::Index dy_stride, Eigen::Index M, const QuantizedView<Format>& q,
                          float* dx, Eigen::Index dx_stride);
    /// Quantizes one row of `groups` groups into its packed words and per-group parameters
    /// (code_bytes: scratch for groups * group_size bytes). Returns what it found.
    static RowFault quantize_row(const float* values, std::size_t groups, std::uint8_t* code_bytes,
                                 std::uint32_t* words, typename Format::scale_type* scales, float* biases);
};

template <class Format>
struct FormatKernels<Format, false> {};

template <class Format, bool Selected>
KernelRun FormatKernels<Format, Selected>::matmul(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                                  const QuantizedView<Format>& q, float* out, Eigen::Index out_stride,
                                                  MatmulKernel kernel) {
    return run_quantized_matmul(x, x_stride, M, q, out, out_stride, kernel);
}

template <class Format, bool Selected>
KernelRun FormatKernels<Format, Selected>::matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M,
                                                       const QuantizedView<Format>& q, float* out,
                                                       Eigen::Index out_stride, MatmulKernel kernel,
                                                       Int8PanelCache* panels) {
    return run_quantized_matmul_int8(x, x_stride, M, q, out, out_stride, kernel, panels);
}

template <class Format, bool Selected>
void FormatKernels<Format, Selected>::matmul_dx(const float* dy, Eigen::Index dy_stride, Eigen::Index M,
                                                const QuantizedView<Format>& q, float* dx, Eigen::Index dx_stride) {
    quantized_matmul_dx(dy, dy_stride, M, q, dx, dx_stride);
}

template <class Format, bool Selected>
RowFault FormatKernels<Format, Selected>::quantize_row(const float* values, std::size_t groups,
                                                       std::uint8_t* code_bytes, std::uint32_t* words,
                                                       typename Format::scale_type* scales, float* biases) {
    return run_quantize_row(FormatTag<Format>{}, values, groups, code_bytes, words, scales, biases);
}

/// FormatKernels<Format>::matmul, recorded.
template <class Format>
void quantized_matmul(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q, float* out,
                      Eigen::Index out_stride, MatmulKernel kernel = MatmulKernel::automatic) {
    const KernelRun run = FormatKernels<Format>::matmul(x, x_stride, M, q, out, out_stride, kernel);
    record(run.op, run.path);
}

/// FormatKernels<Format>::matmul_int8, recorded.
template <class Format>
void quantized_matmul_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<Format>& q,
                           float* out, Eigen::Index out_stride, MatmulKernel kernel = MatmulKernel::automatic,
                           Int8PanelCache* panels = nullptr) {
    const KernelRun run = FormatKernels<Format>::matmul_int8(x, x_stride, M, q, out, out_stride, kernel, panels);
    record(run.op, run.path);
}

}  // namespace detail
LOWBIT_END_NAMESPACE
