// The nvfp4 format (docs/numerics.md N17): quantize and dequantize bit for bit against MLX's CPU
// mx.quantize / mx.dequantize (golden data from tools/gen_mlx_fp_golden.py: the mxfp4 weights read in
// groups of 16, plus E4M3 scale midpoints, saturation, scales that round to zero, E2M1 ties at several
// scales, every code under every scale byte), worked examples of the scale rule, the refusals, and the
// layer's f32 and int8 forward: test_float_modes.cpp.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "data/mlx_fp_golden.hpp"
#include "support/float_bits.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::Nvfp4;
using lowbit::RowMatrixXf;
using lowbit::test::bits_of;
using lowbit::test::float_matrix;
namespace golden = lowbit::test::mlx_fp_golden;

}  // namespace

TEST_CASE("nvfp4 quantize and dequantize are bit-identical to MLX CPU", "[quantize][mlx][nvfp4]") {
    RowMatrixXf w(golden::rows + golden::nvfp4_extra_rows, golden::cols);
    w << float_matrix(golden::weights, golden::rows),
        float_matrix(golden::nvfp4_extra_weights, golden::nvfp4_extra_rows);
    const auto q = lowbit::quantize<Nvfp4>(w);
    REQUIRE(q.codes.size() == static_cast<Eigen::Index>(std::size(golden::nvfp4_codes)));
    REQUIRE(q.scales.size() == static_cast<Eigen::Index>(std::size(golden::nvfp4_scales)));
    for (std::size_t i = 0; i < std::size(golden::nvfp4_codes); ++i) {
        INFO("word " << i << " (row " << i / 8 << ")");
        CHECK(q.codes.data()[i] == golden::nvfp4_codes[i]);
    }
    for (std::size_t i = 0; i < std::size(golden::nvfp4_scales); ++i) {
        INFO("group " << i << " (row " << i / 4 << ")");
        CHECK(int{q.scales.data()[i]} == int{golden::nvfp4_scales[i]});
    }
    const RowMatrixXf deq = lowbit::dequantize(q);
    for (std::size_t i = 0; i < std::size(golden::nvfp4_dequantized); ++i) {
        INFO("element " << i);
        CHECK(bits_of(deq.data()[i]) == golden::nvfp4_dequantized[i]);
    }
}

TEST_CASE("nvfp4 dequantize: every code under every scale byte as MLX, NaN under 0x7F and 0xFF",
          "[quantize][mlx][nvfp4]") {
    lowbit::QuantizedMatrixOf<Nvfp4> q;
    q.codes.resize(256, 4);
    q.scales.resize(256, 2);
    for (int s = 0; s < 256; ++s) {
        for (int word = 0; word < 4; ++word) q.codes(s, word) = word % 2 == 0 ? 0x76543210u : 0xFEDCBA98u;
        q.scales(s, 0) = q.scales(s, 1) = static_cast<std::uint8_t>(s);
    }
    const RowMatrixXf deq = lowbit::dequantize(q);
    for (std::size_t i = 0; i < std::size(golden::nvfp4_every_code_dequantized); ++i) {
        INFO("scale byte " << i / 32 << ", code " << i % 16);
        const float expected = std::bit_cast<float>(golden::nvfp4_every_code_dequantized[i]);
        if (std::isnan(expected))  // the NaN patterns: NaN on both sides (MLX's payload is not a contract)
            CHECK(std::isnan(deq.data()[i]));
        else
            CHECK(bits_of(deq.data()[i]) == golden::nvfp4_every_code_dequantized[i]);
    }
    CHECK(std::isnan(deq(0x7F, 0)));
    CHECK(std::isnan(deq(0xFF, 5)));
}

TEST_CASE("nvfp4 rules: the scale is amax / 6 rounded to E4M3, ties to even, saturating at 448", "[quantize][nvfp4]") {
    using lowbit::detail::e4m3_byte;
    CHECK(int{e4m3_byte(0.0f)} == 0);
    CHECK(int{e4m3_byte(1.0f)} == 0x38);
    CHECK(int{e4m3_byte(1.0625f)} == 0x38);  // halfway between 1 and 1.125: to even (1)
    CHECK(int{e4m3_byte(1.1875f)} == 0x3A);  // halfway between 1.125 and 1.25: to even (1.25)
    CHECK(int{e4m3_byte(std::nextafter(1.0625f, 2.0f))} == 0x39);
    CHECK(int{e4m3_byte(448.0f)} == 0x7E);
    CHECK(int{e4m3_byte(463.99f)} == 0x7E);
    CHECK(int{e4m3_byte(464.0f)} == 0x7E);  // never the NaN pattern 0x7F
    CHECK(int{e4m3_byte(std::numeric_limits<float>::max())} == 0x7E);
    CHECK(int{e4m3_byte(std::ldexp(1.0f, -6))} == 0x08);   // the smallest normal
    CHECK(int{e4m3_byte(std::ldexp(7.5f, -9))} == 0x08);   // the largest subnormal's midpoint: to even
    CHECK(int{e4m3_byte(std::ldexp(1.0f, -9))} == 0x01);   // the smallest subnormal
    CHECK(int{e4m3_byte(std::ldexp(1.0f, -10))} == 0x00);  // half of it: to even (0)
    CHECK(int{e4m3_byte(std::ldexp(1.5f, -9))} == 0x02);
    for (int byte = 0; byte < 0x7F; ++byte) {  // every finite E4M3 value rounds to itself
        INFO("byte " << byte);
        CHECK(int{e4m3_byte(lowbit::e4m3_value(static_cast<std::uint8_t>(byte)))} == byte);
    }
    CHECK(lowbit::e4m3_value(0x7E) == 448.0f);
    CHECK(std::isnan(lowbit::e4m3_value(0x7F)));
    CHECK(lowbit::e4m3_value(0xB8) == -1.0f);
    CHECK(lowbit::e4m3_value(0x01) == std::ldexp(1.0f, -9));
    // The decode rule: value * group_scale = E2M1 * E4M3.
    CHECK(Nvfp4::value(7) * Nvfp4::group_scale(0x38) == 6.0f);
    CHECK(Nvfp4::value(1) * Nvfp4::group_scale(0x01) == std::ldexp(0.5f, -9));
    // A group whose scale rounds to zero quantizes to code 0 everywhere, as in MLX.
    RowMatrixXf w = RowMatrixXf::Zero(1, 16);
    w(0, 0) = 1e-4f;
    w(0, 1) = -3e-5f;
    const auto q = lowbit::quantize<Nvfp4>(w);
    CHECK(int{q.scales(0, 0)} == 0);
    CHECK(q.codes(0, 0) == 0u);
    CHECK(q.codes(0, 1) == 0u);
}

TEST_CASE("nvfp4 quantize refuses NaN and Inf, naming where", "[quantize][errors][nvfp4]") {
    RowMatrixXf w = RowMatrixXf::Constant(3, 32, 0.5f);
    w(2, 20) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(lowbit::quantize<Nvfp4>(w), ContainsSubstring("row 2, column 20 is nan"));
    w(2, 20) = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(lowbit::quantize<Nvfp4>(w), ContainsSubstring("row 2, column 20 is inf"));
    CHECK_THROWS_WITH(lowbit::quantize<Nvfp4>(RowMatrixXf::Zero(2, 24)),
                      ContainsSubstring("in = 24 is not a multiple of GroupSize = 16"));
}
