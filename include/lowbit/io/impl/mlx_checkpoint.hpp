// Loading and saving MLX checkpoint layers whose format is known at run time, and the tensor readers
// behind load_mlx_linear_as (mlx_checkpoint.hpp; included by it unless LOWBIT_EXTERN_IO, compiled once
// by lowbit::io_compiled otherwise: detail/compiled.hpp).
#pragma once

#include "../mlx_checkpoint.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

namespace io_detail {

LOWBIT_IO_FUNC format_error layer_error(const SafetensorsFile& file, std::string_view function, std::string_view tensor,
                                        const std::string& fault) {
    return format_error("lowbit::" + std::string(function) + ": " + file.path() + ": tensor " + quoted(tensor) + ": " +
                        fault);
}

LOWBIT_IO_FUNC RowMatrixXf float_tensor(const SafetensorsFile& file, std::string_view function, const std::string& name,
                                        std::uint64_t rows, std::uint64_t cols) {
    if (!file.contains(name)) throw layer_error(file, function, name, "missing");
    const SafetensorsTensor t = file.tensor(name);
    if (!is_float_dtype(t.dtype))
        throw layer_error(file, function, name, "is " + std::string(dtype_name(t.dtype)) + ", not F32, F16 or BF16");
    if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
        throw layer_error(file, function, name,
                          "has shape " + shape_text(t.shape) + ", expected [" + std::to_string(rows) + ", " +
                              std::to_string(cols) + "]");
    RowMatrixXf matrix(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    convert_to_float(t.dtype, t.bytes.data(), static_cast<std::size_t>(matrix.size()), matrix.data());
    return matrix;
}

LOWBIT_IO_FUNC std::optional<Eigen::VectorXf> bias_tensor(const SafetensorsFile& file, std::string_view function,
                                                          const std::string& name, std::uint64_t out) {
    if (!file.contains(name)) return std::nullopt;
    const SafetensorsTensor t = file.tensor(name);
    if (!is_float_dtype(t.dtype) || t.shape.size() != 1 || t.shape[0] != out)
        throw layer_error(file, function, name,
                          "is " + std::string(dtype_name(t.dtype)) + " " + shape_text(t.shape) +
                              ", expected F32, F16 or BF16 [" + std::to_string(out) + "]");
    Eigen::VectorXf bias(static_cast<Eigen::Index>(out));
    convert_to_float(t.dtype, t.bytes.data(), static_cast<std::size_t>(out), bias.data());
    return bias;
}

}  // namespace io_detail

LOWBIT_IO_FUNC AnyQuantizedLinear load_mlx_linear(const SafetensorsFile& file, std::string_view prefix, int group_size,
                                                  int bits, std::string_view mode) {
    return dispatch_format(mode, group_size, bits, [&]<class Format>(std::type_identity<Format>) {
        return AnyQuantizedLinear(load_mlx_linear_as<Format>(file, prefix));
    });
}

LOWBIT_IO_FUNC AnyQuantizedLinear load_mlx_linear(const SafetensorsFile& file, std::string_view prefix,
                                                  const MlxQuantization& config) {
    const auto format = config.for_layer(prefix);
    if (!format)
        throw format_error("lowbit::load_mlx_linear: " + file.path() + ": layer " + io_detail::quoted(prefix) +
                           " is not quantized in the config; load it with load_linear");
    return load_mlx_linear(file, prefix, format->group_size, format->bits, format->mode);
}

LOWBIT_IO_FUNC Linear load_linear(const SafetensorsFile& file, std::string_view prefix) {
    constexpr std::string_view function = "load_linear";
    const std::string base(prefix);
    const std::string weight_name = base + ".weight";
    if (!file.contains(weight_name)) throw io_detail::layer_error(file, function, weight_name, "missing");
    const SafetensorsTensor weight = file.tensor(weight_name);
    if (!is_float_dtype(weight.dtype) || weight.shape.size() != 2)
        throw io_detail::layer_error(file, function, weight_name,
                                     "is " + std::string(dtype_name(weight.dtype)) + " " +
                                         io_detail::shape_text(weight.shape) +
                                         ", a float weight is F32, F16 or BF16 [out, in]");
    Linear linear;
    linear.weight = io_detail::float_tensor(file, function, weight_name, weight.shape[0], weight.shape[1]);
    linear.bias = io_detail::bias_tensor(file, function, base + ".bias", weight.shape[0]);
    return linear;
}

LOWBIT_IO_FUNC void save_mlx_linear(SafetensorsWriter& writer, std::string_view prefix, const AnyQuantizedLinear& layer,
                                    Dtype dtype) {
    std::visit([&](const auto& typed) { save_mlx_linear(writer, prefix, typed, dtype); }, layer.variant());
}

LOWBIT_IO_FUNC void save_linear(SafetensorsWriter& writer, std::string_view prefix, const Linear& layer, Dtype dtype) {
    const std::string base(prefix);
    writer.add(base + ".weight", layer.weight, dtype);
    if (layer.bias) writer.add(base + ".bias", *layer.bias, dtype);
}

LOWBIT_END_NAMESPACE
