// MlxQuantization's JSON form, read_mlx_config and save_mlx_config (mlx_config.hpp; included by it unless
// LOWBIT_EXTERN_IO, compiled once by lowbit::io_compiled otherwise: detail/compiled.hpp).
#pragma once

#include "../mlx_config.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

LOWBIT_BEGIN_NAMESPACE

LOWBIT_IO_FUNC nlohmann::json MlxQuantization::to_json() const {
    if (!global_) {
        if (overrides_.empty()) return nullptr;
        throw std::invalid_argument("lowbit::MlxQuantization::to_json: " + std::to_string(overrides_.size()) +
                                    " layer overrides (e.g. " + io_detail::quoted(overrides_.begin()->first) +
                                    ") but no global format; MLX needs the global group_size and bits");
    }
    nlohmann::json section = format_json(*global_);
    for (const auto& [prefix, format] : overrides_)
        section[prefix] = format ? format_json(*format) : nlohmann::json(false);
    return section;
}

LOWBIT_IO_FUNC MlxQuantization MlxQuantization::from_json(const nlohmann::json& config, const std::string& label) {
    MlxQuantization result;
    if (!config.is_object()) throw format_error("lowbit::read_mlx_config: " + label + ": not a JSON object");
    auto section = config.find("quantization");
    if (section == config.end()) section = config.find("quantization_config");
    if (section == config.end()) return result;
    if (!section->is_object())
        throw format_error("lowbit::read_mlx_config: " + label + ": \"quantization\" is not an object");
    result.global_ = parse_format(*section, label, "quantization");
    for (const auto& [key, value] : section->items()) {
        if (value.is_object()) {
            result.overrides_[key] = parse_format(value, label, key);
            if (!result.overrides_[key])
                throw format_error("lowbit::read_mlx_config: " + label + ": layer " + io_detail::quoted(key) +
                                   " has no group_size, bits or mode");
        } else if (value.is_boolean()) {
            if (value.get<bool>())
                throw format_error("lowbit::read_mlx_config: " + label + ": layer " + io_detail::quoted(key) +
                                   " is `true`; an override is an object or false");
            result.overrides_[key] = std::nullopt;
        } else if (key != "group_size" && key != "bits" && key != "mode") {
            // mlx-lm writes the global fields and per-layer objects or false here; anything else is not a
            // format lowbit could apply, and ignoring it would load the layer in the global format.
            throw format_error("lowbit::read_mlx_config: " + label + ": layer " + io_detail::quoted(key) + " is " +
                               json_text(value) + "; an override is an object or false");
        }
    }
    return result;
}

LOWBIT_IO_FUNC std::string MlxQuantization::json_text(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LOWBIT_IO_FUNC nlohmann::json MlxQuantization::format_json(const LayerQuantization& format) {
    return {{"group_size", format.group_size}, {"bits", format.bits}, {"mode", format.mode}};
}

LOWBIT_IO_FUNC std::optional<LayerQuantization> MlxQuantization::parse_format(const nlohmann::json& object,
                                                                              const std::string& label,
                                                                              const std::string& where) {
    const auto group = object.find("group_size");
    const auto bits = object.find("bits");
    const auto mode = object.find("mode");
    if (group == object.end() && bits == object.end() && mode == object.end()) return std::nullopt;
    std::string mode_name = "affine";
    std::int64_t group_size = 64, bit_count = 4;  // MLX's defaults for a missing key, per mode
    if (mode != object.end()) {
        bool known = false;
        if (mode->is_string()) {
            mode_name = mode->get<std::string>();
            detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
                if (known || mode_name != Format::mode) return;
                known = true;
                if (mode_name != "affine") group_size = Format::group_size, bit_count = Format::bits;
            });
        }
        if (!known)
            throw format_error("lowbit::read_mlx_config: " + label + ": " + io_detail::quoted(where) + ": mode " +
                               json_text(*mode) + " is not supported (" + supported_formats_text(true) + ")");
    }
    const auto read = [&](nlohmann::json::const_iterator it, const char* key, std::int64_t& out) {
        if (it == object.end()) return;
        if (!it->is_number_integer())
            throw format_error("lowbit::read_mlx_config: " + label + ": " + io_detail::quoted(where) + ": " + key +
                               " = " + json_text(*it) + " is not an integer");
        out = it->get<std::int64_t>();
    };
    read(group, "group_size", group_size);
    read(bits, "bits", bit_count);
    const bool in_range = group_size > 0 && group_size <= 128 && bit_count > 0 && bit_count <= 8;
    if (!in_range || !is_mlx_format(mode_name, static_cast<int>(group_size), static_cast<int>(bit_count)))
        throw format_error("lowbit::read_mlx_config: " + label + ": " + io_detail::quoted(where) +
                           ": mode = " + mode_name + ", group_size = " + std::to_string(group_size) + ", bits = " +
                           std::to_string(bit_count) + " is not supported (" + supported_formats_text(true) + ")");
    const LayerQuantization format{static_cast<int>(group_size), static_cast<int>(bit_count), mode_name};
    return format;
}

LOWBIT_IO_FUNC MlxQuantization read_mlx_config(const std::filesystem::path& path) {
    const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("lowbit::read_mlx_config: " + file.string() + ": cannot open");
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
        throw format_error("lowbit::read_mlx_config: " + file.string() + ": does not parse: " + e.what());
    }
    return MlxQuantization::from_json(config, file.string());
}

LOWBIT_IO_FUNC void save_mlx_config(const std::filesystem::path& path, const MlxQuantization& quantization,
                                    nlohmann::json base) {
    if (!base.is_object()) throw std::invalid_argument("lowbit::save_mlx_config: the base config is not a JSON object");
    const nlohmann::json section = quantization.to_json();
    base.erase("quantization");
    base.erase("quantization_config");
    if (!section.is_null()) {
        base["quantization"] = section;
        base["quantization_config"] = section;  // mlx_lm writes both (Hugging Face tools read the second)
    }
    const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << base.dump(4, ' ', false, nlohmann::json::error_handler_t::strict);
    out.close();
    if (!out) throw std::runtime_error("lowbit::save_mlx_config: " + file.string() + ": cannot write");
}

LOWBIT_IO_FUNC void save_mlx_config(const std::filesystem::path& path, const MlxQuantization& quantization) {
    save_mlx_config(path, quantization, nlohmann::json::object());
}

LOWBIT_END_NAMESPACE
