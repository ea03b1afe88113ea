// MLX quantized checkpoints (mlx-lm, mlx.nn.quantize): the safetensors tensors of one linear layer,
// loaded as AnyQuantizedLinear / Linear and saved back (docs/numerics.md N12.2), in the format that
// config.json's "quantization" section gives it (mlx_config.hpp).
//
//   config.json                                       model.safetensors, layer prefix P
//   {"quantization": {                                P.weight  U32 [out, in*bits/32]  packed codes (N9)
//       "group_size": 64, "bits": 4,       (global)   P.scales  F32|F16|BF16 [out, in/group_size]
//       "mode": "affine",                                       (mxfp4: U8 E8M0 exponents, N16)
//       "model.layers.0.mlp.down_proj":               P.biases  same dtype and shape (per-group offsets;
//           {"group_size": 32, "bits": 8}, (override)           affine only)
//       "lm_head": false},                 (float)    P.bias    optional [out] (the layer's additive bias)
//    ...}                                             a float layer (false): P.weight F32|F16|BF16 [out, in]
//
// Loading widens f16/bf16 exactly to f32; saving narrows with round-to-nearest-even, so a layer loaded
// from a file and saved with the dtype it had writes every weight, scale, bias and bias-vector byte back
// unchanged (U8 scales are copied as they are). Loading makes one pass over the layer's bytes.
#pragma once

#include "../any_quantized_linear.hpp"
#include "../detail/config.hpp"
#include "../errors.hpp"
#include "../quantized_linear.hpp"
#include "detail/bytes.hpp"
#include "detail/compiled.hpp"
#include "dtype.hpp"
#include "mlx_config.hpp"
#include "safetensors.hpp"
#include "safetensors_writer.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

