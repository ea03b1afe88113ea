// The mxfp8 format (docs/numerics.md N18): quantize and dequantize bit for bit against MLX's CPU
// mx.quantize / mx.dequantize (golden data from tools/gen_mlx_fp_golden.py: the mxfp4 weights whose
// groups stay in E8M0's range, plus E4M3 ties at several scales, group exponent boundaries, signed
// zeros, the range's extremes, every code under several scale bytes), worked examples of the rule, the
// refusals, and the layer's f32 and int8 forward: test_float_modes.cpp.
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
using lowbit::Mxfp8;
using lowbit::RowMatrixXf;
using lowbit::test::bits_of;
using lowbit::test::float_matrix;
namespace golden = lowbit::test::mlx_fp_golden;

}  // namespace

TEST_CASE("mxfp8 quantize and dequantize are bit-identical to MLX CPU", "[quantize][mlx][mxfp8]") {
    RowMatrixXf w(golden::mxfp8_weight_rows + golden::mxfp8_extra_rows, golden::cols);
    w << float_matrix(golden::weights, golden::rows).topRows(golden::mxfp8_weight_rows),
        float_matrix(golden::mxfp8_extra_weights, golden::mxfp8_extra_rows);
    const auto q = lowbit::quantize<Mxfp8>(w);
    REQUIRE(q.codes.size() == static_cast<Eigen::Index>(std::size(golden::mxfp8_codes)));
    REQUIRE(q.scales.size() == static_cast<Eigen::Index>(std::size(golden::mxfp8_scales)));
    for (std::size_t i = 0; i < std::size(golden::mxfp8_codes); ++i) {
        INFO("word " << i << " (row " << i / 16 << ")");
        CHECK(q.codes.data()[i] == golden::mxfp8_codes[i]);
    }
    for (std::size_t i = 0; i < std::size(golden::mxfp8_scales); ++i) {
        INFO("group " << i << " (row " << i / 2 << ")");
        CHECK(int{q.scales.data()[i]} == int{golden::mxfp8_scales[i]});
    }
    const RowMatrixXf deq = lowbit::dequantize(q);
    for (std::size_t i = 0; i < std::size(golden::mxfp8_dequantized); ++i) {
        INFO("element " << i);
        CHECK(bits_of(deq.data()[i]) == golden::mxfp8_dequantized[i]);
    }
}

TEST_CASE("mxfp8 dequantize: every code under several scale bytes as MLX, but +-480 for the NaN codes",
          "[quantize][mlx][mxfp8]") {
    constexpr auto rows = static_cast<Eigen::Index>(std::size(golden::mxfp8_every_code_scale_bytes));
    lowbit::QuantizedMatrixOf<Mxfp8> q;
    q.codes.resize(rows, 64);
    q.scales.resize(rows, 8);
    for (Eigen::Index r = 0; r < rows; ++r) {
        for (std::uint32_t word = 0; word < 64; ++word)
            q.codes(r, word) = (4 * word) | (4 * word + 1) << 8 | (4 * word + 2) << 16 | (4 * word + 3) << 24;
        q.scales.row(r).setConstant(golden::mxfp8_every_code_scale_bytes[r]);
    }
    const RowMatrixXf deq = lowbit::dequantize(q);
    for (std::size_t i = 0; i < std::size(golden::mxfp8_every_code_dequantized); ++i) {
        const int code = static_cast<int>(i % 256), scale = golden::mxfp8_every_code_scale_bytes[i / 256];
        INFO("scale byte " << scale << ", code " << code);
        const float expected = std::bit_cast<float>(golden::mxfp8_every_code_dequantized[i]);
        if ((code & 0x7F) == 0x7F) {  // MLX: NaN; lowbit: the pattern's value (docs N18), the same sign
            CHECK(std::isnan(expected));
            CHECK(deq.data()[i] == std::ldexp(code == 0x7F ? 480.0f : -480.0f, scale - 127));
        } else {
            CHECK(bits_of(deq.data()[i]) == golden::mxfp8_every_code_dequantized[i]);
        }
    }
}

