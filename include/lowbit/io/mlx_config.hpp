// MLX's config.json "quantization" section (mlx-lm, mlx.nn.quantize; docs/numerics.md N12.2): a global
// format plus per-layer overrides, read from and written to config.json. The layers' tensors are read
// and written by mlx_checkpoint.hpp.
//
//   {"quantization": {
//       "group_size": 64, "bits": 4, "mode": "affine",     the global format
//       "model.layers.0.mlp.down_proj":
//           {"group_size": 32, "bits": 8},                 an override ("mode" absent: affine)
//       "model.layers.1.mlp.up_proj":
//           {"group_size": 32, "bits": 4, "mode": "mxfp4"},  an override in another mode
//       "lm_head": false},                                 a layer kept in float
//    ...}
//
// A missing group_size or bits takes MLX's default for the mode (affine 64 and 4; a float mode its only
// format, e.g. mxfp4 32 and 4). Writing: MlxQuantization::to_json gives the section as mlx_lm writes it
// (the mode in the global format and in each override); save_mlx_config writes config.json with that
// section as "quantization" and again as "quantization_config" (mlx_lm's save_config), over a base
// config; mlx_quantization(allocate_bits(...)) builds the section of a per-layer bit allocation (ptq/).
#pragma once

#include "../any_quantized_linear.hpp"
#include "../detail/config.hpp"
#include "../errors.hpp"
#include "../ptq/allocation.hpp"
#include "detail/bytes.hpp"
#include "detail/compiled.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json_fwd.hpp>

LOWBIT_BEGIN_NAMESPACE

/// How one layer is quantized.
struct LayerQuantization {
    int group_size = 64;
    int bits = 4;
    std::string mode = "affine";  ///< MLX's mode: "affine" or "mxfp4"
    friend bool operator==(const LayerQuantization&, const LayerQuantization&) = default;
};

/// The "quantization" section of an MLX config.json: a global group size and bits plus per-layer
/// overrides (another format, or `false` for a layer kept in float).
class MlxQuantization {
public:
    MlxQuantization() = default;

    /// A section with this global format (nullopt: an unquantized model) and no overrides. Throws
    /// std::invalid_argument for an unsupported format.
    explicit MlxQuantization(std::optional<LayerQuantization> global) : global_(global) {
        if (global) check_format("global", *global);
    }

    /// Sets layer `prefix`'s override: another format, or nullopt for a layer kept in float (written
    /// `false`). Throws std::invalid_argument for an unsupported format, an empty prefix, or a prefix
    /// that is one of the section's own keys (group_size, bits, mode).
    void set_layer(const std::string& prefix, std::optional<LayerQuantization> format) {
        if (prefix.empty() || prefix == "group_size" || prefix == "bits" || prefix == "mode")
            throw std::invalid_argument("lowbit::MlxQuantization::set_layer: layer name " + io_detail::quoted(prefix) +
                                        " cannot be an override key");
        if (format) check_format(prefix, *format);
        overrides_[prefix] = format;
    }

    /// The section as mlx_lm's quantize_model writes it: {"group_size": g, "bits": b, "mode": m,
    /// "<layer prefix>": {"group_size": g, "bits": b, "mode": m} or false, ...}; null for an
    /// unquantized model (no global format, no overrides). Throws std::invalid_argument for overrides
    /// without a global format (MLX reads the global group_size and bits unconditionally).
    nlohmann::json to_json() const;

    /// Reads the section from a parsed config.json (the whole object). `label` names it in errors.
    /// A config without "quantization" (nor "quantization_config") describes an unquantized model.
    /// Throws lowbit::format_error for a group size or bits that is not a supported integer, a mode
    /// lowbit does not support, or a key other than group_size, bits and mode whose value is neither an object
    /// (an override) nor false (a layer kept in float).
    static MlxQuantization from_json(const nlohmann::json& config, const std::string& label = "config.json");

    /// The format of layer `prefix` (e.g. "model.layers.0.self_attn.q_proj"): its override, else the
    /// global one; nullopt when the layer is overridden with `false` or the model is not quantized.
    /// Whether the layer is quantized at all in the file is told by the presence of prefix + ".scales".
    std::optional<LayerQuantization> for_layer(std::string_view prefix) const {
        if (const auto it = overrides_.find(prefix); it != overrides_.end()) return it->second;
        return global_;
    }

