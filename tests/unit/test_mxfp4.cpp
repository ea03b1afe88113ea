// The mxfp4 format (docs/numerics.md N16): quantize and dequantize bit for bit against MLX's CPU
// mx.quantize / mx.dequantize (golden data from tools/gen_mlx_fp_golden.py: random groups, ties, signed
// zeros, constant groups, exponent boundaries, magnitudes near FLT_MAX and subnormal, every code under
// every scale byte), worked examples of the exponent and code rules, the refusals, and the layer's
// f32 and int8 forward: test_float_modes.cpp.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "data/mlx_fp_golden.hpp"
#include "support/float_bits.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::Mxfp4;
using lowbit::RowMatrixXf;
using lowbit::test::bits_of;
using lowbit::test::float_matrix;
namespace golden = lowbit::test::mlx_fp_golden;

}  // namespace

TEST_CASE("mxfp4 quantize and dequantize are bit-identical to MLX CPU", "[quantize][mlx][mxfp4]") {
    const RowMatrixXf w = float_matrix(golden::weights, golden::rows);
    const auto q = lowbit::quantize<Mxfp4>(w);
    REQUIRE(q.codes.size() == static_cast<Eigen::Index>(std::size(golden::mxfp4_codes)));
    REQUIRE(q.scales.size() == static_cast<Eigen::Index>(std::size(golden::mxfp4_scales)));
    for (std::size_t i = 0; i < std::size(golden::mxfp4_codes); ++i) {
        INFO("word " << i << " (row " << i / 8 << ")");
        CHECK(q.codes.data()[i] == golden::mxfp4_codes[i]);
    }
    for (std::size_t i = 0; i < std::size(golden::mxfp4_scales); ++i) {
        INFO("group " << i);
        CHECK(int{q.scales.data()[i]} == int{golden::mxfp4_scales[i]});
    }
    const RowMatrixXf deq = lowbit::dequantize(q);
    for (std::size_t i = 0; i < std::size(golden::mxfp4_dequantized); ++i) {
        INFO("element " << i);
        CHECK(bits_of(deq.data()[i]) == golden::mxfp4_dequantized[i]);
    }
}

TEST_CASE("mxfp4 dequantize: every code under every scale byte as MLX, -0 included", "[quantize][mlx][mxfp4]") {
    lowbit::QuantizedMatrixOf<Mxfp4> q;
    q.codes.resize(255, 4);
    q.scales.resize(255, 1);
    for (int e = 0; e < 255; ++e) {
        for (int word = 0; word < 4; ++word) q.codes(e, word) = word % 2 == 0 ? 0x76543210u : 0xFEDCBA98u;
        q.scales(e, 0) = static_cast<std::uint8_t>(e);
    }
    const RowMatrixXf deq = lowbit::dequantize(q);
    for (std::size_t i = 0; i < std::size(golden::mxfp4_every_code_dequantized); ++i) {
        INFO("scale byte " << i / 32 << ", code " << i % 16);
        CHECK(bits_of(deq.data()[i]) == golden::mxfp4_every_code_dequantized[i]);
    }
    CHECK(std::signbit(deq(127, 8)));  // code 8 is -0
}

TEST_CASE("mxfp4 rules: the exponent is ceil(log2(amax / 6)) exactly, codes tie toward zero", "[quantize][mxfp4]") {
    using lowbit::detail::e2m1_code;
    using lowbit::detail::mxfp4_exponent;
    CHECK(mxfp4_exponent(0.0f) == 0);
    CHECK(mxfp4_exponent(6.0f) == 0);
    CHECK(mxfp4_exponent(std::nextafter(6.0f, 7.0f)) == 1);  // one ulp above a power of two rounds up
    CHECK(mxfp4_exponent(7.0f) == 1);
    CHECK(mxfp4_exponent(12.0f) == 1);
    CHECK(mxfp4_exponent(3.0f) == -1);
    CHECK(mxfp4_exponent(6.0f * std::ldexp(1.0f, -127)) == -127);
    CHECK(mxfp4_exponent(std::numeric_limits<float>::max()) == 126);
    // Ties between neighbours go to the smaller magnitude (the first in table order).
    CHECK(e2m1_code(0.25f) == 0);
    CHECK(e2m1_code(0.75f) == 1);
    CHECK(e2m1_code(1.25f) == 2);
    CHECK(e2m1_code(2.5f) == 4);
    CHECK(e2m1_code(5.0f) == 6);
    CHECK(e2m1_code(-5.0f) == 14);
    CHECK(e2m1_code(-0.75f) == 9);
    CHECK(e2m1_code(std::nextafter(0.75f, 1.0f)) == 2);
    // -0 and small negatives give code 0 (+0), never 8.
    CHECK(e2m1_code(-0.0f) == 0);
    CHECK(e2m1_code(-0.25f) == 0);
    CHECK(e2m1_code(-0.2500001f) == 9);
    CHECK(e2m1_code(6.5f) == 7);
    CHECK(e2m1_code(-100.0f) == 15);
    // The decode rule: value * group_scale = E2M1 * 2^(e - 127).
    CHECK(Mxfp4::value(7) * Mxfp4::group_scale(127) == 6.0f);
    CHECK(Mxfp4::value(9) * Mxfp4::group_scale(128) == -1.0f);
    CHECK(Mxfp4::group_scale(0) == std::ldexp(1.0f, -128));
    CHECK(Mxfp4::group_scale(1) == std::ldexp(1.0f, -127));
    CHECK(Mxfp4::group_scale(2) == std::ldexp(1.0f, -126));
    CHECK(Mxfp4::group_scale(254) == std::ldexp(1.0f, 126));
}

TEST_CASE("mxfp4 quantize refuses NaN, Inf and groups below E8M0's range, naming where", "[quantize][errors][mxfp4]") {
    RowMatrixXf w = RowMatrixXf::Constant(3, 64, 0.5f);
    w(2, 40) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp4>(w), ContainsSubstring("row 2, column 40 is nan"));
    w(2, 40) = -std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp4>(w), ContainsSubstring("row 2, column 40 is -inf"));
    w(2, 40) = 0.5f;
    w.row(1).segment(32, 32).setConstant(1e-39f);
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp4>(w),
                      ContainsSubstring("row 1, group 1 (columns 32 to 63) is too small for mxfp4"));
    w.row(1).segment(32, 32).setConstant(6.0f * std::ldexp(1.0f, -127));  // the smallest scale: accepted
    CHECK(int{lowbit::quantize<Mxfp4>(w).scales(1, 1)} == 0);
    CHECK_THROWS_WITH(lowbit::quantize<Mxfp4>(RowMatrixXf::Zero(2, 48)),
                      ContainsSubstring("in = 48 is not a multiple of GroupSize = 32"));
}
