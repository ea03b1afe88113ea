// lowbit for inference only: QuantizedMatrixOf<Format>, quantize / dequantize (every format; nvfp4 with
// a global scale too), QuantizedLinear and quantized_matmul, TernaryLinear (deployed BitNet b1.58) and
// the thread count. Includes neither the QAT headers nor Eigen's Tensor module (QuantizedLinear::forward
// still takes an Eigen::Tensor when you include that module yourself). <lowbit/lowbit.hpp> includes this
// and the QAT side; the post-training quantizers (<lowbit/ptq.hpp>) and checkpoint IO (<lowbit/io.hpp>)
// are opt-in.
#pragma once

#include "errors.hpp"
#include "formats/mlx_affine.hpp"
#include "matrix_types.hpp"
#include "nvfp4_global_scale.hpp"
#include "parallel.hpp"
#include "quantized_linear.hpp"
#include "quantized_matrix.hpp"
#include "ternary_linear.hpp"
#include "version.hpp"
