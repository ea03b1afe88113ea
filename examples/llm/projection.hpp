// One linear layer of a GGUF model (no bias), run by lowbit in the format its tensor is stored in:
//
//   q4_0, q4_1, q4_K -> QuantizedLinear<32, 4>   (MLX affine groups of 32; GgufFile::to_quantized, exact)
//   q5_0, q5_1, q5_K -> QuantizedLinear<32, 5>
//   q8_0             -> QuantizedLinear<32, 8>
//   f32, f16, bf16, q2_K, q3_K, q6_K -> lowbit::Linear on the exact float values (GgufFile::to_matrix)
//
// Several tensors with the same input length and type can be stacked by rows into one layer (Q, K and V;
// gate and up), so that one matmul reads the input once and runs at a larger, faster shape; the
// outputs come back side by side in the order given.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>
#include <lowbit/io/gguf.hpp>
#include <lowbit/quantized_linear.hpp>

namespace llm {

using RowMatrix = lowbit::RowMatrixXf;

/// A GGUF model whose metadata or tensors do not match what the runner expects.
struct ModelError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

class Projection {
public:
    /// The tensors `names` (each [out_i, in], the same `in` and type) stacked into one layer
    /// [sum out_i, in]. Throws ModelError naming the file and tensor for a missing tensor, a mismatch
    /// between them, or an input length other than `in`.
    static Projection from_gguf(const lowbit::GgufFile& file, const std::string& label,
                                const std::vector<std::string>& names, Eigen::Index in) {
        const auto fail = [&](const std::string& name, const std::string& fault) {
            return ModelError(label + ": tensor '" + name + "' " + fault);
        };
        for (const auto& name : names) {
            if (!file.contains(name)) throw fail(name, "is missing");
            const auto& info = file.tensor_info(name);
            if (info.dims.size() != 2 || static_cast<Eigen::Index>(info.row_length()) != in)
                throw fail(name, "has shape " + shape_text(info.dims) + "; expected [" + std::to_string(in) + ", out]");
            if (info.type != file.tensor_type(names.front()))
                throw fail(name, "is " + std::string(lowbit::ggml_type_name(info.type)) + " but '" + names.front() +
                                     "' is " + std::string(lowbit::ggml_type_name(file.tensor_type(names.front()))) +
                                     " (a stacked layer needs one type)");
        }
        Projection projection;
        projection.type_ = file.tensor_type(names.front());
        for (const auto& name : names)
            projection.outs_.push_back(static_cast<Eigen::Index>(file.tensor_info(name).row_count()));
        switch (projection.type_) {
            case lowbit::GgmlType::q4_0:
            case lowbit::GgmlType::q4_1:
            case lowbit::GgmlType::q4_k:
                projection.layer_ = stacked_quantized<4>(file, names);
                break;
            case lowbit::GgmlType::q5_0:
            case lowbit::GgmlType::q5_1:
            case lowbit::GgmlType::q5_k:
                projection.layer_ = stacked_quantized<5>(file, names);
                break;
            case lowbit::GgmlType::q8_0:
                projection.layer_ = stacked_quantized<8>(file, names);
                break;
            default: {
                lowbit::Linear linear;
                std::vector<RowMatrix> weights;
                for (const auto& name : names) weights.push_back(file.to_matrix(name));
                linear.weight = stack_rows(std::move(weights));
                projection.layer_ = std::move(linear);
            }
        }
        return projection;
    }

    /// x [M, in] -> [M, out] (the stacked outputs side by side). Activations::int8 applies to the
    /// quantized formats; a float layer always runs in f32.
    RowMatrix forward(const RowMatrix& x, lowbit::Activations activations) const {
        return std::visit(
            [&](const auto& layer) -> RowMatrix {
                if constexpr (std::is_same_v<std::decay_t<decltype(layer)>, lowbit::Linear>)
                    return layer.forward(x);
                else
                    return layer.forward(x, activations);
            },
            layer_);
    }

    /// The output counts of the stacked tensors, in order.
    const std::vector<Eigen::Index>& outputs() const noexcept { return outs_; }
    lowbit::GgmlType stored_type() const noexcept { return type_; }
    /// How lowbit runs it: "affine g32 B-bit" or "float".
    std::string runs_as() const {
        if (std::holds_alternative<lowbit::QuantizedLinear<32, 4>>(layer_)) return "affine g32 4-bit";
        if (std::holds_alternative<lowbit::QuantizedLinear<32, 5>>(layer_)) return "affine g32 5-bit";
        if (std::holds_alternative<lowbit::QuantizedLinear<32, 8>>(layer_)) return "affine g32 8-bit";
        return "float";
    }

private:
    static std::string shape_text(const std::vector<std::uint64_t>& dims) {
        std::string text = "[";
        for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
        return text + "]";
    }

    /// `parts` stacked by rows (moved through when there is one).
    template <class Matrix>
    static Matrix stack_rows(std::vector<Matrix> parts) {
        if (parts.size() == 1) return std::move(parts.front());
        Eigen::Index rows = 0;
        for (const auto& part : parts) rows += part.rows();
        Matrix stacked(rows, parts.front().cols());
        Eigen::Index row = 0;
        for (const auto& part : parts) {
            stacked.middleRows(row, part.rows()) = part;
            row += part.rows();
        }
        return stacked;
    }

    template <int Bits>
    static lowbit::QuantizedLinear<32, Bits> stacked_quantized(const lowbit::GgufFile& file,
                                                               const std::vector<std::string>& names) {
        using Quantized = lowbit::QuantizedMatrix<32, Bits>;
        std::vector<typename Quantized::CodeMatrix> codes;
        std::vector<typename Quantized::ScaleMatrix> scales;
        std::vector<typename Quantized::BiasMatrix> biases;
        for (const auto& name : names) {
            auto part = file.to_quantized<32, Bits>(name);
            codes.push_back(std::move(part.codes));
            scales.push_back(std::move(part.scales));
            biases.push_back(std::move(part.biases));
        }
        Quantized stacked;
        stacked.codes = stack_rows(std::move(codes));
        stacked.scales = stack_rows(std::move(scales));
        stacked.biases = stack_rows(std::move(biases));
        return lowbit::QuantizedLinear<32, Bits>(std::move(stacked));
    }

    std::variant<lowbit::Linear, lowbit::QuantizedLinear<32, 4>, lowbit::QuantizedLinear<32, 5>,
                 lowbit::QuantizedLinear<32, 8>>
        layer_;
    std::vector<Eigen::Index> outs_;
    lowbit::GgmlType type_ = lowbit::GgmlType::f32;
};

}  // namespace llm
