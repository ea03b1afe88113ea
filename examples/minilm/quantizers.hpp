// The quantizers the MiniLM example applies to its linear layers: MLX's round-to-nearest and lowbit's
// post-training quantizers (lowbit/ptq), each giving an ordinary MLX-format QuantizedLinear per layer.
// Kept apart from bert.hpp because choosing the format at run time instantiates the kernels of every
// supported MLX format (AnyQuantizedLinear's 18), which only the example needs; tests pass a quantizer
// for the few formats they use.
//
// Calibration. clip search (weighted) and GPTQ need each layer's real inputs: capture_linear_inputs
// records them on calibration sentences. By default they come from the float model (every layer sees
// the inputs float layers before it produce); a method with the "-seq" suffix instead takes layer l's
// inputs from the model whose layers before l are already quantized by the same method (GPTQ's usual
// sequential practice: each layer corrects for the error of the layers before it).
//
// Bias correction ("-bc"). The layers keep a float bias, so the mean of a layer's output error on the
// calibration inputs, mean(x) (W - W_q)^T, can be added back into it (Nagel et al., "Data-Free
// Quantization Through Weight Equalization and Bias Correction", 2019, empirical form). What is left is
// the error on the centred inputs x - mean(x); so a bias-corrected method fits the weights to the centred
// inputs (GPTQ's H and clip search's channel weights from x - mean(x)). BERT's hidden states have a few
// channels with large means, which otherwise dominate X^T X.
//
// Scale and bias distillation ("-dwq"). After the codes are chosen, each row's group scales and biases
// are refitted to the float layer's outputs on the calibration inputs, the codes frozen
// (lowbit::distill_scales_biases: the least-squares optimum that DWQ's gradient descent approaches on a
// layer). The targets are always the float model's: x_float W^T, x_float the layer's inputs in the float
// model; with "-seq" the refit sees the partly quantized model's inputs, so it also corrects what the
// earlier layers got wrong. With "-bc" the fit is to the centred inputs and targets, and the float bias
// takes the mean of what is left: the least-squares fit with the layer's bias free as well.
//
// End-to-end distillation ("-e2e", after the other suffixes). The scales and biases of all 36 layers,
// codes frozen, are then trained together by Adam so that the quantized model's last hidden states match
// the float model's on the calibration sentences (distill.hpp): unlike -dwq, each layer can correct what
// the others get wrong. Float scales only (the affine formats at 2 to 4 bits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <lowbit/any_quantized_linear.hpp>
#include <lowbit/ptq/distill_scales_biases.hpp>
#include <lowbit/ptq/quantize.hpp>

#include "bert.hpp"
#include "distill.hpp"

namespace minilm {

using Batch = std::vector<std::vector<std::int32_t>>;

/// `layer` (any format) as a QuantizedLayer whose forward runs with `activations`.
inline QuantizedLayer as_quantized_layer(const lowbit::AnyQuantizedLinear& layer, lowbit::Activations activations) {
    return std::visit([&](const auto& typed) { return make_quantized_layer(typed, activations); }, layer.variant());
}

/// A Quantizer: MLX's round-to-nearest (lowbit::quantize) at any supported (group size, bits); the layer
/// index is not needed. Throws std::invalid_argument for an unsupported pair or a layer whose in is not
/// a multiple of the group.
inline QuantizedLayer round_to_nearest(std::size_t /*index*/, const lowbit::Linear& layer, int group_size, int bits,
                                       lowbit::Activations activations) {
    return as_quantized_layer(lowbit::AnyQuantizedLinear::from_linear(layer, group_size, bits), activations);
}

/// Inputs [tokens, in] each linear layer sees (packed rows of all sentences), in linear_layers() order,
/// when `model` embeds `sentences` (one batch).
inline std::vector<RowMatrix> capture_linear_inputs(const BertModel& model, const Batch& sentences) {
    std::vector<RowMatrix> inputs(model.linear_layers().size());
    model.embed(sentences, [&](std::size_t index, const RowMatrix& x) { inputs[index] = x; });
    return inputs;
}

/// A quantization method of the example, by the name --methods takes:
///   rtn        MLX's round-to-nearest (lowbit::quantize)
///   clip       lowbit::clip_search, each group's error weighted per input channel by the mean square of
///              the layer's calibration inputs (channel_weights_from_calibration)
///   hqq        lowbit::hqq (no calibration)
///   gptq       lowbit::gptq on the layer's calibration inputs
///   clip-gptq  gptq with each group's range chosen by clip search (GptqOptions::clip_groups)
/// each optionally followed by "-bc" (bias correction), then "-dwq" (scales and biases distilled to the
/// float layer's outputs), then "-seq" (calibration inputs from the partly quantized model) and then
/// "-e2e" (the scales and biases of all layers distilled together to the float model's embeddings on the
/// calibration sentences: distill.hpp); see the top of this file. "-seq" needs a calibrated method.
struct Method {
    enum class Kind { rtn, clip, hqq, gptq, clip_gptq };
    Kind kind = Kind::rtn;
    bool bias_corrected = false;
    bool distilled = false;
    bool sequential = false;
    bool end_to_end = false;  ///< "-e2e": then every layer's scales and biases distilled together (distill.hpp)

