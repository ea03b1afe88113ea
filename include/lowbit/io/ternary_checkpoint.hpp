// A deployed BitNet layer (TernaryLinear) in safetensors. Layer `P` is:
//   P.ternary_i2 or P.ternary_tq1  U8  [out, row_bytes]  the packed codes, exactly one of the two:
//        i2:  row_bytes = 64 * ceil(in / 256); weight c*256 + 64*s + j (s in 0..3, j in 0..63) is bits
//             2s..2s+1 of byte c*64 + j, as t + 1 (0, 1, 2 for -1, 0, 1; the value 3 is refused)
//        tq1: row_bytes = 64 * ceil(in / 320); weight c*320 + 64*s + j (s in 0..4) is digit s of byte
//             c*64 + j, a base-3 number sum_s (t_s + 1) * 3^(4-s) (digit 0 most significant; bytes
//             243..255 are refused)
//        the weights past `in` that fill the last chunk are 0 (any digit 0..2 is accepted there)
//   P.in_features  I64 [1]         in
//   P.scales       F32 [1, 1]      the absmean gamma per tensor, or [out, in / 64] per group of 64
//   P.bias         F32 [out]       optional
// (A per-group layer of one row and 64 inputs has scales [1, 1] and loads as per tensor: the same
// arithmetic.) Loading validates every tensor and byte: errors name the file, the tensor and the fault.
#pragma once

#include "../detail/config.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../ternary_linear.hpp"
#include "mlx_checkpoint.hpp"
#include "safetensors.hpp"
#include "safetensors_writer.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Adds `layer` as `prefix` (tensors above) to `writer`. Throws std::invalid_argument for a name
/// already added or an empty layer.
inline void save_ternary_linear(SafetensorsWriter& writer, std::string_view prefix, const TernaryLinear& layer) {
    if (layer.out_features() == 0)
        throw std::invalid_argument("lowbit::save_ternary_linear: layer " + io_detail::quoted(prefix) + " is empty");
    const std::string base(prefix);
    const std::vector<std::uint8_t> bytes = layer.file_bytes();
    writer.add(base + ".ternary_" + ternary_format_name(layer.format()), bytes,
               {static_cast<std::uint64_t>(layer.out_features()), static_cast<std::uint64_t>(layer.row_bytes())});
    const std::vector<std::int64_t> in{static_cast<std::int64_t>(layer.in_features())};
    writer.add(base + ".in_features", in, {1});
    writer.add(base + ".scales", layer.scales());
    if (layer.bias()) writer.add(base + ".bias", *layer.bias());
}

/// Loads layer `prefix` (tensors above). Throws std::invalid_argument naming the file and tensor for a
/// missing tensor (or both formats present), a wrong dtype or shape, a byte holding the unused value,
/// or scales and bias the TernaryLinear constructor refuses.
inline TernaryLinear load_ternary_linear(const SafetensorsFile& file, std::string_view prefix) {
    constexpr std::string_view function = "load_ternary_linear";
    const std::string base(prefix);
    const std::string i2_name = base + ".ternary_i2", tq1_name = base + ".ternary_tq1";
    const bool has_i2 = file.contains(i2_name), has_tq1 = file.contains(tq1_name);
    if (has_i2 == has_tq1)
        throw io_detail::layer_error(file, function, i2_name,
                                     has_i2
                                         ? "present together with " + io_detail::quoted(tq1_name) + " (one format only)"
                                         : "missing (and no " + io_detail::quoted(tq1_name) + ")");
    const TernaryFormat format = has_i2 ? TernaryFormat::i2 : TernaryFormat::tq1;
    const std::string codes_name = has_i2 ? i2_name : tq1_name;

    const std::string in_name = base + ".in_features";
    if (!file.contains(in_name)) throw io_detail::layer_error(file, function, in_name, "missing");
    const SafetensorsTensor in_tensor = file.tensor(in_name);
    if (in_tensor.dtype != Dtype::i64 || in_tensor.shape.size() != 1 || in_tensor.shape[0] != 1)
        throw io_detail::layer_error(file, function, in_name,
                                     "is " + std::string(dtype_name(in_tensor.dtype)) + " " +
                                         io_detail::shape_text(in_tensor.shape) + ", expected I64 [1]");
    const std::int64_t in = in_tensor.to_vector<std::int64_t>()[0];
    if (in < 1 || in > detail::ternary::max_cols)
        throw io_detail::layer_error(
            file, function, in_name,
            "holds " + std::to_string(in) + ", expected 1.." + std::to_string(detail::ternary::max_cols));

    const SafetensorsTensor codes = file.tensor(codes_name);
    const auto row_bytes = static_cast<std::uint64_t>(detail::ternary::row_bytes(format, in));
    if (codes.dtype != Dtype::u8 || codes.shape.size() != 2 || codes.shape[0] < 1 || codes.shape[1] != row_bytes)
        throw io_detail::layer_error(file, function, codes_name,
                                     "is " + std::string(dtype_name(codes.dtype)) + " " +
                                         io_detail::shape_text(codes.shape) + ", expected U8 [out, " +
                                         std::to_string(row_bytes) + "] for in_features " + std::to_string(in));
    const std::uint64_t out = codes.shape[0];

    const std::string scales_name = base + ".scales";
    if (!file.contains(scales_name)) throw io_detail::layer_error(file, function, scales_name, "missing");
    const SafetensorsTensor scales_tensor = file.tensor(scales_name);
    const bool per_tensor =
        scales_tensor.shape.size() == 2 && scales_tensor.shape[0] == 1 && scales_tensor.shape[1] == 1;
    const RowMatrixXf scales =
        per_tensor ? io_detail::float_tensor(file, function, scales_name, 1, 1)
                   : io_detail::float_tensor(file, function, scales_name, out, static_cast<std::uint64_t>(in / 64));
    if (!per_tensor && in % 64 != 0)
        throw io_detail::layer_error(file, function, scales_name,
                                     "is per group but in_features " + std::to_string(in) + " is not a multiple of 64");
    std::optional<Eigen::VectorXf> bias = io_detail::bias_tensor(file, function, base + ".bias", out);
    const std::vector<std::uint8_t> bytes = codes.to_vector<std::uint8_t>();
    try {
        return TernaryLinear::from_packed(format, static_cast<Eigen::Index>(out), static_cast<Eigen::Index>(in),
                                          per_tensor, bytes, scales, std::move(bias));
    } catch (const std::invalid_argument& error) {
        throw io_detail::layer_error(file, function, codes_name, error.what());
    }
}

LOWBIT_END_NAMESPACE
