// lowbit for inference only: QuantizedMatrix, quantize / dequantize, QuantizedLinear, quantized_matmul
// (MLX's affine format), TernaryLinear (deployed BitNet b1.58) and the thread count. Includes neither the
// QAT headers nor Eigen's Tensor module (QuantizedLinear::forward still takes an Eigen::Tensor when you
// include that module yourself). <lowbit/lowbit.hpp> includes this and the QAT side; the post-training
// quantizers (<lowbit/ptq.hpp>) and checkpoint IO (<lowbit/io.hpp>) are opt-in.
#pragma once

#include "version.hpp"
#include "parallel.hpp"
#include "matrix_types.hpp"
#include "formats/mlx_affine.hpp"
#include "quantized_matrix.hpp"
#include "quantized_linear.hpp"
#include "ternary_linear.hpp"
