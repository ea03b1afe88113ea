// MLX checkpoints: config.json's quantization section, AnyQuantizedLinear, and load / save of layers
// with byte-exact round trips for F32, F16 and BF16 scales.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/io.hpp>

#include <nlohmann/json.hpp>  // the JSON-typed API (with LOWBIT_EXTERN_IO the IO headers only declare it)

#include "io/io_support.hpp"
#include "support/formats.hpp"
#include "support/random.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::Activations;
using lowbit::AnyQuantizedLinear;
using lowbit::Dtype;
using lowbit::LayerQuantization;
using lowbit::RowMatrixXf;
using lowbit::SafetensorsFile;
using lowbit::SafetensorsWriter;

RowMatrixXf random_matrix(std::mt19937_64& rng, Eigen::Index rows, Eigen::Index cols) {
    const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(rows * cols), -1.0f, 1.0f);
    return Eigen::Map<const RowMatrixXf>(values.data(), rows, cols);
}

/// The bytes of a random f16 or bf16 [rows, cols] matrix of finite values (as MLX would have stored them).
std::vector<std::byte> random_half_bytes(std::mt19937_64& rng, std::size_t count, Dtype dtype) {
    std::vector<std::byte> bytes(count * 2);
    std::uniform_real_distribution<float> uniform(-0.2f, 0.2f);
    for (std::size_t i = 0; i < count; ++i) {
        const float value = uniform(rng) * (i % 7 == 0 ? 1e-4f : 1.0f);  // some subnormal f16 values too
        const std::uint16_t h = dtype == Dtype::f16 ? lowbit::io_detail::float_to_f16(value)
                                                    : lowbit::io_detail::float_to_bf16(value);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    return bytes;
}

}  // namespace

TEST_CASE("read_mlx_config: global format, per-layer overrides and false", "[io]") {
    lowbit::test::TempDir dir;
    lowbit::test::write_text(dir / "config.json", R"({
        "model_type": "llama",
        "quantization": {"group_size": 64, "bits": 4, "mode": "affine",
                         "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8},
                         "lm_head": false}})");
    for (const auto& path : {dir / "config.json", dir.path()}) {
        const auto config = lowbit::read_mlx_config(path);
        REQUIRE(config.global());
        CHECK(*config.global() == LayerQuantization{64, 4});
        CHECK(config.for_layer("model.layers.0.self_attn.q_proj") == LayerQuantization{64, 4});
        CHECK(config.for_layer("model.layers.0.mlp.down_proj") == LayerQuantization{32, 8});
        CHECK_FALSE(config.for_layer("lm_head").has_value());
        CHECK(config.overrides().size() == 2);
    }
    lowbit::test::write_text(dir / "plain.json", R"({"model_type": "llama"})");
    CHECK_FALSE(lowbit::read_mlx_config(dir / "plain.json").for_layer("x").has_value());
    lowbit::test::write_text(dir / "hf.json", R"({"quantization_config": {"group_size": 128, "bits": 2}})");
    CHECK(lowbit::read_mlx_config(dir / "hf.json").for_layer("x") == LayerQuantization{128, 2});
}

TEST_CASE("read_mlx_config and save_mlx_config: the mode, global and per layer, with MLX's defaults", "[io]") {
    lowbit::test::TempDir dir;
    lowbit::test::write_text(dir / "config.json", R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4",
        "a": {"group_size": 64, "bits": 8, "mode": "affine"}, "b": {"bits": 3}, "c": {"mode": "mxfp4"},
        "d": {"mode": "affine"}}})");
    const auto config = lowbit::read_mlx_config(dir / "config.json");
    CHECK(config.global() == LayerQuantization{32, 4, "mxfp4"});
    CHECK(config.for_layer("x") == LayerQuantization{32, 4, "mxfp4"});
    CHECK(config.for_layer("a") == LayerQuantization{64, 8, "affine"});
    CHECK(config.for_layer("b") == LayerQuantization{64, 3, "affine"});  // no mode: affine, not the global one
    CHECK(config.for_layer("c") == LayerQuantization{32, 4, "mxfp4"});
    CHECK(config.for_layer("d") == LayerQuantization{64, 4, "affine"});
    lowbit::save_mlx_config(dir / "again.json", config);
    const auto again = lowbit::read_mlx_config(dir / "again.json");
    CHECK(again.global() == config.global());
    CHECK(again.overrides() == config.overrides());
    CHECK(config.to_json()["mode"] == "mxfp4");
    CHECK(config.to_json()["b"]["mode"] == "affine");
}

