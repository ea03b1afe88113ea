// allocate_bits: a (bits, group size) per layer for a target average bits per weight, chosen to minimise
// the summed output error of the layers on their calibration inputs (options in ptq/options.hpp).
//
//   per layer l, per candidate f = (bits, group):  cost_f = bits + 2 * scale_bits / group   (bits per weight)
//                                                   err_lf = ||X_l W_l^T - X_l W_hat^T||^2 / samples_l
//   minimise sum_l err_l,f(l)  subject to  sum_l n_l cost_f(l) <= target * sum_l n_l   (n_l: weights of l)
//
// Solved greedily on each layer's lower convex hull of (cost, error): start every layer at its cheapest
// candidate, then repeatedly take the upgrade with the largest error decrease per extra bit that still
// fits (the Lagrangian choice at the budget), then fill what is left with the single changes (any
// candidate) that lower the error most. Each result is an ordinary
// AnyQuantizedLinear (the types it takes and returns: ptq/allocation.hpp); `choices` holds what MLX's config.json needs as per-layer "quantization" overrides
// ({"group_size": g, "bits": b} under the layer's name; io/mlx_config.hpp reads them).
#pragma once

#include "../detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "../any_quantized_linear.hpp"
#include "../formats/mlx_affine.hpp"
#include "../quantized_linear.hpp"
#include "allocation.hpp"
#include "options.hpp"
#include "quantize.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail::ptq {

/// The output error of `quantized` against the float weight on the calibration inputs:
/// ||X (W - W_hat)^T||^2 / samples, in the inputs' own units. (A template, always on RowMatrixXf, so
/// that its products are compiled only where allocate_bits runs.)
template <class Matrix>
double output_error(const Matrix& weight, const Matrix& quantized, const ScaledCalibration& calibration) {
    return row_output_errors(calibration.x, weight, quantized).sum() * calibration.error_unit;
}

}  // namespace detail::ptq

/// Chooses each layer's (bits, group size) among options.bits x options.group_sizes (those whose group
/// size divides the layer's in) and quantizes it with options.method (as ptq::quantize). Throws std::invalid_argument
/// for no layers, a layer whose calibration inputs are bad (wrong width, no rows, NaN/Inf) or whose weight quantize
/// refuses, an unsupported candidate, scale_bits other than 16 or 32, or a target outside [cheapest, most expensive]
/// average bits per weight of the candidates (naming the target and the range).
///
/// A template only so that its body, which quantizes with every method in all 18 formats, is compiled in
/// the translation units that call it, not in every one that includes ptq.hpp; Layers is always
/// std::vector<CalibratedLayer> (a braced list converts to it).
template <class Layers = std::vector<CalibratedLayer>>
    requires std::same_as<Layers, std::vector<CalibratedLayer>>
