// lowbit: low-bit quantization for neural networks in C++20 (header-only).
//
// The one header users include. Quantization-aware training (qat.hpp): FakeQuantize, the STE functions,
// the BitNet b1.58 quantizers, GroupFakeQuantize. Inference (inference.hpp): QuantizedMatrix /
// QuantizedLinear in MLX's packed format. Training through quantized layers: the gradients of the
// quantized product (quantized_backward.hpp), the QAT layer that deploys bit for bit (qat_linear.hpp),
// LoRA adapters on a frozen quantized layer (lora_linear.hpp) and trained group scales and biases
// (dwq_linear.hpp). A program that uses only one side may include that header instead and parse less. Opt-in, because a
// program calls them in one place and they take seconds to parse in every translation unit: post-training quantization,
// <lowbit/ptq.hpp>, and checkpoint IO, <lowbit/io.hpp>. Eigen::Tensor inputs are accepted wherever a matrix
// is; a program that makes one includes <unsupported/Eigen/CXX11/Tensor> itself (lowbit only declares it).
#pragma once

#include "dwq_linear.hpp"
#include "inference.hpp"
#include "lora_linear.hpp"
#include "qat.hpp"
#include "qat_linear.hpp"
#include "quantized_backward.hpp"
