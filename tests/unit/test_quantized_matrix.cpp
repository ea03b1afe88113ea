// quantize / dequantize: bit-identity with MLX's CPU mx.quantize (golden data from tools/gen_mlx_golden.py),
// the worked examples N9.a-N9.c of docs/numerics.md, the round-trip bounds (N9.7), and bad input.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "data/mlx_golden.hpp"
#include "support/float_bits.hpp"
#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::RowMatrixXf;
using lowbit::test::bits_of;
using lowbit::test::float_matrix;

template <int GroupSize, int Bits, std::size_t WeightSize, std::size_t CodeSize, std::size_t ScaleSize>
void check_golden(const std::uint32_t (&weights)[WeightSize], const std::uint32_t (&codes)[CodeSize],
                  const std::uint32_t (&scales)[ScaleSize], const std::uint32_t (&biases)[ScaleSize]) {
    INFO("GroupSize = " << GroupSize << ", Bits = " << Bits);
    const RowMatrixXf w = float_matrix(weights, lowbit::test::mlx_golden::rows);
    const auto q = lowbit::quantize<GroupSize, Bits>(w);
    REQUIRE(q.codes.size() == static_cast<Eigen::Index>(CodeSize));
    REQUIRE(q.scales.size() == static_cast<Eigen::Index>(ScaleSize));
    for (std::size_t i = 0; i < CodeSize; ++i) {
        INFO("word " << i);
        CHECK(q.codes.data()[i] == codes[i]);
    }
    for (std::size_t i = 0; i < ScaleSize; ++i) {
        INFO("group " << i);
        CHECK(bits_of(q.scales.data()[i]) == scales[i]);
        CHECK(bits_of(q.biases.data()[i]) == biases[i]);
    }
}

#define LOWBIT_GOLDEN(G, B)                                                                                  \
    check_golden<G, B>(lowbit::test::mlx_golden::weights_g##G, lowbit::test::mlx_golden::codes_g##G##_b##B, \
                       lowbit::test::mlx_golden::scales_g##G##_b##B, lowbit::test::mlx_golden::biases_g##G##_b##B)

/// A group of 32 (the first values given, the rest zero), quantized at 4 bits with GroupSize 32.
lowbit::QuantizedMatrix<32, 4> quantize_group_of_32(const std::vector<float>& first) {
    RowMatrixXf w = RowMatrixXf::Zero(1, 32);
    for (std::size_t i = 0; i < first.size(); ++i) w(0, static_cast<Eigen::Index>(i)) = first[i];
    return lowbit::quantize<32, 4>(w);
}

template <int GroupSize, int Bits>
void check_round_trip_bounds(std::uint64_t salt) {
    INFO("GroupSize = " << GroupSize << ", Bits = " << Bits);
    auto rng = lowbit::test::make_rng(salt);
    const Eigen::Index rows = 7, cols = 3 * GroupSize;
    RowMatrixXf w(rows, cols);
    for (Eigen::Index r = 0; r < rows; ++r) {
        // Mixed-sign, all-positive, all-negative and tiny rows.
        const float low = r % 4 == 1 ? 0.5f : -2.0f, high = r % 4 == 2 ? -0.25f : 1.5f;
        const float factor = r % 4 == 3 ? 1e-6f : 1.0f;
        const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(cols), low, high);
        for (Eigen::Index c = 0; c < cols; ++c) w(r, c) = values[static_cast<std::size_t>(c)] * factor;
    }
    const auto q = lowbit::quantize<GroupSize, Bits>(w);
    const RowMatrixXf back = lowbit::dequantize(q);
    constexpr float n_bins = static_cast<float>((1 << Bits) - 1);
    for (Eigen::Index r = 0; r < rows; ++r)
        for (Eigen::Index g = 0; g < cols / GroupSize; ++g) {
            const auto group = w.row(r).segment(g * GroupSize, GroupSize);
            const float w_min = group.minCoeff(), w_max = group.maxCoeff();
            const float edge = std::abs(w_min) > std::abs(w_max) ? w_min : w_max;
            const double s = q.scales(r, g), b = q.biases(r, g);
            const double magnitude = std::max(std::abs(w_min), std::abs(w_max));
            const double slack = lowbit::test::quantization_rounding_slack(magnitude);
            const double grid_low = std::min(b, b + s * n_bins), grid_high = std::max(b, b + s * n_bins);
            for (Eigen::Index k = 0; k < GroupSize; ++k) {
                const Eigen::Index c = g * GroupSize + k;
                INFO("row " << r << ", column " << c << ", w = " << w(r, c) << ", back = " << back(r, c)
                            << ", scale = " << s << ", bias = " << b);
                const double error = std::abs(double(back(r, c)) - double(w(r, c)));
                if (w(r, c) == edge) CHECK(back(r, c) == edge);
                if (w(r, c) >= grid_low && w(r, c) <= grid_high) CHECK(error <= 0.5 * std::abs(s) + slack);
                else CHECK(error <= std::abs(s) + slack);
            }
        }
}

}  // namespace