TEST_CASE("read_mlx_config rejects unsupported or malformed quantization", "[io]") {
    lowbit::test::TempDir dir;
    const auto rejects = [&](const std::string& text, const std::vector<std::string>& parts) {
        lowbit::test::write_text(dir / "config.json", text);
        try {
            (void)lowbit::read_mlx_config(dir / "config.json");
            FAIL("no exception for " << text);
        } catch (const std::invalid_argument& e) {
            INFO(e.what());
            CHECK_THAT(std::string(e.what()), ContainsSubstring("config.json"));
            for (const auto& part : parts) CHECK_THAT(std::string(e.what()), ContainsSubstring(part));
        }
    };
    rejects(R"({"quantization": {"group_size": 64, "bits": 7}})", {"bits = 7"});
    rejects(R"({"quantization": {"group_size": 48, "bits": 4}})", {"group_size = 48"});
    rejects(R"({"quantization": {"group_size": 64, "bits": "4"}})", {"bits", "not an integer"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": true}})", {"'lm_head'", "true"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "x": {"group_size": 16, "bits": 4}}})", {"'x'", "16"});
    rejects(R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxint4"}})", {"mode \"mxint4\"", "nvfp4 (bits"});
    rejects(R"({"quantization": {"group_size": 32, "bits": 4, "mode": "nvfp4"}})", {"mode = nvfp4", "group_size = 32"});
    rejects(R"({"quantization": {"group_size": 32, "bits": 8, "mode": "mxfp4"}})", {"mode = mxfp4", "bits = 8"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "mode": 4}})", {"mode 4"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "x": {"mode": "affine4"}}})", {"'x'", "affine4"});
    // A per-layer entry is an object or false (what mlx-lm writes); any other value names its key.
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "model.layers.0": [1, 2]}})",
            {"'model.layers.0'", "[1,2]"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "model.layers.1": 8}})", {"'model.layers.1'", "8"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": null}})", {"'lm_head'", "null"});
    rejects(R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": "affine"}})", {"'lm_head'", "\"affine\""});
    rejects(R"({"quantization": 4})", {"not an object"});
    rejects(R"({"quantization": )", {"does not parse"});
    CHECK_THROWS_AS(lowbit::read_mlx_config(dir / "missing.json"), std::runtime_error);
}

TEST_CASE("AnyQuantizedLinear covers every supported format and forwards like the typed layer", "[io]") {
    auto rng = lowbit::test::make_rng(202);
    const lowbit::Linear linear{random_matrix(rng, 8, 256), Eigen::VectorXf::Random(8)};
    const RowMatrixXf x = random_matrix(rng, 3, 256);
    int formats = 0;
    lowbit::detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
        INFO(lowbit::test::format_text<Format>());
        const auto layer = AnyQuantizedLinear::from_linear(linear, Format::group_size, Format::bits, Format::mode);
        CHECK(std::string(layer.mode()) == Format::mode);
        CHECK(layer.group_size() == Format::group_size);
        CHECK(layer.bits() == Format::bits);
        CHECK(layer.input_dims() == 256);
        CHECK(layer.output_dims() == 8);
        CHECK(std::holds_alternative<lowbit::QuantizedLinearOf<Format>>(layer.variant()));
        std::visit([&](const auto& typed) {
            CHECK(layer.forward(x) == typed.forward(x));
            CHECK(layer.forward(x, Activations::f32) == typed.forward(x));
            CHECK(layer.forward(x, Activations::int8) == typed.forward(x, Activations::int8));
        }, layer.variant());
        ++formats;
    });
    CHECK(formats == static_cast<int>(std::tuple_size_v<lowbit::QuantizedFormats>));
    const auto layer = AnyQuantizedLinear::from_linear(linear, 64, 4);
    CHECK(layer.get_if<64, 4>() != nullptr);
    CHECK(layer.get_if<32, 4>() == nullptr);
    CHECK(layer.get<64, 4>().forward(x) == layer.forward(x));
    RowMatrixXf bad_x = x;
    bad_x(2, 5) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(layer.forward(bad_x, Activations::int8), ContainsSubstring("x(2, 5) = nan"));
    CHECK_THROWS_WITH((layer.get<32, 8>()), ContainsSubstring("group_size = 64, bits = 4"));
    CHECK_THROWS_WITH(AnyQuantizedLinear::from_linear(linear, 64, 7), ContainsSubstring("bits = 7"));
    CHECK_THROWS_WITH(AnyQuantizedLinear::from_linear(linear, 16, 8), ContainsSubstring("group_size = 16, bits = 8"));
}

