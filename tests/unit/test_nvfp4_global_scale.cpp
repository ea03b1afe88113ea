// nvfp4 with MLX's per-tensor global scale (docs/numerics.md N17.6): quantize_nvfp4 and
// dequantize_nvfp4 bit for bit against MLX's CPU mx.quantize / mx.dequantize with global_scale, on
// float32, float16 and bfloat16 weights (golden data from tools/gen_mlx_dtype_golden.py), the global
// scale 2688 as no global scale at all, and the refusals.
#include <bit>
#include <cstdint>
#include <limits>
#include <span>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "data/mlx_dtype_golden.hpp"
#include "support/float_bits.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::RowMatrixXf;
using lowbit::test::bits_of;
namespace golden = lowbit::test::mlx_dtype_golden;

template <class T>
using RowMatrixOf = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct GlobalScaleGolden {
    std::uint32_t global_scale;
    std::span<const std::uint32_t> codes;
    std::span<const std::uint8_t> scales;
    std::span<const std::uint32_t> dequantized;
};

#define LOWBIT_GLOBAL_GOLDEN(prefix, index)                                                                   \
    GlobalScaleGolden {                                                                                       \
        golden::prefix##_nvfp4_global##index##_scale, golden::prefix##_nvfp4_global##index##_codes,           \
            golden::prefix##_nvfp4_global##index##_scales, golden::prefix##_nvfp4_global##index##_dequantized \
    }

template <class T, std::size_t Size>
RowMatrixOf<T> matrix_of(const std::uint16_t (&bits)[Size], Eigen::Index rows) {
    RowMatrixOf<T> m(rows, static_cast<Eigen::Index>(Size) / rows);
    for (std::size_t i = 0; i < Size; ++i) m.data()[i] = Eigen::numext::bit_cast<T>(bits[i]);
    return m;
}

template <class Derived>
void check_global_scale(const Eigen::MatrixBase<Derived>& w, const GlobalScaleGolden& expected) {
    const float global_scale = std::bit_cast<float>(expected.global_scale);
    INFO("global scale " << global_scale);
    const auto q = lowbit::quantize_nvfp4(w, global_scale);
    REQUIRE(static_cast<std::size_t>(q.codes.size()) == expected.codes.size());
    REQUIRE(static_cast<std::size_t>(q.scales.size()) == expected.scales.size());
    for (std::size_t i = 0; i < expected.codes.size(); ++i) {
        INFO("word " << i);
        CHECK(q.codes.data()[i] == expected.codes[i]);
    }
    for (std::size_t i = 0; i < expected.scales.size(); ++i) {
        INFO("group " << i);
        CHECK(int{q.scales.data()[i]} == int{expected.scales[i]});
    }
    const RowMatrixXf deq = lowbit::dequantize_nvfp4(q, global_scale);
    for (std::size_t i = 0; i < expected.dequantized.size(); ++i) {
        INFO("value " << i);
        CHECK(bits_of(deq.data()[i]) == expected.dequantized[i]);
    }
}

}  // namespace

TEST_CASE("nvfp4 with a global scale: codes, scale bytes and dequantized values as MLX", "[quantize][mlx][nvfp4]") {
    SECTION("float32 weights") {
        RowMatrixXf w(golden::f32_rows, golden::cols);
        for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = std::bit_cast<float>(golden::f32_weights[i]);
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(f32, 0));
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(f32, 1));
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(f32, 2));
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(f32, 3));
    }
    SECTION("float16 weights") {
        const RowMatrixOf<Eigen::half> w = matrix_of<Eigen::half>(golden::f16_weights, golden::f16_rows);
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(f16, 0));
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(f16, 1));
    }
    SECTION("bfloat16 weights") {
        const RowMatrixOf<Eigen::bfloat16> w = matrix_of<Eigen::bfloat16>(golden::bf16_weights, golden::bf16_rows);
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(bf16, 0));
        check_global_scale(w, LOWBIT_GLOBAL_GOLDEN(bf16, 1));
    }
}

TEST_CASE("nvfp4 with global scale 2688 is nvfp4 without one", "[quantize][nvfp4]") {
    RowMatrixXf w(golden::f32_rows, golden::cols);
    for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = std::bit_cast<float>(golden::f32_weights[i]);
    const auto plain = lowbit::quantize<lowbit::Nvfp4>(w);
    const auto global = lowbit::quantize_nvfp4(w, 2688.0f);
    CHECK(global.codes == plain.codes);
    CHECK(global.scales == plain.scales);
    const RowMatrixXf a = lowbit::dequantize(plain), b = lowbit::dequantize_nvfp4(global, 2688.0f);
    for (Eigen::Index i = 0; i < a.size(); ++i) CHECK(bits_of(a.data()[i]) == bits_of(b.data()[i]));
}

TEST_CASE("nvfp4 with a global scale refuses a scale that is not positive and finite, naming it",
          "[quantize][nvfp4][bad-input]") {
    const RowMatrixXf w = RowMatrixXf::Ones(2, 32);
    const auto q = lowbit::quantize_nvfp4(w, 1.0f);
    for (const float bad :
         {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 1e-38f}) {
        INFO("global scale " << bad);
        CHECK_THROWS_WITH(lowbit::quantize_nvfp4(w, bad), ContainsSubstring("lowbit::quantize_nvfp4: global_scale = "));
        CHECK_THROWS_WITH(lowbit::dequantize_nvfp4(q, bad),
                          ContainsSubstring("lowbit::dequantize_nvfp4: global_scale = "));
    }
    CHECK_THROWS_WITH(lowbit::quantize_nvfp4(w, -2.5f), ContainsSubstring("global_scale = -2.5"));
    RowMatrixXf with_nan = w;
    with_nan(1, 3) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH(lowbit::quantize_nvfp4(with_nan, 1.0f), ContainsSubstring("row 1, column 3 is nan"));
}