TEST_CASE("quantize is bit-identical to MLX CPU mx.quantize for every bits and group size", "[quantize][mlx]") {
    LOWBIT_GOLDEN(32, 1);
    LOWBIT_GOLDEN(32, 2);
    LOWBIT_GOLDEN(32, 3);
    LOWBIT_GOLDEN(32, 4);
    LOWBIT_GOLDEN(32, 5);
    LOWBIT_GOLDEN(32, 6);
    LOWBIT_GOLDEN(32, 8);
    LOWBIT_GOLDEN(64, 1);
    LOWBIT_GOLDEN(64, 2);
    LOWBIT_GOLDEN(64, 3);
    LOWBIT_GOLDEN(64, 4);
    LOWBIT_GOLDEN(64, 5);
    LOWBIT_GOLDEN(64, 6);
    LOWBIT_GOLDEN(64, 8);
    LOWBIT_GOLDEN(128, 1);
    LOWBIT_GOLDEN(128, 2);
    LOWBIT_GOLDEN(128, 3);
    LOWBIT_GOLDEN(128, 4);
    LOWBIT_GOLDEN(128, 5);
    LOWBIT_GOLDEN(128, 6);
    LOWBIT_GOLDEN(128, 8);
}

TEST_CASE("quantize: N9.a, 4-bit mixed-sign group with RNE ties", "[quantize]") {
    const auto q = quantize_group_of_32({-1.0f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f, 1.5f});
    CHECK(q.codes(0, 0) == 0x04689ACFu);
    CHECK(q.codes(0, 1) == 0x99999999u);
    CHECK(q.codes(0, 2) == 0x99999999u);
    CHECK(q.codes(0, 3) == 0x99999999u);
    CHECK(bits_of(q.scales(0, 0)) == 0xBE2AAAABu);
    CHECK(q.biases(0, 0) == 1.5f);
    // MLX CPU's dequantized values (unfused fl(fl(s*q) + b)), as hexadecimal floats.
    const RowMatrixXf back = lowbit::dequantize(q);
    const float expected[9] = {-1.0f, -0.5f, -0x1.55556p-3f, 0.0f, 0x1.55555p-3f, 0.5f, 0x1.aaaaaap-1f, 1.5f, 0.0f};
    for (int i = 0; i < 9; ++i) {
        INFO("value " << i);
        CHECK(back(0, i) == expected[i]);
    }
}

TEST_CASE("quantize: N9.b, single-sign groups (CPU semantics)", "[quantize]") {
    RowMatrixXf w(2, 32);
    const float positive[4] = {1.0f, 1.5f, 2.0f, 1.25f}, negative[4] = {-2.0f, -1.5f, -1.0f, -1.25f};
    for (int i = 0; i < 32; ++i) {
        w(0, i) = positive[i % 4];
        w(1, i) = negative[i % 4];
    }
    const auto q = lowbit::quantize<32, 4>(w);
    CHECK(q.codes(0, 0) == 0xB07FB07Fu);  // codes [15, 7, 0, 11]
    CHECK(bits_of(q.scales(0, 0)) == 0xBD888889u);  // -0.06666667
    CHECK(q.biases(0, 0) == 2.0f);
    CHECK(q.codes(1, 0) == 0xBF70BF70u);  // codes [0, 7, 15, 11]
    CHECK(bits_of(q.scales(1, 0)) == 0x3D888889u);  // 0.06666667
    CHECK(q.biases(1, 0) == -2.0f);
    const RowMatrixXf back = lowbit::dequantize(q);
    CHECK(back(0, 2) == 2.0f);
    CHECK(back(1, 0) == -2.0f);
}