namespace io_detail {

format_error layer_error(const SafetensorsFile& file, std::string_view function, std::string_view tensor,
                         const std::string& fault);

/// Tensor `name` as a float matrix [rows, cols] (F32/F16/BF16, exactly that shape).
RowMatrixXf float_tensor(const SafetensorsFile& file, std::string_view function, const std::string& name,
                         std::uint64_t rows, std::uint64_t cols);

/// Tensor `name` as the U8 scales [rows, cols] of Format (scale_type std::uint8_t), every byte one
/// that Format::is_valid_scale accepts.
template <class Format>
Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> byte_scales(const SafetensorsFile& file,
                                                                                         std::string_view function,
                                                                                         const std::string& name,
                                                                                         std::uint64_t rows,
                                                                                         std::uint64_t cols) {
    if (!file.contains(name)) throw layer_error(file, function, name, "missing");
    const SafetensorsTensor t = file.tensor(name);
    if (t.dtype != Dtype::u8)
        throw layer_error(
            file, function, name,
            "is " + std::string(dtype_name(t.dtype)) + "; the scales of mode " + Format::mode + " are U8");
    if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
        throw layer_error(file, function, name,
                          "has shape " + shape_text(t.shape) + ", expected [" + std::to_string(rows) + ", " +
                              std::to_string(cols) + "]");
    Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> scales(
        static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    std::memcpy(scales.data(), t.bytes.data(), t.bytes.size());
    for (Eigen::Index r = 0; r < scales.rows(); ++r)
        for (Eigen::Index g = 0; g < scales.cols(); ++g)
            if (!Format::is_valid_scale(scales(r, g)))
                throw layer_error(file, function, name,
                                  "scale (row " + std::to_string(r) + ", group " + std::to_string(g) + ") is " +
                                      std::to_string(scales(r, g)) + ", not a finite " + Format::mode + " scale");
    return scales;
}

/// The optional bias P.bias [out] (F32/F16/BF16).
std::optional<Eigen::VectorXf> bias_tensor(const SafetensorsFile& file, std::string_view function,
                                           const std::string& name, std::uint64_t out);

}  // namespace io_detail

/// Loads the quantized linear layer `prefix` in Format (tensors prefix.weight, .scales, .biases when
/// the format has biases, optional .bias; layout at the top of this file). Throws std::invalid_argument
/// naming the file and tensor for a missing tensor, a wrong dtype or shape, or a scale or code the
/// format refuses (mxfp4's scale byte 255, mxfp8's NaN codes 0x7F and 0xFF).
template <class Format>
QuantizedLinearOf<Format> load_mlx_linear_as(const SafetensorsFile& file, std::string_view prefix) {
    static_assert(
        std::is_same_v<typename Format::scale_type, float> || std::is_same_v<typename Format::scale_type, std::uint8_t>,
        "lowbit::load_mlx_linear_as: scales of this type are not read yet (add the dtype here)");
    constexpr std::string_view function = "load_mlx_linear";
    constexpr int group_size = Format::group_size, bits = Format::bits;
    const std::string base(prefix);
    const std::string weight_name = base + ".weight";
    if (!file.contains(weight_name)) throw io_detail::layer_error(file, function, weight_name, "missing");
    const SafetensorsTensor weight = file.tensor(weight_name);
    if (weight.dtype != Dtype::u32 || weight.shape.size() != 2)
        throw io_detail::layer_error(file, function, weight_name,
                                     "is " + std::string(dtype_name(weight.dtype)) + " " +
                                         io_detail::shape_text(weight.shape) + ", a quantized weight is U32 [out, in*bits/32]");
    const std::uint64_t out = weight.shape[0], words = weight.shape[1];
    const std::uint64_t in = words * 32 / static_cast<std::uint64_t>(bits);
    if (out == 0 || words == 0 || (words * 32) % static_cast<std::uint64_t>(bits) != 0 ||
        in % static_cast<std::uint64_t>(group_size) != 0)
        throw io_detail::layer_error(file, function, weight_name,
                                     "shape " + io_detail::shape_text(weight.shape) + " is not a non-empty " +
                                         std::to_string(bits) + "-bit weight with group size " +
                                         std::to_string(group_size));
    const std::uint64_t groups = in / static_cast<std::uint64_t>(group_size);
    QuantizedMatrixOf<Format> matrix;
    matrix.codes.resize(static_cast<Eigen::Index>(out), static_cast<Eigen::Index>(words));
    std::memcpy(matrix.codes.data(), weight.bytes.data(), weight.bytes.size());
    if constexpr (requires { Format::is_valid_code(0u); }) {
        static_assert(Format::codes_in_whole_words, "load_mlx_linear_as: codes are checked word by word");
        constexpr int per_word = 32 / bits;
        constexpr std::uint32_t mask = bits == 32 ? ~0u : (1u << bits) - 1u;
        for (Eigen::Index r = 0; r < matrix.codes.rows(); ++r)
            for (Eigen::Index w = 0; w < matrix.codes.cols(); ++w)
                for (int i = 0; i < per_word; ++i) {
                    const std::uint32_t code = (matrix.codes(r, w) >> (bits * i)) & mask;
                    if (!Format::is_valid_code(code))
                        throw io_detail::layer_error(
                            file, function, weight_name,
                            "code (row " + std::to_string(r) + ", column " + std::to_string(w * per_word + i) +
                                ") is " + std::to_string(code) + ", not a finite " + Format::mode + " code");
                }
    }
    if constexpr (std::is_same_v<typename Format::scale_type, float>)
        matrix.scales = io_detail::float_tensor(file, function, base + ".scales", out, groups);
    else
        matrix.scales = io_detail::byte_scales<Format>(file, function, base + ".scales", out, groups);
    if constexpr (Format::has_biases)
        matrix.biases = io_detail::float_tensor(file, function, base + ".biases", out, groups);
    return QuantizedLinearOf<Format>(std::move(matrix), io_detail::bias_tensor(file, function, base + ".bias", out));
}

/// Loads the quantized linear layer `prefix` in the format of this mode, group size and bits (known at
/// run time; MLX affine by default). Throws std::invalid_argument naming the file and tensor for a
/// missing tensor, a wrong dtype (so codes of another mode: their scales' dtype differs), shapes that do
/// not fit the format, a scale the format refuses, or an unsupported format.
AnyQuantizedLinear load_mlx_linear(const SafetensorsFile& file, std::string_view prefix, int group_size, int bits,
                                   std::string_view mode = "affine");

/// Loads layer `prefix` with the format `config` gives it. Throws std::invalid_argument when config
/// says the layer is not quantized (load it with load_linear) or as load_mlx_linear above.
AnyQuantizedLinear load_mlx_linear(const SafetensorsFile& file, std::string_view prefix, const MlxQuantization& config);

/// Loads the float linear layer `prefix` (prefix.weight F32/F16/BF16 [out, in], optional prefix.bias
/// [out]). Throws std::invalid_argument naming the file and tensor when one is missing or malformed.
Linear load_linear(const SafetensorsFile& file, std::string_view prefix);

/// Adds layer `prefix` to `writer` in MLX's layout: prefix.weight (U32 codes), prefix.scales and (when
/// the format has them) prefix.biases in `dtype` (F32, F16 or BF16, rounded to nearest even; U8 scales
/// of mxfp4 as they are), prefix.bias in `dtype` when the layer has one. Throws std::invalid_argument for
/// another dtype or a name already added.
template <class Format>
void save_mlx_linear(SafetensorsWriter& writer, std::string_view prefix, const QuantizedLinearOf<Format>& layer,
                     Dtype dtype = Dtype::f32) {
    constexpr bool float_scales = std::is_same_v<typename Format::scale_type, float>;
    static_assert(float_scales || std::is_same_v<typename Format::scale_type, std::uint8_t>,
                  "lowbit::save_mlx_linear: scales of this type are not written yet (add the dtype here)");
    if (!is_float_dtype(dtype))
        throw std::invalid_argument("lowbit::save_mlx_linear: layer " + io_detail::quoted(prefix) + ": scales are " +
                                    "written as F32, F16 or BF16, not " + std::string(dtype_name(dtype)));
    const std::string base(prefix);
    writer.add(base + ".weight", layer.weight().codes);
    if constexpr (float_scales)
        writer.add(base + ".scales", layer.weight().scales, dtype);
    else
        writer.add(base + ".scales", layer.weight().scales);
    if constexpr (Format::has_biases) writer.add(base + ".biases", layer.weight().biases, dtype);
    if (layer.bias()) writer.add(base + ".bias", *layer.bias(), dtype);
}

/// save_mlx_linear for a layer whose format is known at run time.
void save_mlx_linear(SafetensorsWriter& writer, std::string_view prefix, const AnyQuantizedLinear& layer,
                     Dtype dtype = Dtype::f32);

/// Adds a float layer: prefix.weight [out, in] and prefix.bias [out] (if any) in `dtype`.
void save_linear(SafetensorsWriter& writer, std::string_view prefix, const Linear& layer, Dtype dtype = Dtype::f32);

LOWBIT_END_NAMESPACE

#if !defined(LOWBIT_EXTERN_IO)
#include "impl/mlx_checkpoint.hpp"
#endif
