// nvfp4 with MLX's per-tensor global scale: quantize_nvfp4 and dequantize_nvfp4, MLX 0.32's
// `mx.quantize(w, mode="nvfp4", global_scale=g)` and `mx.dequantize(..., global_scale=g)` (docs/
// numerics.md N17.6). The global scale g is a float that the caller keeps beside the matrix: the codes
// and scale bytes are an ordinary QuantizedMatrixOf<Nvfp4>, but they stand for E2M1(q) * E4M3(s) *
// g / 2688 (2688 = 448 * 6, E4M3's and E2M1's largest values), so the matmul kernels, QuantizedLinear
// and the checkpoints (which, as MLX's quantized_matmul and layers, carry no global scale) give results
// 2688 / g times too large unless the caller scales them.
#pragma once

#include "detail/config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "detail/checks.hpp"
#include "detail/kernel_paths.hpp"
#include "detail/nvfp4/quantize.hpp"
#include "detail/threading/parallel.hpp"
#include "matrix_types.hpp"
#include "quantized_matrix.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail {

/// 2688 / global_scale, the factor MLX multiplies scales and quotients by; throws
/// std::invalid_argument naming `function` unless global_scale is positive, finite and at least
/// 2688 / FLT_MAX (so the factor is finite).
inline float nvfp4_global_encode(const char* function, float global_scale) {
    // Checked before dividing: 2688 / 0 is a float division by zero (UBSan's float-divide-by-zero).
    const bool positive = global_scale > 0.0f && std::isfinite(global_scale);
    const float encode = positive ? 2688.0f / global_scale : 0.0f;
    if (!positive || !std::isfinite(encode))
        throw std::invalid_argument(std::string(function) + ": global_scale = " + float_text(global_scale) +
                                    " must be positive and finite, with 2688 / global_scale finite");
    return encode;
}

}  // namespace detail

/// Quantizes w [out, in] (float, Eigen::half or Eigen::bfloat16 elements, read as MLX reads that
/// dtype) into nvfp4 under the global scale g, exactly as MLX's CPU `mx.quantize(w, mode="nvfp4",
/// global_scale=g)`: per group of 16 the scale byte s = E4M3(fl(r * 2688 / g)), r as in N17.2, and per
/// value the E2M1 code of fl(v * 2688 / g), v as in N17.2 (docs/numerics.md N17.6). g = 2688 gives
/// quantize<Nvfp4>(w). Throws std::invalid_argument as quantize<Nvfp4>, and for a g that is not
/// positive and finite or whose 2688 / g overflows.
template <class Derived>
QuantizedMatrixOf<Nvfp4> quantize_nvfp4(const Eigen::MatrixBase<Derived>& w, float global_scale) {
    constexpr const char* function = "lowbit::quantize_nvfp4";
    const float encode = detail::nvfp4_global_encode(function, global_scale);
    return detail::with_widened(w, [&]<class Input>(detail::InputTag<Input>, const auto& values) {
        return detail::quantize_rows<Nvfp4, Input>(
            function, values,
            [encode](const float* row, std::size_t groups, std::uint8_t* code_bytes, std::uint32_t* words,
                     std::uint8_t* scales, float*) {
                detail::record(detail::KernelOp::quantize_group, detail::KernelPath::reference);
                return detail::quantize_nvfp4_row<Input>(row, groups, code_bytes, words, scales, encode);
            });
    });
}

/// The float32 matrix that q stands for under the global scale g, exactly as MLX's CPU
/// `mx.dequantize(..., mode="nvfp4", global_scale=g)`: w = fl(E2M1(q) * fl(E4M3(s) * fl(g / 2688)))
/// (MLX returns float32 here whatever dtype it is asked for). Throws std::invalid_argument for
/// inconsistent or empty parts and for a g as quantize_nvfp4 refuses.
inline RowMatrixXf dequantize_nvfp4(const QuantizedMatrixOf<Nvfp4>& q, float global_scale) {
    constexpr const char* function = "lowbit::dequantize_nvfp4";
    detail::nvfp4_global_encode(function, global_scale);
    q.check_shapes(function);
    const float decode = global_scale / 2688.0f;
    constexpr int group_size = Nvfp4::group_size;
    const Eigen::Index rows = q.rows(), cols = q.cols();
    RowMatrixXf w(rows, cols);
    detail::parallel_for(
        static_cast<std::size_t>(rows), detail::rows_per_range(cols), [&](std::size_t begin, std::size_t end) {
            std::vector<std::uint8_t> codes(static_cast<std::size_t>(cols));
            for (std::size_t r = begin; r < end; ++r) {
                const auto row = static_cast<Eigen::Index>(r);
                detail::kernels::unpack_codes<Nvfp4::bits>(&q.codes(row, 0), codes.size(), codes.data());
                for (Eigen::Index c = 0; c < cols; ++c) {
                    const float scale = e4m3_value(q.scales(row, c / group_size)) * decode;
                    w(row, c) = E2m1::values[codes[static_cast<std::size_t>(c)]] * scale;
                }
            }
        });
    return w;
}

LOWBIT_END_NAMESPACE