TEST_CASE("quantize: N9.c, all-zero and constant groups", "[quantize]") {
    RowMatrixXf w(3, 64);
    w.row(0).setZero();
    w.row(1).setConstant(3.0f);
    w.row(2).setConstant(0.1f);
    const auto q = lowbit::quantize<64, 4>(w);
    CHECK(q.scales(0, 0) == -1e-7f);
    CHECK(q.biases(0, 0) == 0.0f);
    CHECK(q.biases(1, 0) == 3.0f);
    CHECK(q.biases(2, 0) == 0.1f);
    for (Eigen::Index r = 0; r < 3; ++r) {
        CHECK(q.scales(r, 0) < 0.0f);
        CHECK((q.codes.row(r).array() == 0u).all());
    }
    const RowMatrixXf back = lowbit::dequantize(q);
    CHECK((back.row(0).array() == 0.0f).all());
    CHECK((back.row(1).array() == 3.0f).all());
    CHECK((back.row(2).array() == 0.1f).all());
}

TEST_CASE("dequantize(quantize(w)): exact at the larger-magnitude extreme, half a step inside the grid, "
          "one step at the clipped end",
          "[quantize]") {
    check_round_trip_bounds<32, 2>(21);
    check_round_trip_bounds<32, 3>(22);
    check_round_trip_bounds<64, 4>(23);
    check_round_trip_bounds<64, 5>(24);
    check_round_trip_bounds<128, 6>(25);
    check_round_trip_bounds<128, 8>(26);
    check_round_trip_bounds<32, 8>(27);
    check_round_trip_bounds<128, 4>(28);
}

TEST_CASE("quantize accepts either storage order and expressions", "[quantize]") {
    auto rng = lowbit::test::make_rng(31);
    const auto values = lowbit::test::uniform_floats(rng, 5 * 128, -1.0f, 1.0f);
    const RowMatrixXf row_major = Eigen::Map<const RowMatrixXf>(values.data(), 5, 128);
    const Eigen::MatrixXf col_major = row_major;
    const auto a = lowbit::quantize<64, 4>(row_major);
    const auto b = lowbit::quantize<64, 4>(col_major);
    const auto c = lowbit::quantize<64, 4>(2.0f * row_major - row_major);
    CHECK(a.codes == b.codes);
    CHECK(a.scales == b.scales);
    CHECK(a.codes == c.codes);
    CHECK(a.rows() == 5);
    CHECK(a.cols() == 128);
    CHECK(a.groups_per_row() == 2);
}

TEST_CASE("quantize and dequantize reject bad input", "[quantize][errors]") {
    SECTION("in not a multiple of GroupSize") {
        CHECK_THROWS_WITH((lowbit::quantize<64, 4>(RowMatrixXf::Zero(2, 100))),
                          ContainsSubstring("lowbit::quantize") && ContainsSubstring("100") &&
                              ContainsSubstring("64"));
    }
    SECTION("empty") {
        CHECK_THROWS_AS((lowbit::quantize<64, 4>(RowMatrixXf(0, 64))), std::invalid_argument);
        CHECK_THROWS_AS((lowbit::quantize<64, 4>(RowMatrixXf(3, 0))), std::invalid_argument);
    }
    SECTION("NaN and Inf name row and column") {
        RowMatrixXf w = RowMatrixXf::Zero(3, 64);
        w(1, 5) = std::numeric_limits<float>::quiet_NaN();
        CHECK_THROWS_WITH((lowbit::quantize<64, 4>(w)), ContainsSubstring("lowbit::quantize") &&
                                                          ContainsSubstring("row 1") && ContainsSubstring("column 5"));
        w(1, 5) = 0.0f;
        w(2, 63) = -std::numeric_limits<float>::infinity();
        CHECK_THROWS_WITH((lowbit::quantize<64, 8>(w)), ContainsSubstring("row 2") && ContainsSubstring("column 63"));
    }
    SECTION("mismatched codes, scales and biases") {
        auto q = lowbit::quantize<64, 4>(RowMatrixXf::Ones(2, 128));
        auto bad = q;
        bad.scales.resize(2, 3);
        CHECK_THROWS_WITH(lowbit::dequantize(bad), ContainsSubstring("lowbit::dequantize") && ContainsSubstring("2x3"));
        bad = q;
        bad.biases.resize(1, 2);
        CHECK_THROWS_AS(lowbit::dequantize(bad), std::invalid_argument);
        bad = q;
        bad.codes.resize(2, 17);
        CHECK_THROWS_AS(lowbit::dequantize(bad), std::invalid_argument);
        CHECK_THROWS_AS((lowbit::dequantize(lowbit::QuantizedMatrix<64, 4>{})), std::invalid_argument);
    }
}

