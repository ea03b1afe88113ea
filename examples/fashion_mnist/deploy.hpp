// The Fashion-MNIST example's deployment: the trained float weights converted to lowbit::QuantizedLinear
// by MLX's round-to-nearest or one of lowbit's post-training quantizers (lowbit/ptq.hpp), and the
// deployed model's predictions with float or int8 activations.
#pragma once

#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>
#include <lowbit/ptq.hpp>

#include "model.hpp"

namespace fashion_mnist {

using lowbit::PtqMethod;

/// The results table's label of a method.
inline const char* method_name(PtqMethod method) {
    switch (method) {
        case PtqMethod::clip_search:
            return "PTQ clip";
        case PtqMethod::hqq: return "PTQ HQQ";
        case PtqMethod::gptq: return "PTQ GPTQ";
        case PtqMethod::rtn: break;
    }
    return "PTQ RTN";
}

/// The model's layers as QuantizedLinear<64, Bits>, quantized by `method` (lowbit::ptq::quantize with its
/// default options). The calibrated methods (clip search weighted by the mean square of each input,
/// GPTQ) see each layer's inputs on `calibration` (training images) as the already quantized layers
/// before it produce them.
template <int Bits>
std::vector<lowbit::QuantizedLinear<group_size, Bits>> deploy(const Mlp& model, PtqMethod method,
                                                              const RowMatrix& calibration) {
    std::vector<lowbit::QuantizedLinear<group_size, Bits>> deployed;
    const bool uses_inputs = method == PtqMethod::clip_search || method == PtqMethod::gptq;
    RowMatrix inputs = calibration;
    for (int l = 0; l < layers; ++l) {
        const Dense& d = model.dense[l];
        lowbit::PtqOptions options;
        options.method = method;
        lowbit::QuantizedMatrix<group_size, Bits> weight =
            lowbit::ptq::quantize<group_size, Bits>(d.weight, inputs, options);
        deployed.emplace_back(std::move(weight), Eigen::VectorXf(d.bias));
        if (l + 1 < layers && uses_inputs) inputs = relu(deployed.back().forward(inputs));
    }
    return deployed;
}

/// Predictions of deployed layers (QuantizedLinear) on x, with the packed matmul's activations f32 or
/// int8 (per row and group, docs/numerics.md N11).
template <class Layers>
std::vector<int> deployed_predictions(const Layers& deployed, const RowMatrix& x,
                                      lowbit::Activations activations = lowbit::Activations::f32) {
    RowMatrix input = x;
    for (std::size_t l = 0; l < deployed.size(); ++l) {
        RowMatrix z = deployed[l].forward(input, activations);
        input = l + 1 < deployed.size() ? relu(z) : z;
    }
    return argmax_rows(input);
}

}  // namespace fashion_mnist