BitAllocation allocate_bits(const Layers& layers, const BitAllocationOptions& options) {
    constexpr const char* function = "lowbit::allocate_bits";
    if (layers.empty()) throw std::invalid_argument(std::string(function) + ": no layers");
    if (options.scale_bits != 16 && options.scale_bits != 32)
        throw std::invalid_argument(std::string(function) + ": scale_bits = " + std::to_string(options.scale_bits) +
                                    " (16 for f16/bf16 scales and biases, 32 for f32)");
    for (int bits : options.bits)
        for (int group : options.group_sizes)
            if (!is_supported_quantization_at_runtime(group, bits))
                throw std::invalid_argument(std::string(function) + ": candidate bits = " + std::to_string(bits) +
                                            ", group_size = " + std::to_string(group) + " is not supported");
    detail::ptq::check_ptq_options(function, options);
    struct Candidate {
        int bits, group;
        double cost, error;
    };
    std::vector<std::vector<Candidate>> hulls(layers.size()), all(layers.size());
    std::vector<double> sizes(layers.size());
    double total_weights = 0, cheapest = 0, dearest = 0;
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const CalibratedLayer& layer = layers[l];
        detail::ptq::require_calibration(function, layer.inputs, layer.linear.weight.cols(), 1);
        const detail::ptq::ScaledCalibration scaled = detail::ptq::scaled_calibration(layer.inputs);
        const detail::ptq::PreparedCalibration calibration(function, layer.inputs, layer.linear.weight.cols(),
                                                           options.method);
        std::vector<Candidate> candidates;
        for (int bits : options.bits)
            for (int group : options.group_sizes) {
                if (layer.linear.weight.cols() % group != 0) continue;
                const double error = dispatch_quantization(group, bits, [&]<class Layer>(std::type_identity<Layer>) {
                    const auto q = detail::ptq::quantize_prepared<Layer::group_size, Layer::bits>(
                        function, layer.linear.weight, calibration, options);
                    return detail::ptq::output_error(layer.linear.weight, dequantize(q), scaled);
                });
                candidates.push_back({bits, group, bits + 2.0 * options.scale_bits / group, error});
            }
        if (candidates.empty())
            throw std::invalid_argument(std::string(function) + ": layer \"" + layer.name + "\" (in = " +
                                        std::to_string(layer.linear.weight.cols()) +
                                        ") is a multiple of no candidate group size");
        // Lower convex hull of (cost, error), cost increasing, error strictly decreasing.
        std::sort(candidates.begin(), candidates.end(),
                  [](const Candidate& a, const Candidate& b) { return a.cost != b.cost ? a.cost < b.cost : a.error < b.error; });
        all[l] = candidates;
        std::vector<Candidate>& hull = hulls[l];
        for (const Candidate& c : candidates) {
            if (!hull.empty() && c.error >= hull.back().error) continue;
            while (hull.size() >= 2) {
                const Candidate &a = hull[hull.size() - 2], &b = hull.back();
                // b lies on or above the segment a-c: drop it
                if ((b.error - a.error) * (c.cost - a.cost) >= (c.error - a.error) * (b.cost - a.cost)) hull.pop_back();
                else break;
            }
            hull.push_back(c);
        }
        sizes[l] = static_cast<double>(layer.linear.weight.size());
        total_weights += sizes[l];
        cheapest += sizes[l] * hull.front().cost;
        dearest += sizes[l] * candidates.back().cost;  // sorted by cost
    }
    const double low = cheapest / total_weights, high = dearest / total_weights;
    if (!(options.target_bits_per_weight >= low - 1e-9 && options.target_bits_per_weight <= high + 1e-9))
        throw std::invalid_argument(std::string(function) + ": target_bits_per_weight = " +
                                    std::to_string(options.target_bits_per_weight) + " is outside [" +
                                    std::to_string(low) + ", " + std::to_string(high) +
                                    "], the averages these candidates reach");
    const double budget = options.target_bits_per_weight * total_weights;
    std::vector<std::size_t> at(layers.size(), 0);
    double used = cheapest;
    for (;;) {
        std::optional<std::size_t> best;
        double best_slope = 0;
        for (std::size_t l = 0; l < layers.size(); ++l) {
            if (at[l] + 1 >= hulls[l].size()) continue;
            const Candidate &now = hulls[l][at[l]], &next = hulls[l][at[l] + 1];
            const double extra = sizes[l] * (next.cost - now.cost);
            if (used + extra > budget + 1e-6) continue;
            const double slope = (now.error - next.error) / extra;
            if (!best || slope > best_slope) {
                best = l;
                best_slope = slope;
            }
        }
        if (!best) break;
        used += sizes[*best] * (hulls[*best][at[*best] + 1].cost - hulls[*best][at[*best]].cost);
        ++at[*best];
    }
    // Fill: the hull skips candidates inside it; spend what is left on the single change (any candidate
    // of any layer) that lowers the error most and still fits, while one exists.
    std::vector<Candidate> chosen(layers.size());
    for (std::size_t l = 0; l < layers.size(); ++l) chosen[l] = hulls[l][at[l]];
    for (;;) {
        std::optional<std::pair<std::size_t, Candidate>> best;
        double best_gain = 0;
        for (std::size_t l = 0; l < layers.size(); ++l)
            for (const Candidate& c : all[l]) {
                const double extra = sizes[l] * (c.cost - chosen[l].cost), gain = chosen[l].error - c.error;
                if (used + extra <= budget + 1e-6 && gain > best_gain) {
                    best = std::pair{l, c};
                    best_gain = gain;
                }
            }
        if (!best) break;
        used += sizes[best->first] * (best->second.cost - chosen[best->first].cost);
        chosen[best->first] = best->second;
    }
    BitAllocation result;
    result.bits_per_weight = used / total_weights;
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const Candidate& c = chosen[l];
        const CalibratedLayer& layer = layers[l];
        const detail::ptq::PreparedCalibration calibration(function, layer.inputs, layer.linear.weight.cols(),
                                                           options.method);
        result.layers.push_back(dispatch_quantization(c.group, c.bits, [&]<class Layer>(std::type_identity<Layer>) {
            return AnyQuantizedLinear(Layer(detail::ptq::quantize_prepared<Layer::group_size, Layer::bits>(
                                                function, layer.linear.weight, calibration, options),
                                            layer.linear.bias));
        }));
        result.choices.push_back({layer.name, c.bits, c.group, c.cost, c.error});
        result.output_error += c.error;
    }
    return result;
}

LOWBIT_END_NAMESPACE