TEST_CASE("mxfp8 rules: exponent ceil(log2(amax / 448)), codes E4M3 of w / 2^E with their sign", "[quantize][mxfp8]") {
    // value is 2^9 times E4M3 and group_scale 2^(e - 136).
    CHECK(Mxfp8::value(0x7E) == 448.0f * 512.0f);
    CHECK(Mxfp8::value(0x38) == 512.0f);
    CHECK(Mxfp8::value(0x01) == 1.0f);
    CHECK(Mxfp8::value(0x81) == -1.0f);
    CHECK(bits_of(Mxfp8::value(0x80)) == bits_of(-0.0f));
    CHECK(Mxfp8::value(0x7F) == 480.0f * 512.0f);
    for (std::uint32_t code = 0; code < 256; ++code) {
        INFO("code " << code);
        if ((code & 0x7F) != 0x7F)
            CHECK(bits_of(Mxfp8::value(code)) == bits_of(lowbit::e4m3_value(static_cast<std::uint8_t>(code)) * 512.0f));
        CHECK(Mxfp8::is_valid_code(code) == ((code & 0x7F) != 0x7F));
    }
    CHECK(Mxfp8::group_scale(127) == std::ldexp(1.0f, -9));
    CHECK(Mxfp8::group_scale(0) == std::ldexp(1.0f, -136));
    CHECK(Mxfp8::group_scale(254) == std::ldexp(1.0f, 118));
    CHECK_FALSE(Mxfp8::is_valid_scale(255));
    // A group: amax 448 * 2^3 gives E = 3 (byte 130); one float ulp above gives E = 4 (byte 131).
    RowMatrixXf w = RowMatrixXf::Zero(1, 64);
    w(0, 0) = 448.0f * 8.0f;
    w(0, 1) = 17.0f * 8.0f;           // 17 is halfway between 16 and 18: to even (16), code 0x58
    w(0, 2) = -19.0f * 8.0f;          // halfway between 18 and 20: to even (20), code 0xDA
    w(0, 3) = -0.0f;                  // code 0x80
    w(0, 4) = -std::ldexp(1.0f, -8);  // w / 8 is 2^-11, below half the smallest subnormal: 0x80
    w(0, 32) = std::nextafter(448.0f * 8.0f, 1e9f);
    const auto q = lowbit::quantize<Mxfp8>(w);
    CHECK(int{q.scales(0, 0)} == 130);
    CHECK(int{q.scales(0, 1)} == 131);
    CHECK(q.codes(0, 0) == (0x7Eu | 0x58u << 8 | 0xDAu << 16 | 0x80u << 24));
    CHECK((q.codes(0, 1) & 0xFFu) == 0x80u);
    CHECK((q.codes(0, 8) & 0xFFu) == 0x76u);  // 3584.0002 / 16 = 224.00002: E4M3 224
    // An all-zero group: byte 127, codes 0.
    CHECK(int{lowbit::quantize<Mxfp8>(RowMatrixXf::Zero(1, 32)).scales(0, 0)} == 127);
}

TEST_CASE("mxfp8 quantize refuses NaN, Inf and groups below E8M0's range, naming where", "[quantize][errors][mxfp8]") {
    RowMatrixXf w = RowMatrixXf::Constant(3, 64, 0.5f);
    w(2, 40) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp8>(w), ContainsSubstring("row 2, column 40 is nan"));
    w(2, 40) = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp8>(w), ContainsSubstring("row 2, column 40 is inf"));
    w(2, 40) = 0.5f;
    w.row(1).segment(32, 32).setConstant(448.0f * std::ldexp(1.0f, -128));
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp8>(w),
                      ContainsSubstring("row 1, group 1 (columns 32 to 63) is too small for mxfp8"));
    w.row(1).segment(32, 32).setConstant(448.0f * std::ldexp(1.0f, -127));  // the smallest scale: accepted
    CHECK(int{lowbit::quantize<Mxfp8>(w).scales(1, 1)} == 0);
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp8>(RowMatrixXf::Zero(2, 48)),
                      ContainsSubstring("in = 48 is not a multiple of GroupSize = 32"));
}
