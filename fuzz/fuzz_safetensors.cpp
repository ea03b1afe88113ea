// libFuzzer target over SafetensorsFile (and, through it, the MLX layer loaders and SafetensorsWriter):
// the input bytes are parsed as a safetensors file from memory, then every accessor and conversion is
// exercised on whatever the header describes.
//
// The contract checked: every call returns or throws std::invalid_argument (the only exception caught
// here); nothing reads outside the input (AddressSanitizer). Properties checked, aborting on a violation:
// a tensor's bytes lie inside the input; re-writing every tensor with SafetensorsWriter and parsing
// the result gives the same dtypes, shapes and bytes; a loaded MLX layer, in every format of
// lowbit::QuantizedFormats, saved with its scales' dtype writes the same weight, scales and biases bytes
// back; a loaded layer of a few representative formats (runs_forward) runs one row forward.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <lowbit/io.hpp>

namespace {

[[noreturn]] void violation(const char* what, const std::string& name) {
    std::fprintf(stderr, "lowbit fuzz_safetensors: contract violation: %s (tensor '%s')\n", what, name.c_str());
    std::abort();
}

bool ends_with(const std::string& text, const char* suffix) {
    const std::size_t length = std::strlen(suffix);
    return text.size() >= length && text.compare(text.size() - length, length, suffix) == 0;
}

void exercise_tensor(const lowbit::SafetensorsFile& file, const std::string& name, std::span<const std::byte> input) {
    const auto t = file.tensor(name);
    if (t.bytes.data() < input.data() || t.bytes.data() + t.bytes.size() > input.data() + input.size())
        violation("tensor bytes outside the input", name);
    if (t.bytes.size() != t.element_count() * lowbit::dtype_size(t.dtype)) violation("byte count", name);
    try {
        switch (t.dtype) {
            case lowbit::Dtype::f32: case lowbit::Dtype::f16: case lowbit::Dtype::bf16:
                if (file.to_vector(name).size() != t.element_count()) violation("to_vector size", name);
                if (t.shape.size() == 2) (void)file.to_matrix(name);
                break;
            case lowbit::Dtype::u32: (void)t.to_vector<std::uint32_t>(); (void)t.span<std::uint32_t>(); break;
            case lowbit::Dtype::i64: (void)t.to_vector<std::int64_t>(); break;
            case lowbit::Dtype::i8: (void)t.span<std::int8_t>(); break;
            default: (void)t.to_vector<std::uint8_t>(); break;  // a wrong type: throws
        }
    } catch (const std::invalid_argument&) {
    }
}

/// Formats whose loaded layers also run forward: affine codes that straddle words (3 bits, groups of 32),
/// that do not (4 bits, 64; 6 bits, 128), and the three floating-point modes. The loaders' checks are
/// the same code for every format; running every format's kernels would compile them all into this
/// fuzzer under its sanitizers, for no new path through the loaders.
template <class Format>
constexpr bool runs_forward =
    std::is_same_v<Format, lowbit::MlxAffine<32, 3>> || std::is_same_v<Format, lowbit::MlxAffine<64, 4>> ||
    std::is_same_v<Format, lowbit::MlxAffine<128, 6>> || std::is_same_v<Format, lowbit::Mxfp4> ||
    std::is_same_v<Format, lowbit::Nvfp4> || std::is_same_v<Format, lowbit::Mxfp8>;

/// One row through a loaded layer, when its format is one of runs_forward's.
void run_forward(const lowbit::AnyQuantizedLinear& layer) {
    std::visit(
        [](const auto& typed) {
            using Format = typename std::decay_t<decltype(typed)>::format;
            if constexpr (runs_forward<Format>) (void)typed.forward(lowbit::RowMatrixXf::Ones(1, typed.input_dims()));
        },
        layer.variant());
}

void exercise_layers(const lowbit::SafetensorsFile& file) {
    for (const auto& name : file.names()) {
        if (!ends_with(name, ".weight")) continue;
        const std::string prefix = name.substr(0, name.size() - 7);
        try {
            (void)lowbit::load_linear(file, prefix);
        } catch (const std::invalid_argument&) {
        }
        if (!file.contains(prefix + ".scales")) continue;
        lowbit::detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
            try {
                const auto layer =
                    lowbit::load_mlx_linear(file, prefix, Format::group_size, Format::bits, Format::mode);
                // Float scales are written back in their dtype; U8 ones as they are (the bias vector then
                // takes F32, and is not compared).
                const auto scale_dtype = file.tensor(prefix + ".scales").dtype;
                const auto dtype = lowbit::is_float_dtype(scale_dtype) ? scale_dtype : lowbit::Dtype::f32;
                lowbit::SafetensorsWriter writer;
                lowbit::save_mlx_linear(writer, prefix, layer, dtype);
                const auto bytes = writer.to_bytes();
                const auto again = lowbit::SafetensorsFile::from_bytes(bytes);
                for (const char* part : {".weight", ".scales", ".biases"}) {
                    if (std::string_view(part) == ".biases" && !Format::has_biases) continue;
                    const auto a = file.tensor(prefix + part), b = again.tensor(prefix + part);
                    if (a.bytes.size() != b.bytes.size() ||
                        (!a.bytes.empty() && std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) != 0))
                        violation("layer round trip changed bytes", prefix + part);
                }
                if (layer.input_dims() <= 4096 && layer.output_dims() <= 4096) run_forward(layer);
            } catch (const std::invalid_argument&) {
            }
        });
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto file = lowbit::SafetensorsFile::from_bytes(input, "fuzz-input");
        for (const auto& [key, value] : file.metadata()) (void)(key.size() + value.size());
        lowbit::SafetensorsWriter writer;
        for (const auto& name : file.names()) {
            exercise_tensor(file, name, input);
            const auto t = file.tensor(name);
            writer.add(name, t.dtype, t.shape, t.bytes);
        }
        (void)file.contains("x");
        writer.set_metadata(file.metadata());
        const auto bytes = writer.to_bytes();
        const auto again = lowbit::SafetensorsFile::from_bytes(bytes);
        if (again.names() != file.names()) violation("rewritten names differ", "");
        for (const auto& name : file.names()) {
            const auto a = file.tensor(name), b = again.tensor(name);
            if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size() ||
                (!a.bytes.empty() && std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) != 0))
                violation("rewritten tensor differs", name);
        }
        if (again.metadata() != file.metadata()) violation("rewritten metadata differs", "");
        exercise_layers(file);
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