    /// Parses a --methods name. Throws std::invalid_argument naming an unknown name or "-seq" on a
    /// method without calibration.
    static Method parse(const std::string& name) {
        std::string base = name;
        const auto strip = [&](const std::string& suffix) {
            const bool found = base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0;
            if (found) base.resize(base.size() - suffix.size());
            return found;
        };
        Method method;
        method.end_to_end = strip("-e2e");
        method.sequential = strip("-seq");
        method.distilled = strip("-dwq");
        method.bias_corrected = strip("-bc");
        if (base == "rtn") method.kind = Kind::rtn;
        else if (base == "clip") method.kind = Kind::clip;
        else if (base == "hqq") method.kind = Kind::hqq;
        else if (base == "gptq") method.kind = Kind::gptq;
        else if (base == "clip-gptq") method.kind = Kind::clip_gptq;
        else
            throw std::invalid_argument("unknown method '" + name +
                                        "' (rtn, clip, hqq, gptq, clip-gptq; then -bc, -dwq, -seq, -e2e)");
        if (method.sequential && !method.calibrated())
            throw std::invalid_argument("method '" + name +
                                        "': only methods with calibration inputs (clip, gptq, clip-gptq, "
                                        "any with -bc or -dwq) take -seq");
        return method;
    }

    std::string name() const {
        const char* names[] = {"rtn", "clip", "hqq", "gptq", "clip-gptq"};
        return std::string(names[static_cast<int>(kind)]) + (bias_corrected ? "-bc" : "") + (distilled ? "-dwq" : "") +
               (sequential ? "-seq" : "") + (end_to_end ? "-e2e" : "");
    }

    /// The lowbit::ptq::quantize options of the base method (clip-gptq: GPTQ with clip-searched groups).
    lowbit::PtqOptions ptq_options(const lowbit::GptqOptions& gptq_options) const {
        lowbit::PtqOptions options;
        options.gptq = gptq_options;
        options.gptq.clip_groups = kind == Kind::clip_gptq;
        const lowbit::PtqMethod methods[] = {lowbit::PtqMethod::rtn, lowbit::PtqMethod::clip_search,
                                             lowbit::PtqMethod::hqq, lowbit::PtqMethod::gptq, lowbit::PtqMethod::gptq};
        options.method = methods[static_cast<int>(kind)];
        return options;
    }

    /// MLX's round-to-nearest itself (the reference every other method is compared with).
    bool is_plain_rtn() const { return kind == Kind::rtn && !bias_corrected && !distilled && !end_to_end; }

    /// Whether the method needs the layers' calibration inputs.
    bool calibrated() const {
        return bias_corrected || distilled || kind == Kind::clip || kind == Kind::gptq || kind == Kind::clip_gptq;
    }

