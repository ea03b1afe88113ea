// lowbit: low-bit quantization for neural networks in C++20 (header-only).
//
// The one header users include. Quantization-aware training: FakeQuantize, the STE functions and the
// BitNet b1.58 quantizers. Inference: QuantizedMatrix / QuantizedLinear in MLX's packed format.
#pragma once

#include "version.hpp"
#include "parallel.hpp"
#include "rounding.hpp"
#include "matrix_types.hpp"
#include "fake_quantize.hpp"
#include "ste.hpp"
#include "bitnet.hpp"
#include "quantized_matrix.hpp"
#include "quantized_linear.hpp"
#include "group_fake_quantize.hpp"