TEST_CASE("The format list: supported formats, their text and the dispatch on mode, group size and bits",
          "[quantize][formats]") {
    CHECK(lowbit::is_supported_format("affine", 64, 4));
    CHECK(lowbit::is_supported_format("affine", 128, 8));
    CHECK_FALSE(lowbit::is_supported_format("affine", 64, 7));
    // lowbit's affine groups of 16 (for GGUF's k-quants), at 2, 4 and 6 bits only; not MLX formats.
    CHECK(lowbit::is_supported_format("affine", 16, 4));
    CHECK(lowbit::is_supported_format("affine", 16, 6));
    CHECK_FALSE(lowbit::is_supported_format("affine", 16, 3));
    CHECK_FALSE(lowbit::is_supported_format("affine", 16, 8));
    CHECK_FALSE(lowbit::is_mlx_format("affine", 16, 4));
    CHECK(lowbit::is_mlx_format("affine", 32, 4));
    CHECK(lowbit::is_mlx_format("nvfp4", 16, 4));
    CHECK(lowbit::supported_formats_text(true) ==
          "affine (bits in {1, 2, 3, 4, 5, 6, 8}, group size in {32, 64, 128}); mxfp4 (bits in {4}, group size in "
          "{32}); nvfp4 (bits in {4}, group size in {16}); mxfp8 (bits in {8}, group size in {32})");
    CHECK(lowbit::is_supported_format("mxfp4", 32, 4));
    CHECK_FALSE(lowbit::is_supported_format("mxfp4", 64, 4));
    CHECK(lowbit::is_supported_format("nvfp4", 16, 4));
    CHECK_FALSE(lowbit::is_supported_format("nvfp4", 32, 4));
    CHECK(lowbit::is_supported_format("mxfp8", 32, 8));
    CHECK_FALSE(lowbit::is_supported_format("mxfp8", 32, 4));
    static_assert(lowbit::is_supported_format("affine", 32, 3), "usable in constant expressions");
    CHECK(lowbit::supported_formats_text() ==
          "affine (bits in {1, 2, 3, 4, 5, 6, 8}, group size in {32, 64, 128}, or bits in {2, 4, 6}, group size in "
          "{16}); mxfp4 (bits in {4}, group size in {32}); "
          "nvfp4 (bits in {4}, group size in {16}); mxfp8 (bits in {8}, group size in {32})");
    int formats = 0;
    lowbit::detail::for_each_format([&]<class Format>(std::type_identity<Format>) {
        const auto [group, bits] = lowbit::dispatch_format(Format::mode, Format::group_size, Format::bits,
                                                           []<class Found>(std::type_identity<Found>) {
                                                               return std::pair{Found::group_size, Found::bits};
                                                           });
        CHECK(group == Format::group_size);
        CHECK(bits == Format::bits);
        ++formats;
    });
    CHECK(formats == static_cast<int>(std::tuple_size_v<lowbit::QuantizedFormats>));
    CHECK_THROWS_WITH(lowbit::dispatch_format("affine", 64, 7, [](auto) {}),
                      ContainsSubstring("mode = affine, group_size = 64, bits = 7 is not a supported format"));
    CHECK_THROWS_WITH(lowbit::dispatch_format("nvfp4", 32, 4, [](auto) {}), ContainsSubstring("mode = nvfp4"));
}

TEST_CASE("quantize<Format> is quantize<GroupSize, Bits>, and view() describes the matrix", "[quantize][formats]") {
    auto rng = lowbit::test::make_rng(7100);
    const RowMatrixXf w = lowbit::test::random_weights(rng, 5, 96);
    const auto by_format = lowbit::quantize<lowbit::MlxAffine<32, 3>>(w);
    const auto by_pair = lowbit::quantize<32, 3>(w);
    CHECK(by_format.codes == by_pair.codes);
    CHECK(by_format.scales == by_pair.scales);
    CHECK(by_format.biases == by_pair.biases);
    CHECK_THROWS_WITH((lowbit::quantize<lowbit::MlxAffine<32, 3>>(RowMatrixXf::Zero(2, 40))),
                      ContainsSubstring("in = 40 is not a multiple of GroupSize = 32"));
    const auto view = by_format.view();
    CHECK(view.rows() == 5);
    CHECK(view.cols() == 96);
    CHECK(view.groups_per_row() == 3);
    CHECK(view.codes.data() == by_format.codes.data());
    CHECK(view.codes.stride() == 9);  // 96 codes of 3 bits: 9 words a row
    CHECK(&view.codes(4, 8) == &by_format.codes(4, 8));
    CHECK(&view.scales(4, 2) == &by_format.scales(4, 2));
    CHECK(&view.biases(4, 2) == &by_format.biases(4, 2));
}