TEMPLATE_LIST_TEST_CASE("save_mlx_linear -> load_mlx_linear keeps the layer, and saving again writes the same bytes",
                        "[io]", lowbit::QuantizedFormats) {
    auto rng = lowbit::test::make_rng(303 + 1000 * lowbit::detail::format_index_v<TestType>);
    lowbit::test::TempDir dir;
    constexpr int group_size = TestType::group_size, bits = TestType::bits;
    for (const Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
        INFO("dtype " << lowbit::dtype_name(dtype) << ", " << lowbit::test::format_text<TestType>());
        const lowbit::Linear linear{random_matrix(rng, 5, 128), Eigen::VectorXf::Random(5)};
        const AnyQuantizedLinear layer = lowbit::QuantizedLinearOf<TestType>::from_linear(linear);
        SafetensorsWriter first;
        lowbit::save_mlx_linear(first, "model.proj", layer, dtype);
        first.write(dir / "first.safetensors");

        const auto file = SafetensorsFile::open(dir / "first.safetensors");
        CHECK(file.tensor("model.proj.weight").dtype == Dtype::u32);
        const bool byte_scales = std::is_same_v<typename TestType::scale_type, std::uint8_t>;
        CHECK(file.tensor("model.proj.scales").dtype == (byte_scales ? Dtype::u8 : dtype));
        CHECK(file.tensor("model.proj.bias").dtype == dtype);
        const auto loaded = lowbit::load_mlx_linear(file, "model.proj", group_size, bits, TestType::mode);
        CHECK(std::string(loaded.mode()) == TestType::mode);
        CHECK(loaded.group_size() == group_size);
        CHECK(loaded.bits() == bits);
        if (dtype == Dtype::f32) CHECK(loaded.forward(linear.weight) == layer.forward(linear.weight));

        SafetensorsWriter second;
        lowbit::save_mlx_linear(second, "model.proj", loaded, dtype);
        CHECK(second.to_bytes() == lowbit::test::read_file(dir / "first.safetensors"));
    }
}

TEST_CASE("an MLX-style file with arbitrary f16 / bf16 scales round-trips byte for byte", "[io]") {
    auto rng = lowbit::test::make_rng(404);
    std::uniform_int_distribution<std::uint32_t> any_word;
    for (const Dtype dtype : {Dtype::f16, Dtype::bf16}) {
        constexpr std::size_t out = 16, in = 256, group_size = 64, bits = 3;
        std::vector<std::uint32_t> words(out * in * bits / 32);
        for (auto& word : words) word = any_word(rng);
        SafetensorsWriter writer;
        writer.add("layers.0.q.weight", words, {out, in * bits / 32});
        writer.add("layers.0.q.scales", dtype, {out, in / group_size}, random_half_bytes(rng, out * in / group_size, dtype));
        writer.add("layers.0.q.biases", dtype, {out, in / group_size}, random_half_bytes(rng, out * in / group_size, dtype));
        writer.add("layers.0.q.bias", dtype, {out}, random_half_bytes(rng, out, dtype));
        writer.set_metadata("format", "mlx");
        const auto original = writer.to_bytes();

        const auto file = SafetensorsFile::from_bytes(original);
        const auto layer = lowbit::load_mlx_linear(file, "layers.0.q", group_size, bits);
        SafetensorsWriter again;
        lowbit::save_mlx_linear(again, "layers.0.q", layer, dtype);
        again.set_metadata("format", "mlx");
        CHECK(again.to_bytes() == original);
    }
}

