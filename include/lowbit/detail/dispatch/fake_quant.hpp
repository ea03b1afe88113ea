// dispatch/ is the one place kernels are selected (one file per family of operations: this one for the
// element-wise fake-quant passes, mlx_affine.hpp for the matmul on MLX affine codes): by operation, by
// weight format, and by the instruction set this translation unit was compiled for (simd::arch). Every
// operation falls back to its scalar reference where no specialised kernel exists (LOWBIT_FORCE_SCALAR, a
// target xsimd has no unit for, or a format or bit width without a kernel). Callers (the threaded passes
// and the public entry points) never choose between kernel and reference themselves.
//
//   operation                    format           kernel (any xsimd Arch)              reference
//   fake_quantize_forward        -                kernels::fake_quantize_forward       reference::fake_quantize_forward
//   backward_clamped             -                kernels::backward_clamped            reference::backward_clamped
//   finite_min_max               -                kernels::finite_min_max              reference::finite_min_max
//   matmul, f32 activations      MLX affine       kernels::qgemv_f32 (M = 1, Bits in   reference::quantized_matmul
//                                                 {1, 2, 4, 8}), kernels::qgemv_f32_batch
//                                                 (2 <= M <= 16, same bits),
//                                                 kernels::qgemv_f32_straddling(_batch)
//                                                 (M = 1 and 2 <= M <= 7, Bits in {3, 5, 6}),
//                                                 kernels::qgemm_f32 (rest)
//   quantize a row of groups     MLX affine       kernels::quantize_row_f32            reference::quantize_group
//
// A new instruction set is a new simd::arch (detail/arch/) that the kernels above accept; a new kernel
// for a format is one more row in its file (MlxAffineF32Kernels shows the shape of a kernel table); a new
// format is a new file here.
#pragma once

#include "../config.hpp"

#include <cstddef>

#include "../fake_quant/kernels.hpp"
#include "../fake_quant/reference.hpp"
#include "../kernel_paths.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

// ------------------------------------------------------------------------------ element-wise fake-quant

/// The compiled entries of the element-wise fake-quant kernels for Arch (an xsimd arch that is enabled;
/// with `Enabled` false they are declared only, for the discarded branches below), defined outside the
/// class so that, as FormatKernels
/// (format_kernels.hpp), one explicit instantiation in lowbit::kernels (src/kernel_instances.cpp) serves
/// every translation unit built with LOWBIT_EXTERN_KERNELS. They do not record kernel paths (their
/// callers below do).
template <class Arch, bool Enabled = simd::enabled>
struct FakeQuantKernels {
    static void forward(const FakeQuantParams& params, kernels::Quotient quotient, bool stream, const float* in,
                        float* out, std::size_t count);
    static void backward_clamped(const GradientMaskParams& mask, kernels::Quotient quotient, bool stream,
                                 const float* grad, const float* input, float* out, std::size_t count);
    static FiniteRange finite_min_max(const float* in, std::size_t count);
};

template <class Arch>
struct FakeQuantKernels<Arch, false> {
    static void forward(const FakeQuantParams&, kernels::Quotient, bool, const float*, float*, std::size_t);
    static void backward_clamped(const GradientMaskParams&, kernels::Quotient, bool, const float*, const float*, float*,
                                 std::size_t);
    static FiniteRange finite_min_max(const float*, std::size_t);
};

template <class Arch, bool Enabled>
void FakeQuantKernels<Arch, Enabled>::forward(const FakeQuantParams& params, kernels::Quotient quotient, bool stream,
                                              const float* in, float* out, std::size_t count) {
    kernels::fake_quantize_forward<Arch>(params, quotient, stream, in, out, count);
}

template <class Arch, bool Enabled>
void FakeQuantKernels<Arch, Enabled>::backward_clamped(const GradientMaskParams& mask, kernels::Quotient quotient,
                                                       bool stream, const float* grad, const float* input, float* out,
                                                       std::size_t count) {
    kernels::backward_clamped<Arch>(mask, quotient, stream, grad, input, out, count);
}

template <class Arch, bool Enabled>
FiniteRange FakeQuantKernels<Arch, Enabled>::finite_min_max(const float* in, std::size_t count) {
    return kernels::finite_min_max<Arch>(in, count);
}

#if defined(LOWBIT_EXTERN_KERNELS)
extern template struct FakeQuantKernels<simd::arch>;
#endif

/// How a fake-quant call forms x / s (kernels::Quotient); decided once per call, before the ranges.
inline kernels::Quotient fake_quant_quotient_for(const FakeQuantParams& params) noexcept {
    return kernels::choose_quotient(params);
}

/// out = fake-quant(in) over one range (deterministic rounding).
inline void fake_quantize_forward_range(const FakeQuantParams& params, kernels::Quotient quotient, bool stream,
                                        const float* in, float* out, std::size_t count) {
    if constexpr (simd::enabled) {
        record(KernelOp::fake_quantize_forward, KernelPath::simd);
        FakeQuantKernels<simd::arch>::forward(params, quotient, stream, in, out, count);
    } else {
        record(KernelOp::fake_quantize_forward, KernelPath::reference);
        reference::fake_quantize_forward(params, in, out, count);
    }
}

/// out = grad where input passes the mask, else +0, over one range.
inline void backward_clamped_range(const GradientMaskParams& mask, kernels::Quotient quotient, bool stream,
                                   const float* grad, const float* input, float* out, std::size_t count) {
    if constexpr (simd::enabled) {
        record(KernelOp::backward_clamped, KernelPath::simd);
        FakeQuantKernels<simd::arch>::backward_clamped(mask, quotient, stream, grad, input, out, count);
    } else {
        record(KernelOp::backward_clamped, KernelPath::reference);
        reference::backward_clamped(mask, grad, input, out, count);
    }
}

/// Smallest and largest finite value of one range.
inline FiniteRange finite_min_max_range(const float* in, std::size_t count) {
    if constexpr (simd::enabled) {
        record(KernelOp::finite_min_max, KernelPath::simd);
        return FakeQuantKernels<simd::arch>::finite_min_max(in, count);
    } else {
        record(KernelOp::finite_min_max, KernelPath::reference);
        return reference::finite_min_max(in, count);
    }
}

}  // namespace detail
LOWBIT_END_NAMESPACE
