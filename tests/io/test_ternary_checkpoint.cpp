// TernaryLinear in safetensors (io/ternary_checkpoint.hpp): save then load gives the same layer and the
// same outputs bit for bit (both formats, both scale modes, with and without bias); files holding the
// unused fourth value (I2 code 3, TQ1 byte >= 243), wrong dtypes or shapes, or no codes are refused with
// errors naming the tensor.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/io/ternary_checkpoint.hpp>
#include <lowbit/lowbit.hpp>

#include "io/io_support.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::RowMatrixXf;
using lowbit::TernaryFormat;

/// The file of one layer with its codes tensor replaced by `codes` (U8 [out, row_bytes]).
std::vector<std::byte> file_with_codes(const lowbit::TernaryLinear& layer, const std::vector<std::uint8_t>& codes) {
    lowbit::SafetensorsWriter writer;
    writer.add(std::string("layer.ternary_") + lowbit::ternary_format_name(layer.format()), codes,
               {static_cast<std::uint64_t>(layer.out_features()), static_cast<std::uint64_t>(layer.row_bytes())});
    writer.add("layer.in_features", std::vector<std::int64_t>{layer.in_features()}, {1});
    writer.add("layer.scales", layer.scales());
    return writer.to_bytes();
}

}  // namespace

TEST_CASE("Ternary checkpoint: save and load round trip bit for bit", "[io][ternary]") {
    auto rng = lowbit::test::make_rng(1600);
    const lowbit::test::TempDir dir;
    for (const auto mode : {lowbit::TernaryScales::per_tensor, lowbit::TernaryScales::per_group})
        for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1})
            for (const bool with_bias : {false, true}) {
                std::optional<Eigen::VectorXf> bias;
                if (with_bias) bias = Eigen::VectorXf::Random(7);
                const lowbit::TernaryLinear layer =
                    lowbit::BitLinear(lowbit::test::random_weights(rng, 7, 384), bias, mode).deploy(format);
                lowbit::SafetensorsWriter writer;
                lowbit::save_ternary_linear(writer, "blocks.0.mlp", layer);
                const auto path = dir.path() / "ternary.safetensors";
                writer.write(path);
                const lowbit::SafetensorsFile file = lowbit::SafetensorsFile::open(path);
                const lowbit::TernaryLinear loaded = lowbit::load_ternary_linear(file, "blocks.0.mlp");
                CHECK(loaded.format() == format);
                CHECK(loaded.per_tensor() == layer.per_tensor());
                CHECK(loaded.packed_codes() == layer.packed_codes());
                CHECK(loaded.scales() == layer.scales());
                CHECK(loaded.bias().has_value() == with_bias);
                const RowMatrixXf x = lowbit::test::random_weights(rng, 5, 384);
                CHECK(lowbit::test::first_matrix_difference(loaded.forward(x), layer.forward(x)) == -1);
            }
}

TEST_CASE("Ternary checkpoint: the unused fourth value and malformed tensors are refused", "[io][ternary]") {
    auto rng = lowbit::test::make_rng(1610);
    const lowbit::TernaryLinear i2 =
        lowbit::BitLinear(lowbit::test::random_weights(rng, 3, 100)).deploy(TernaryFormat::i2);
    std::vector<std::uint8_t> codes = i2.file_bytes();
    codes[64 + 10] |= 0xC0;  // field 3 of row 1, byte 10 = 3
    {
        const auto bytes = file_with_codes(i2, codes);
        const lowbit::SafetensorsFile file = lowbit::SafetensorsFile::from_bytes(bytes, "bad-i2");
        CHECK_THROWS_WITH(lowbit::load_ternary_linear(file, "layer"), ContainsSubstring("layer.ternary_i2") &&
                                                                          ContainsSubstring("row 1, byte 10") &&
                                                                          ContainsSubstring("code 3"));
    }
    const lowbit::TernaryLinear tq1 =
        lowbit::BitLinear(lowbit::test::random_weights(rng, 3, 100)).deploy(TernaryFormat::tq1);
    codes = tq1.file_bytes();
    codes[2 * 64 + 63] = 250;
    {
        const auto bytes = file_with_codes(tq1, codes);
        const lowbit::SafetensorsFile file = lowbit::SafetensorsFile::from_bytes(bytes, "bad-tq1");
        CHECK_THROWS_WITH(
            lowbit::load_ternary_linear(file, "layer"),
            ContainsSubstring("layer.ternary_tq1") && ContainsSubstring("TQ1 byte 250 in row 2, byte 63"));
    }
    {
        codes.resize(2 * 96);  // a shape that disagrees with in_features
        lowbit::SafetensorsWriter writer;
        writer.add("layer.ternary_tq1", codes, {2, 96});
        writer.add("layer.in_features", std::vector<std::int64_t>{100}, {1});
        writer.add("layer.scales", RowMatrixXf::Ones(1, 1));
        const auto bytes = writer.to_bytes();
        const lowbit::SafetensorsFile file = lowbit::SafetensorsFile::from_bytes(bytes, "bad-shape");
        CHECK_THROWS_WITH(lowbit::load_ternary_linear(file, "layer"), ContainsSubstring("[2, 96]"));
        CHECK_THROWS_WITH(lowbit::load_ternary_linear(file, "other"),
                          ContainsSubstring("other.ternary_i2") && ContainsSubstring("missing"));
    }
}
