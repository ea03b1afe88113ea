// lowbit-inspect: lists the tensors of a safetensors or GGUF file and, for MLX quantized layers, their
// format and (given the float original) the quantization error.
//
//   lowbit-inspect FILE [--original FLOAT_FILE] [--config CONFIG_JSON] [--metadata]
//   lowbit-inspect --demo DIR     writes DIR/model.safetensors (an MLX 4-bit layer), DIR/config.json and
//                                 DIR/original.safetensors (its float weights), then inspects them
//
// A quantized MLX layer P is P.weight (U32) with P.scales and P.biases (mode affine) or U8 P.scales
// alone (the float modes, mxfp4 and nvfp4). Its mode, group size and bits come from config.json beside
// FILE (or --config), else from the float original's P.weight (in = its columns) and the scales' dtype,
// else from the shapes and the scales' dtype alone when only one supported format fits them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <lowbit/io.hpp>

namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

bool is_gguf(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    return in && std::memcmp(magic, "GGUF", 4) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Every MLX format (lowbit::is_mlx_format_v) whose scales have this dtype (U8 for the float modes, a
/// float type for affine) that fits a weight [out, words] and scales [out, groups]; with `in` known,
/// only those of that input width.
std::vector<lowbit::LayerQuantization> formats_from_shapes(lowbit::Dtype scales, std::uint64_t words,
                                                           std::uint64_t groups, std::optional<std::uint64_t> in) {
    std::vector<lowbit::LayerQuantization> formats;
    const auto consider = [&]<class Format>(Format) {
        const std::uint64_t width = groups * Format::group_size;
        if (lowbit::is_mlx_format_v<Format> &&
            (scales == lowbit::Dtype::u8) == std::is_same_v<typename Format::scale_type, std::uint8_t> &&
            words * 32 == width * Format::bits && (!in || *in == width))
            formats.push_back({Format::group_size, Format::bits, Format::mode});
    };
    std::apply([&](auto... format) { (consider(format), ...); }, lowbit::QuantizedFormats{});
    return formats;
}

void inspect_safetensors(const std::filesystem::path& path, const std::optional<std::filesystem::path>& original_path,
                         std::optional<std::filesystem::path> config_path, bool show_metadata) {
    const auto file = lowbit::SafetensorsFile::open(path);
    std::printf("%s: safetensors, %zu tensors\n", path.string().c_str(), file.size());
    if (show_metadata)
        for (const auto& [key, value] : file.metadata()) std::printf("  metadata %s = %s\n", key.c_str(), value.c_str());
    std::printf("  %-48s %-6s %-20s %12s\n", "name", "dtype", "shape", "bytes");
    std::uint64_t total = 0;
    for (const auto& name : file.names()) {
        const auto t = file.tensor(name);
        total += t.bytes.size();
        std::printf("  %-48s %-6s %-20s %12zu\n", name.c_str(), std::string(lowbit::dtype_name(t.dtype)).c_str(),
                    shape_text(t.shape).c_str(), t.bytes.size());
    }
    std::printf("  total %llu bytes\n", static_cast<unsigned long long>(total));

    if (!config_path && std::filesystem::exists(path.parent_path() / "config.json"))
        config_path = path.parent_path() / "config.json";
    std::optional<lowbit::MlxQuantization> config;
    if (config_path) config = lowbit::read_mlx_config(*config_path);
    std::optional<lowbit::SafetensorsFile> original;
    if (original_path) original = lowbit::SafetensorsFile::open(*original_path);

    for (const auto& name : file.names()) {
        if (!ends_with(name, ".weight")) continue;
        const std::string prefix = name.substr(0, name.size() - 7);
        const auto weight = file.tensor(name);
        if (weight.dtype != lowbit::Dtype::u32 || weight.shape.size() != 2 || !file.contains(prefix + ".scales"))
            continue;
        const auto scales = file.tensor(prefix + ".scales");
        if (scales.shape.size() != 2 || (scales.dtype != lowbit::Dtype::u8 && !file.contains(prefix + ".biases")))
            continue;
        std::optional<lowbit::LayerQuantization> format;
        std::string source;
        if (config && config->for_layer(prefix)) {
            format = config->for_layer(prefix);
            source = "config.json";
        } else {
            std::optional<std::uint64_t> in;
            if (original && original->contains(name) && original->tensor(name).shape.size() == 2)
                in = original->tensor(name).shape[1];
            const auto formats = formats_from_shapes(scales.dtype, weight.shape[1], scales.shape[1], in);
            if (formats.size() == 1) {
                format = formats[0];
                source = in ? "the original's shape" : "the shapes";
            } else if (formats.size() > 1) {
                std::printf("  layer %s: quantized (%s scales); group size and bits ambiguous from shapes:", prefix.c_str(),
                            std::string(lowbit::dtype_name(scales.dtype)).c_str());
                for (const auto& f : formats) std::printf(" %s g%d/b%d", f.mode.c_str(), f.group_size, f.bits);
                std::printf(" (give --config or --original)\n");
                continue;
            }
        }
        if (!format || !lowbit::is_supported_format(format->mode, format->group_size, format->bits)) {
            std::printf("  layer %s: quantized, format unknown\n", prefix.c_str());
            continue;
        }
        const auto layer = lowbit::load_mlx_linear(file, prefix, format->group_size, format->bits, format->mode);
        std::printf("  layer %s: %s, %d-bit, group size %d (from %s), %s scales, [%td, %td]%s", prefix.c_str(),
                    layer.mode(), layer.bits(), layer.group_size(), source.c_str(),
                    std::string(lowbit::dtype_name(scales.dtype)).c_str(), layer.output_dims(), layer.input_dims(),
                    layer.bias() ? ", with bias" : "");
        if (original && original->contains(name)) {
            const lowbit::RowMatrixXf reference = lowbit::load_linear(*original, prefix).weight;
            const lowbit::RowMatrixXf dequantized = layer.dequantize();
            if (reference.rows() != dequantized.rows() || reference.cols() != dequantized.cols()) {
                std::printf("; the original is %ldx%ld, not comparable\n", static_cast<long>(reference.rows()),
                            static_cast<long>(reference.cols()));
                continue;
            }
            const double error = (reference - dequantized).cast<double>().norm();
            const double norm = reference.cast<double>().norm();
            std::printf("; vs original: max |error| %.4g, RMS error %.4g, relative %.4g\n",
                        static_cast<double>((reference - dequantized).cwiseAbs().maxCoeff()),
                        error / std::sqrt(static_cast<double>(reference.size())), norm > 0 ? error / norm : 0.0);
        } else {
            std::printf("\n");
        }
    }
}

void inspect_gguf(const std::filesystem::path& path, bool show_metadata) {
    const auto file = lowbit::GgufFile::open(path);
    std::printf("%s: GGUF v%u, alignment %llu, %zu metadata keys, %zu tensors\n", path.string().c_str(), file.version(),
                static_cast<unsigned long long>(file.alignment()), file.metadata().size(), file.tensor_infos().size());
    for (const auto& [key, value] : file.metadata())
        if (show_metadata || !value.is_array()) std::printf("  %s = %s\n", key.c_str(), value.to_string().c_str());
    std::printf("  %-40s %-8s %-24s %12s\n", "name", "type", "ne (innermost first)", "bytes");
    for (const auto& info : file.tensor_infos())
        std::printf("  %-40s %-8s %-24s %12llu\n", info.name.c_str(), std::string(lowbit::ggml_type_name(info.type)).c_str(),
                    shape_text(info.dims).c_str(), static_cast<unsigned long long>(info.size));
}

int demo(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    lowbit::RowMatrixXf weight(64, 256);
    for (Eigen::Index r = 0; r < weight.rows(); ++r)
        for (Eigen::Index c = 0; c < weight.cols(); ++c)
            weight(r, c) = 0.05f * std::sin(0.37f * static_cast<float>(r * weight.cols() + c));
    const lowbit::Linear linear{weight, Eigen::VectorXf::Zero(64)};
    lowbit::SafetensorsWriter original, model;
    lowbit::save_linear(original, "layers.0.proj", linear);
    original.write(dir / "original.safetensors");
    lowbit::save_mlx_linear(model, "layers.0.proj", lowbit::AnyQuantizedLinear::from_linear(linear, 64, 4), lowbit::Dtype::f16);
    model.set_metadata("format", "mlx");
    model.write(dir / "model.safetensors");
    std::ofstream(dir / "config.json") << R"({"quantization": {"group_size": 64, "bits": 4}})";
    inspect_safetensors(dir / "model.safetensors", dir / "original.safetensors", std::nullopt, true);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::optional<std::filesystem::path> file, original, config;
        bool metadata = false;
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            if ((arg == "--original" || arg == "--config" || arg == "--demo") && i + 1 < argc) {
                const std::filesystem::path value = argv[++i];
                if (arg == "--demo") return demo(value);
                (arg == "--original" ? original : config) = value;
            } else if (arg == "--metadata") {
                metadata = true;
            } else if (!arg.empty() && arg[0] != '-' && !file) {
                file = arg;
            } else {
                file.reset();
                break;
            }
        }
        if (!file) {
            std::fprintf(stderr,
                         "usage: lowbit-inspect FILE [--original FLOAT_FILE] [--config CONFIG_JSON] [--metadata]\n"
                         "       lowbit-inspect --demo DIR\n");
            return 2;
        }
        if (is_gguf(*file))
            inspect_gguf(*file, metadata);
        else
            inspect_safetensors(*file, original, config, metadata);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "lowbit-inspect: %s\n", e.what());
        return 1;
    }
}