    /// Whether the method needs the float model's calibration inputs (besides the partly quantized ones).
    bool needs_float_inputs() const { return calibrated() && (!sequential || distilled); }
};

/// `layer` quantized by `method` at (group_size, bits), its bias kept float (and corrected with -bc).
/// `inputs` [samples, in] are the layer's calibration inputs (read by calibrated methods only) and
/// `float_inputs` the same rows' inputs in the float model (read by -dwq only: its targets). The
/// methods other than plain rtn run at 2, 3 and 4 bits (where round-to-nearest loses; fewer formats keep
/// the example's compile time down).
/// Throws std::invalid_argument for an unsupported format, bits above 4 with a method other than rtn, or
/// what the method refuses (bad calibration inputs, an H that stays singular).
inline lowbit::AnyQuantizedLinear quantize_layer(const lowbit::Linear& layer, const Method& method, int group_size,
                                                 int bits, const RowMatrix& inputs, const RowMatrix& float_inputs,
                                                 const lowbit::GptqOptions& gptq_options) {
    if (method.is_plain_rtn()) return lowbit::AnyQuantizedLinear::from_linear(layer, group_size, bits);
    if (bits > 4)
        throw std::invalid_argument("method " + method.name() + " runs at 2, 3 or 4 bits, got bits = " + std::to_string(bits));
    return lowbit::dispatch_quantization(group_size, bits, [&]<class Layer>(std::type_identity<Layer>) -> lowbit::AnyQuantizedLinear {
        constexpr int G = Layer::group_size, B = Layer::bits;
        if constexpr (B > 4) {
            throw std::logic_error("minilm::quantize_layer: bits above 4 reached the PTQ dispatch");
        } else {
            const Eigen::RowVectorXf mean =
                method.bias_corrected ? Eigen::RowVectorXf(inputs.cast<double>().colwise().mean().cast<float>()) : Eigen::RowVectorXf();
            const bool reads_centred =
                method.distilled || (method.kind != Method::Kind::rtn && method.kind != Method::Kind::hqq);
            const RowMatrix centred =
                method.bias_corrected && reads_centred ? RowMatrix(inputs.rowwise() - mean) : RowMatrix();
            const RowMatrix& fit_inputs = method.bias_corrected ? centred : inputs;
            typename Layer::Matrix weight =
                lowbit::ptq::quantize<G, B>(layer.weight, fit_inputs, method.ptq_options(gptq_options));
            // The float layer's outputs: what -dwq fits to (centred with -bc, whose bias then takes their mean).
            RowMatrix targets = method.distilled ? RowMatrix(float_inputs * layer.weight.transpose()) : RowMatrix();
            Eigen::RowVectorXf target_mean;
            if (method.distilled && method.bias_corrected) {
                target_mean = targets.cast<double>().colwise().mean().cast<float>();
                targets.rowwise() -= target_mean;
            }
            if (method.distilled) weight = lowbit::distill_scales_biases(weight, fit_inputs, targets);
            std::optional<Eigen::VectorXf> bias = layer.bias;
            if (method.bias_corrected) {  // bias += the output error's mean on the calibration inputs
                const Eigen::VectorXf shift =
                    method.distilled
                        ? Eigen::VectorXf(target_mean.transpose() - lowbit::dequantize(weight) * mean.transpose())
                        : Eigen::VectorXf((layer.weight - lowbit::dequantize(weight)) * mean.transpose());
                bias = bias ? Eigen::VectorXf(*bias + shift) : shift;
            }
            return lowbit::AnyQuantizedLinear(Layer(std::move(weight), std::move(bias)));
        }
    });
}

/// Every linear layer of `float_model` quantized by `method` at (group_size, bits), in linear_layers()
/// order. Calibrated methods read `float_inputs` (capture_linear_inputs of the float model on the
/// calibration sentences) or, when sequential, capture each layer's inputs on `calibration` from the
/// model whose earlier layers are already quantized (run with f32 activations). Throws as quantize_layer,
/// and std::invalid_argument when a calibrated method has no calibration inputs.
inline std::vector<lowbit::AnyQuantizedLinear> quantize_linear_layers(const BertModel& float_model, const Method& method,
                                                                      int group_size, int bits,
                                                                      const std::vector<RowMatrix>& float_inputs,
                                                                      const Batch& calibration,
                                                                      const lowbit::GptqOptions& gptq_options) {
    const auto layers = float_model.linear_layers();
    if (method.calibrated() && ((method.sequential && calibration.empty()) ||
                                (method.needs_float_inputs() && float_inputs.size() != layers.size())))
        throw std::invalid_argument("method " + method.name() + " needs calibration sentences");
    std::vector<lowbit::AnyQuantizedLinear> quantized;
    BertModel partly_quantized = method.sequential ? float_model : BertModel();
    RowMatrix captured;  // sequential: the current layer's inputs in the partly quantized model
    for (std::size_t l = 0; l < layers.size(); ++l) {
        if (method.sequential && l % 6 != 1 && l % 6 != 2)  // key and value see the query's input
            partly_quantized.embed(calibration, [&](std::size_t index, const RowMatrix& x) {
                if (index == l) captured = x;
            });
        const RowMatrix& inputs = method.calibrated() && !method.sequential ? float_inputs[l] : captured;
        const RowMatrix& float_layer_inputs = method.needs_float_inputs() ? float_inputs[l] : captured;
        quantized.push_back(quantize_layer(layers[l]->float_layer(), method, group_size, bits, inputs,
                                           float_layer_inputs, gptq_options));
        if (method.sequential)
            *partly_quantized.linear_layers()[l] = LinearLayer(as_quantized_layer(quantized.back(), lowbit::Activations::f32));
    }
    return quantized;
}

/// distill_end_to_end on quantized layers of one format (2, 3 or 4 bits, float scales: the MLX affine
/// formats), returning them with the distilled scales and biases. Throws std::invalid_argument for
/// layers of different formats or bits above 4.
inline std::vector<lowbit::AnyQuantizedLinear> distill_layers_end_to_end(
    const BertModel& float_model, const std::vector<lowbit::AnyQuantizedLinear>& quantized,
    const std::vector<std::vector<std::int32_t>>& calibration, const EndToEndSettings& settings) {
    const int group_size = quantized.front().group_size(), bits = quantized.front().bits();
    return lowbit::dispatch_quantization(
        group_size, bits, [&]<class Layer>(std::type_identity<Layer>) -> std::vector<lowbit::AnyQuantizedLinear> {
            if constexpr (Layer::bits > 4) {
                throw std::invalid_argument("-e2e runs at 2, 3 or 4 bits, got bits = " + std::to_string(bits));
            } else {
                std::vector<lowbit::DwqLinearOf<typename Layer::format>> layers;
                for (const auto& layer : quantized) {
                    const auto* typed = std::get_if<Layer>(&layer.variant());
                    if (typed == nullptr) throw std::invalid_argument("-e2e needs every layer in one format");
                    layers.emplace_back(*typed);
                }
                distill_end_to_end(float_model, layers, calibration, settings);
                std::vector<lowbit::AnyQuantizedLinear> result;
                for (const auto& layer : layers) result.emplace_back(layer.deploy());
                return result;
            }
        });
}

}  // namespace minilm
