// lowbit: low-bit quantization for neural networks in C++20 (header-only).
//
// The one header users include. Quantization-aware training (qat.hpp): FakeQuantize, the STE functions,
// the BitNet b1.58 quantizers, GroupFakeQuantize. Inference (inference.hpp): QuantizedMatrix /
// QuantizedLinear in MLX's packed format. Training through quantized layers: the gradients of the
// quantized product (quantized_backward.hpp) and the QAT layer that deploys bit for bit (qat_linear.hpp). A program
// that uses only one side may include that header instead and parse less. Opt-in, because a program calls them in one
// place and they take seconds to parse in every translation unit: post-training quantization, <lowbit/ptq.hpp>, and
// checkpoint IO, <lowbit/io.hpp>.
#pragma once

#include <unsupported/Eigen/CXX11/Tensor>

#include "inference.hpp"
#include "qat.hpp"
#include "qat_linear.hpp"
#include "quantized_backward.hpp"
