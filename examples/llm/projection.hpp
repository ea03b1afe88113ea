// One linear layer of a GGUF model (no bias), run by lowbit in the format its tensor is stored in
// (GgufFile::to_quantized, exact: docs/numerics.md N12.3):
//
//   q4_0, q4_1, q4_K -> QuantizedLinear<32, 4>   (affine groups of 32: a block or a k-quant sub-block)
//   q5_0, q5_1, q5_K -> QuantizedLinear<32, 5>
//   q8_0             -> QuantizedLinear<32, 8>
//   q2_K             -> QuantizedLinear<16, 2>   (affine groups of 16: a k-quant sub-block)
//   q3_K             -> QuantizedLinear<16, 4>   (3-bit codes widened to 4)
//   q6_K             -> QuantizedLinear<16, 6>
//   f32, f16, bf16   -> lowbit::Linear on the exact float values (GgufFile::to_matrix)
//
// Several tensors with the same input length can be stacked by rows into one layer (Q, K and V; gate and
// up), so that one matmul reads the input once and runs at a larger, faster shape; the outputs come back
// side by side in the order given. Neighbours of one format share a matmul; a mixed set (a Q4_K_M file's
// q5_0 Q and K with a q8_0 V, say) runs one matmul per run of equal formats.
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
    /// The tensors `names` (each [out_i, in], the same `in`) stacked into one layer [sum out_i, in].
    /// Throws ModelError naming the file and tensor for a missing tensor or an input length other than `in`.
    static Projection from_gguf(const lowbit::GgufFile& file, const std::string& label,
                                const std::vector<std::string>& names, Eigen::Index in) {
        Projection projection;
        for (const auto& name : names) {
            if (!file.contains(name)) throw ModelError(label + ": tensor '" + name + "' is missing");
            const auto& info = file.tensor_info(name);
            if (info.dims.size() != 2 || static_cast<Eigen::Index>(info.row_length()) != in)
                throw ModelError(label + ": tensor '" + name + "' has shape " + shape_text(info.dims) + "; expected [" +
                                 std::to_string(in) + ", out]");
            projection.outs_.push_back(static_cast<Eigen::Index>(info.row_count()));
        }
        for (std::size_t begin = 0; begin < names.size();) {
            std::size_t end = begin + 1;
            while (end < names.size() && same_layer(file.tensor_type(names[end]), file.tensor_type(names[begin])))
                ++end;
            projection.parts_.push_back(make_part(file, {names.begin() + static_cast<std::ptrdiff_t>(begin),
                                                         names.begin() + static_cast<std::ptrdiff_t>(end)}));
            begin = end;
        }
        return projection;
    }

    /// x [M, in] -> [M, out] (the stacked outputs side by side). Activations::int8 applies to the
    /// quantized formats; a float layer always runs in f32.
    RowMatrix forward(const RowMatrix& x, lowbit::Activations activations) const {
        if (parts_.size() == 1) return part_forward(parts_.front(), x, activations);
        Eigen::Index total = 0;
        for (const auto o : outs_) total += o;
        RowMatrix out(x.rows(), total);
        Eigen::Index column = 0;
        for (const auto& part : parts_) {
            const RowMatrix y = part_forward(part, x, activations);
            out.middleCols(column, y.cols()) = y;
            column += y.cols();
        }
        return out;
    }

    /// The output counts of the stacked tensors, in order.
    const std::vector<Eigen::Index>& outputs() const noexcept { return outs_; }
    /// How lowbit runs it: "affine gG B-bit" or "float", per matmul ("+" between them).
    std::string runs_as() const {
        std::string text;
        for (const auto& part : parts_) {
            text += text.empty() ? "" : " + ";
            std::visit(
                [&]<class Layer>(const Layer&) {
                    if constexpr (std::is_same_v<Layer, lowbit::Linear>)
                        text += "float";
                    else
                        text +=
                            "affine g" + std::to_string(Layer::group_size) + " " + std::to_string(Layer::bits) + "-bit";
                },
                part);
        }
        return text;
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

    template <int GroupSize, int Bits>
    static lowbit::QuantizedLinear<GroupSize, Bits> stacked_quantized(const lowbit::GgufFile& file,
                                                                      const std::vector<std::string>& names) {
        using Quantized = lowbit::QuantizedMatrix<GroupSize, Bits>;
        std::vector<typename Quantized::CodeMatrix> codes;
        std::vector<typename Quantized::ScaleMatrix> scales;
        std::vector<typename Quantized::BiasMatrix> biases;
        for (const auto& name : names) {
            auto part = file.to_quantized<GroupSize, Bits>(name);
            codes.push_back(std::move(part.codes));
            scales.push_back(std::move(part.scales));
            biases.push_back(std::move(part.biases));
        }
        Quantized stacked;
        stacked.codes = stack_rows(std::move(codes));
        stacked.scales = stack_rows(std::move(scales));
        stacked.biases = stack_rows(std::move(biases));
        return lowbit::QuantizedLinear<GroupSize, Bits>(std::move(stacked));
    }

    /// The affine format lowbit runs a GGUF type in, {group size, bits} (the table at the top), or {0, 0}
    /// for float.
    static std::pair<int, int> layer_format(lowbit::GgmlType type) {
        switch (type) {
            case lowbit::GgmlType::q4_0:
            case lowbit::GgmlType::q4_1:
            case lowbit::GgmlType::q4_k:
                return {32, 4};
            case lowbit::GgmlType::q5_0:
            case lowbit::GgmlType::q5_1:
            case lowbit::GgmlType::q5_k:
                return {32, 5};
            case lowbit::GgmlType::q8_0:
                return {32, 8};
            case lowbit::GgmlType::q2_k:
                return {16, 2};
            case lowbit::GgmlType::q3_k:
                return {16, 4};
            case lowbit::GgmlType::q6_k:
                return {16, 6};
            default:
                return {0, 0};
        }
    }
    static bool same_layer(lowbit::GgmlType a, lowbit::GgmlType b) { return layer_format(a) == layer_format(b); }

    using Part = std::variant<lowbit::Linear, lowbit::QuantizedLinear<32, 4>, lowbit::QuantizedLinear<32, 5>,
                              lowbit::QuantizedLinear<32, 8>, lowbit::QuantizedLinear<16, 2>,
                              lowbit::QuantizedLinear<16, 4>, lowbit::QuantizedLinear<16, 6>>;

    /// One matmul for `names` (types of one layer format).
    static Part make_part(const lowbit::GgufFile& file, const std::vector<std::string>& names) {
        const auto [group_size, bits] = layer_format(file.tensor_type(names.front()));
        if (group_size == 32 && bits == 4) return stacked_quantized<32, 4>(file, names);
        if (group_size == 32 && bits == 5) return stacked_quantized<32, 5>(file, names);
        if (group_size == 32 && bits == 8) return stacked_quantized<32, 8>(file, names);
        if (group_size == 16 && bits == 2) return stacked_quantized<16, 2>(file, names);
        if (group_size == 16 && bits == 4) return stacked_quantized<16, 4>(file, names);
        if (group_size == 16 && bits == 6) return stacked_quantized<16, 6>(file, names);
        lowbit::Linear linear;
        std::vector<RowMatrix> weights;
        for (const auto& name : names) weights.push_back(file.to_matrix(name));
        linear.weight = stack_rows(std::move(weights));
        return linear;
    }

    static RowMatrix part_forward(const Part& part, const RowMatrix& x, lowbit::Activations activations) {
        return std::visit(
            [&](const auto& layer) -> RowMatrix {
                if constexpr (std::is_same_v<std::decay_t<decltype(layer)>, lowbit::Linear>)
                    return layer.forward(x);
                else
                    return layer.forward(x, activations);
            },
            part);
    }

    std::vector<Part> parts_;
    std::vector<Eigen::Index> outs_;
};

}  // namespace llm
