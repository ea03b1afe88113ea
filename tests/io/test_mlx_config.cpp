// Writing MLX's config.json quantization section (io/mlx_config.hpp): MlxQuantization::to_json in
// mlx_lm's layout, save_mlx_config over a base config, mlx_quantization of a bit allocation, and the
// round trip through read_mlx_config for every layer's format. Small on purpose: no layer kernels.
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/io/mlx_config.hpp>

#include <nlohmann/json.hpp>  // the JSON-typed API (with LOWBIT_EXTERN_IO the IO headers only declare it)

#include "io/io_support.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::LayerQuantization;
using lowbit::MlxQuantization;

nlohmann::json read_json(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str());
}

lowbit::LayerChoice choice(std::string name, int bits, int group_size) {
    lowbit::LayerChoice c;
    c.name = std::move(name);
    c.bits = bits;
    c.group_size = group_size;
    return c;
}

}  // namespace

TEST_CASE("MlxQuantization::to_json writes mlx_lm's layout", "[io]") {
    MlxQuantization q(LayerQuantization{64, 4});
    q.set_layer("model.layers.0.mlp.down_proj", LayerQuantization{32, 8});
    q.set_layer("lm_head", std::nullopt);
    const nlohmann::json expected = {
        {"group_size", 64}, {"bits", 4}, {"mode", "affine"},
        {"model.layers.0.mlp.down_proj", {{"group_size", 32}, {"bits", 8}, {"mode", "affine"}}},
        {"lm_head", false}};
    CHECK(q.to_json() == expected);
    CHECK(MlxQuantization().to_json().is_null());  // unquantized
    CHECK(MlxQuantization(LayerQuantization{128, 2}).to_json() ==
          nlohmann::json{{"group_size", 128}, {"bits", 2}, {"mode", "affine"}});
}

TEST_CASE("save_mlx_config round trips every layer's format through read_mlx_config", "[io]") {
    const lowbit::test::TempDir dir;
    const std::vector<int> bits{1, 2, 3, 4, 5, 6, 8}, groups{32, 64, 128};
    for (const int global_bits : {4, 3}) {
        MlxQuantization q(LayerQuantization{global_bits == 4 ? 64 : 128, global_bits});
        std::vector<std::pair<std::string, std::optional<LayerQuantization>>> layers;
        for (const int b : bits)
            for (const int g : groups) layers.emplace_back("model.layers." + std::to_string(b) + ".proj_" + std::to_string(g),
                                                           LayerQuantization{g, b});
        layers.emplace_back("lm_head", std::nullopt);
        for (const auto& [name, format] : layers) q.set_layer(name, format);
        const nlohmann::json base = {{"model_type", "llama"}, {"hidden_size", 64},
                                     {"quantization", {{"group_size", 32}, {"bits", 8}}},  // replaced
                                     {"quantization_config", "stale"}};
        lowbit::save_mlx_config(dir.path(), q, base);  // a directory: config.json inside it
        const auto file = dir / "config.json";
        const nlohmann::json written = read_json(file);
        CHECK(written["model_type"] == "llama");
        CHECK(written["hidden_size"] == 64);
        CHECK(written["quantization"] == q.to_json());
        CHECK(written["quantization_config"] == written["quantization"]);  // as mlx_lm's save_config
        const MlxQuantization back = lowbit::read_mlx_config(file);
        CHECK(back.global() == q.global());
        CHECK(back.overrides() == q.overrides());
        for (const auto& [name, format] : layers) CHECK(back.for_layer(name) == format);
        CHECK(back.for_layer("model.layers.0.self_attn.q_proj") == q.global());  // no override: the global one
    }
    // An unquantized model: both sections removed from the base.
    lowbit::save_mlx_config(dir / "plain.json", MlxQuantization(), {{"quantization", {{"bits", 4}}}, {"vocab_size", 10}});
    const nlohmann::json plain = read_json(dir / "plain.json");
    CHECK_FALSE(plain.contains("quantization"));
    CHECK_FALSE(plain.contains("quantization_config"));
    CHECK_FALSE(lowbit::read_mlx_config(dir / "plain.json").global().has_value());
}

TEST_CASE("mlx_quantization of a bit allocation: the most common format global, the others overridden", "[io]") {
    lowbit::BitAllocation allocation;
    allocation.choices = {choice("a.q_proj", 4, 64), choice("a.k_proj", 3, 32), choice("a.v_proj", 4, 64),
                          choice("a.o_proj", 8, 128)};
    const MlxQuantization q = lowbit::mlx_quantization(allocation);
    CHECK(q.global() == LayerQuantization{64, 4});
    CHECK(q.overrides().size() == 2);
    for (const auto& c : allocation.choices) CHECK(q.for_layer(c.name) == LayerQuantization{c.group_size, c.bits});
    // An explicit global format: every layer that differs is overridden.
    const MlxQuantization fixed = lowbit::mlx_quantization(allocation, LayerQuantization{32, 3});
    CHECK(fixed.overrides().size() == 3);
    for (const auto& c : allocation.choices) CHECK(fixed.for_layer(c.name) == LayerQuantization{c.group_size, c.bits});
    // Through the file.
    const lowbit::test::TempDir dir;
    lowbit::save_mlx_config(dir / "config.json", q);
    const MlxQuantization back = lowbit::read_mlx_config(dir.path());
    for (const auto& c : allocation.choices) CHECK(back.for_layer(c.name) == LayerQuantization{c.group_size, c.bits});
}

TEST_CASE("MLX config writing refuses what MLX could not read", "[io]") {
    CHECK_THROWS_WITH(MlxQuantization(LayerQuantization{64, 7}), ContainsSubstring("bits = 7"));
    MlxQuantization q(LayerQuantization{64, 4});
    CHECK_THROWS_WITH(q.set_layer("x", LayerQuantization{16, 4}), ContainsSubstring("group_size = 16"));
    CHECK_THROWS_WITH(q.set_layer("bits", LayerQuantization{64, 4}), ContainsSubstring("override key"));
    CHECK_THROWS_WITH(q.set_layer("", std::nullopt), ContainsSubstring("override key"));
    MlxQuantization no_global;
    no_global.set_layer("x", LayerQuantization{64, 4});
    CHECK_THROWS_WITH(no_global.to_json(), ContainsSubstring("no global format"));
    const lowbit::test::TempDir dir;
    CHECK_THROWS_WITH(lowbit::save_mlx_config(dir / "c.json", q, nlohmann::json::array()), ContainsSubstring("not a JSON object"));
    CHECK_THROWS_AS(lowbit::save_mlx_config(dir / "missing" / "c.json", q), std::runtime_error);
    lowbit::BitAllocation allocation;
    allocation.choices = {choice("a", 4, 64), choice("", 4, 64)};
    CHECK_THROWS_WITH(lowbit::mlx_quantization(allocation), ContainsSubstring("layer 1 has no name"));
    allocation.choices = {choice("a", 4, 64), choice("a", 3, 64)};
    CHECK_THROWS_WITH(lowbit::mlx_quantization(allocation), ContainsSubstring("two formats"));
}