    /// The global format (nullopt for an unquantized model).
    const std::optional<LayerQuantization>& global() const noexcept { return global_; }
    /// The per-layer overrides (nullopt = `false`).
    const std::map<std::string, std::optional<LayerQuantization>, std::less<>>& overrides() const noexcept {
        return overrides_;
    }

private:
    /// A JSON value as compact text for an error message (invalid UTF-8 replaced, never a throw).
    static std::string json_text(const nlohmann::json& value);

    static void check_format(const std::string& where, const LayerQuantization& format) {
        if (!is_mlx_format(format.mode, format.group_size, format.bits))
            throw std::invalid_argument(
                "lowbit::MlxQuantization: " + io_detail::quoted(where) + ": mode = " + format.mode +
                ", group_size = " + std::to_string(format.group_size) + ", bits = " + std::to_string(format.bits) +
                " is not supported by MLX (" + supported_formats_text(true) + ")");
    }

    static nlohmann::json format_json(const LayerQuantization& format);
    static std::optional<LayerQuantization> parse_format(const nlohmann::json& object, const std::string& label,
                                                         const std::string& where);

    std::optional<LayerQuantization> global_;
    std::map<std::string, std::optional<LayerQuantization>, std::less<>> overrides_;
};

/// Reads an MLX config.json (`path` is the file, or a directory holding config.json). Throws
/// std::runtime_error when it cannot be read, lowbit::format_error when it does not parse or its
/// quantization section is malformed (see MlxQuantization::from_json).
MlxQuantization read_mlx_config(const std::filesystem::path& path);

/// Writes an MLX config.json (`path` is the file, or an existing directory that gets config.json): the
/// object `base` (e.g. the float model's config; default empty) with "quantization" and its copy
/// "quantization_config" set from `quantization` (both removed for an unquantized model), keys sorted
/// and indented by 4 as mlx_lm's save_config writes them; read_mlx_config reads every layer's format
/// back. Throws std::invalid_argument for a base that is not an object or what
/// MlxQuantization::to_json refuses, std::runtime_error when the file cannot be written.
void save_mlx_config(const std::filesystem::path& path, const MlxQuantization& quantization, nlohmann::json base);
/// The same with an empty base object.
void save_mlx_config(const std::filesystem::path& path, const MlxQuantization& quantization);

/// The MLX quantization section for allocate_bits' result: each layer under its name in
/// `allocation.choices` (the CalibratedLayer names the caller gave: the checkpoint prefixes), `global`
/// as the global format (default: the format chosen for the most layers, the first of them on a tie)
/// and an override for every layer whose format differs from it. Throws std::invalid_argument for an
/// empty layer name or one name given two formats.
inline MlxQuantization mlx_quantization(const BitAllocation& allocation,
                                        std::optional<LayerQuantization> global = std::nullopt) {
    const auto& choices = allocation.choices;
    if (!global) {
        std::ptrdiff_t best_count = 0;
        for (const LayerChoice& candidate : choices) {
            const auto count = std::count_if(choices.begin(), choices.end(), [&](const LayerChoice& c) {
                return c.bits == candidate.bits && c.group_size == candidate.group_size;
            });
            if (count > best_count) {
                best_count = count;
                global = LayerQuantization{candidate.group_size, candidate.bits};
            }
        }
    }
    MlxQuantization result(global);
    std::map<std::string, LayerQuantization, std::less<>> seen;
    for (std::size_t i = 0; i < choices.size(); ++i) {
        const LayerChoice& choice = choices[i];
        const LayerQuantization format{choice.group_size, choice.bits};
        if (choice.name.empty())
            throw std::invalid_argument("lowbit::mlx_quantization: layer " + std::to_string(i) + " has no name");
        if (const auto [it, inserted] = seen.emplace(choice.name, format); !inserted && !(it->second == format))
            throw std::invalid_argument("lowbit::mlx_quantization: layer " + io_detail::quoted(choice.name) +
                                        " is given two formats");
        if (!(global && format == *global)) result.set_layer(choice.name, format);
    }
    return result;
}

LOWBIT_END_NAMESPACE

#if !defined(LOWBIT_EXTERN_IO)
#include "impl/mlx_config.hpp"
#endif