TEST_CASE("load_mlx_linear with a config, load_linear for float layers", "[io]") {
    auto rng = lowbit::test::make_rng(505);
    const lowbit::Linear q_proj{random_matrix(rng, 4, 64), std::nullopt};
    const lowbit::Linear head{random_matrix(rng, 3, 64), Eigen::VectorXf::Random(3)};
    SafetensorsWriter writer;
    lowbit::save_mlx_linear(writer, "q_proj", AnyQuantizedLinear::from_linear(q_proj, 32, 8), Dtype::bf16);
    lowbit::save_linear(writer, "lm_head", head, Dtype::f32);
    const auto bytes = writer.to_bytes();
    const auto file = SafetensorsFile::from_bytes(bytes, "model.safetensors");
    const auto config = lowbit::MlxQuantization::from_json(
        nlohmann::json::parse(R"({"quantization": {"group_size": 32, "bits": 8, "lm_head": false}})"));

    const auto layer = lowbit::load_mlx_linear(file, "q_proj", config);
    CHECK(layer.bits() == 8);
    CHECK_FALSE(layer.bias().has_value());
    const auto loaded_head = lowbit::load_linear(file, "lm_head");
    CHECK(loaded_head.weight == head.weight);
    CHECK(*loaded_head.bias == *head.bias);
    CHECK_THROWS_WITH(lowbit::load_mlx_linear(file, "lm_head", config), ContainsSubstring("load_linear"));
}

TEST_CASE("load_mlx_linear / load_linear reject missing or malformed tensors, naming file and tensor", "[io]") {
    SafetensorsWriter writer;
    writer.add("p.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});  // 4 x 64 at 4 bits
    writer.add("p.scales", RowMatrixXf::Ones(4, 2));
    writer.add("p.biases", RowMatrixXf::Zero(4, 2));
    writer.add("q.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});
    writer.add("q.scales", RowMatrixXf::Ones(4, 2));
    writer.add("r.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});
    writer.add("r.scales", std::vector<std::int32_t>(8), {4, 2});
    writer.add("r.biases", RowMatrixXf::Zero(4, 2));
    writer.add("s.weight", RowMatrixXf::Ones(4, 64));
    writer.add("s.bias", RowMatrixXf::Ones(4, 1));
    std::vector<std::uint8_t> exponents(4 * 2, 127);
    writer.add("m.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});  // 4 x 64 in mxfp4
    writer.add("m.scales", exponents, {4, 2});
    exponents[2 * 2 + 1] = 255;  // NaN in E8M0 at row 2, group 1
    writer.add("n.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});
    writer.add("n.scales", exponents, {4, 2});
    std::vector<std::uint8_t> e4m3(4 * 4, 0x38);                        // 1.0
    writer.add("v.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});  // 4 x 64 in nvfp4
    writer.add("v.scales", e4m3, {4, 4});
    e4m3[1 * 4 + 3] = 0xFF;  // NaN in E4M3 at row 1, group 3
    writer.add("w.weight", std::vector<std::uint32_t>(4 * 8), {4, 8});
    writer.add("w.scales", e4m3, {4, 4});
    std::vector<std::uint32_t> e4m3_codes(4 * 16, 0x38383838u);  // 4 x 64 in mxfp8, every weight 1.0
    writer.add("f.weight", e4m3_codes, {4, 16});
    writer.add("f.scales", std::vector<std::uint8_t>(4 * 2, 127), {4, 2});
    e4m3_codes[3 * 16 + 5] = 0x38FF3838u;  // NaN in E4M3 at row 3, column 22
    writer.add("g.weight", e4m3_codes, {4, 16});
    writer.add("g.scales", std::vector<std::uint8_t>(4 * 2, 127), {4, 2});
    const auto bytes = writer.to_bytes();
    const auto file = SafetensorsFile::from_bytes(bytes, "layers.safetensors");

    CHECK(lowbit::load_mlx_linear(file, "p", 32, 4).input_dims() == 64);
    CHECK(lowbit::load_mlx_linear(file, "p", 32, 4).group_size() == 32);
    CHECK(std::string(lowbit::load_mlx_linear(file, "p", 32, 4, "affine").mode()) == "affine");
    CHECK(lowbit::load_mlx_linear_as<lowbit::MlxAffine<32, 4>>(file, "p").weight().scales == RowMatrixXf::Ones(4, 2));
    CHECK(std::string(lowbit::load_mlx_linear(file, "m", 32, 4, "mxfp4").mode()) == "mxfp4");
    CHECK(lowbit::load_mlx_linear(file, "m", 32, 4, "mxfp4").dequantize() == RowMatrixXf::Zero(4, 64));
    CHECK(std::string(lowbit::load_mlx_linear(file, "v", 16, 4, "nvfp4").mode()) == "nvfp4");
    CHECK(lowbit::load_mlx_linear(file, "v", 16, 4, "nvfp4").dequantize() == RowMatrixXf::Zero(4, 64));
    CHECK(std::string(lowbit::load_mlx_linear(file, "f", 32, 8, "mxfp8").mode()) == "mxfp8");
    CHECK(lowbit::load_mlx_linear(file, "f", 32, 8, "mxfp8").dequantize() == RowMatrixXf::Ones(4, 64));
    CHECK_THROWS_WITH(
        lowbit::load_mlx_linear(file, "p", 16, 4, "mxfp4"),
        ContainsSubstring("mode = mxfp4, group_size = 16, bits = 4 is not a supported format") &&
            ContainsSubstring(
                "affine (bits in {1, 2, 3, 4, 5, 6, 8}, group size in {32, 64, 128}, or bits in {2, 4, 6}, "
                "group size in {16}); "
                "mxfp4 (bits in {4}, group size in {32}); nvfp4 (bits in {4}, group "
                "size in {16}); mxfp8 (bits in {8}, group size in {32})"));
    const auto rejects = [](auto&& call, const std::vector<std::string>& parts) {
        try {
            call();
            FAIL("no exception");
        } catch (const std::invalid_argument& e) {
            INFO(e.what());
            for (const auto& part : parts) CHECK_THAT(std::string(e.what()), ContainsSubstring(part));
        }
    };
    rejects([&] { (void)lowbit::load_mlx_linear(file, "p", 64, 4); }, {"layers.safetensors", "'p.scales'", "[4, 1]"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "p", 128, 4); }, {"'p.weight'", "group size 128"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "p", 32, 7); }, {"bits = 7"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "x", 32, 4); }, {"'x.weight'", "missing"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "q", 32, 4); }, {"'q.biases'", "missing"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "r", 32, 4); }, {"'r.scales'", "I32"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "s", 32, 4); }, {"'s.weight'", "F32"});
    // Codes of one mode read as another: the scales' dtype tells them apart.
    rejects([&] { (void)lowbit::load_mlx_linear(file, "p", 32, 4, "mxfp4"); }, {"'p.scales'", "F32", "mxfp4 are U8"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "m", 32, 4, "affine"); }, {"'m.scales'", "U8", "not F32"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "n", 32, 4, "mxfp4"); },
            {"'n.scales'", "row 2, group 1", "is 255", "mxfp4"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "w", 16, 4, "nvfp4"); },
            {"'w.scales'", "row 1, group 3", "is 255", "nvfp4"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "g", 32, 8, "mxfp8"); },
            {"'g.weight'", "row 3, column 22", "is 255", "mxfp8"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "m", 16, 4, "nvfp4"); }, {"'m.scales'", "[4, 2]"});
    rejects([&] { (void)lowbit::load_mlx_linear(file, "v", 32, 4, "mxfp4"); }, {"'v.scales'", "[4, 4]"});
    rejects([&] { (void)lowbit::load_linear(file, "p"); }, {"'p.weight'", "U32"});
    rejects([&] { (void)lowbit::load_linear(file, "s"); }, {"'s.bias'", "[4, 1]"});
    SafetensorsWriter out;
    rejects([&] { lowbit::save_mlx_linear(out, "p", lowbit::load_mlx_linear(file, "p", 32, 4), Dtype::i8); }, {"I8"});
}
