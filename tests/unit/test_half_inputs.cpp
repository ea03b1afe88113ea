// quantize on Eigen::half and Eigen::bfloat16 weights and dequantize into those types (docs/numerics.md
// N19), bit for bit against MLX's CPU mx.quantize / mx.dequantize on float16 and bfloat16 arrays
// (golden data from tools/gen_mlx_dtype_golden.py: random groups at many magnitudes, the groups where
// the dtype changes MLX's result, and every positive finite value of the dtype as a group's largest
// magnitude in each float mode), and the refusals the narrower types add.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "data/mlx_dtype_golden.hpp"
#include "support/float_bits.hpp"

namespace {

using Catch::Matchers::ContainsSubstring;
using lowbit::RowMatrixXf;
namespace golden = lowbit::test::mlx_dtype_golden;

template <class T>
using RowMatrixOf = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The 16-bit pattern of a half or bfloat16 value, and the value of one.
template <class T>
std::uint16_t bits16(T value) {
    return Eigen::numext::bit_cast<std::uint16_t>(value);
}
template <class T>
T from_bits16(std::uint16_t bits) {
    return Eigen::numext::bit_cast<T>(bits);
}

template <class T>
RowMatrixOf<T> matrix_of(std::span<const std::uint16_t> bits, Eigen::Index rows) {
    RowMatrixOf<T> m(rows, static_cast<Eigen::Index>(bits.size()) / rows);
    for (std::size_t i = 0; i < bits.size(); ++i) m.data()[i] = from_bits16<T>(bits[i]);
    return m;
}

/// One dtype's golden arrays.
struct AffineGolden {
    std::span<const std::uint32_t> codes;
    std::span<const std::uint16_t> scales, biases, dequantized;
};
struct FloatModeGolden {
    std::span<const std::uint32_t> codes;
    std::span<const std::uint8_t> scales;
    std::span<const std::uint16_t> dequantized;
};
struct SweepGolden {
    std::span<const std::uint16_t> starts, scales;
    std::span<const std::uint8_t> codes;
    std::uint16_t end;
};

template <class T>
struct Golden;

#define LOWBIT_AFFINE_GOLDEN(prefix, g, b)                                                    \
    AffineGolden {                                                                            \
        golden::prefix##_g##g##_b##b##_codes, golden::prefix##_g##g##_b##b##_scales,          \
            golden::prefix##_g##g##_b##b##_biases, golden::prefix##_g##g##_b##b##_dequantized \
    }
#define LOWBIT_DTYPE_GOLDEN(T, prefix)                                                                                \
    template <>                                                                                                       \
    struct Golden<T> {                                                                                                \
        static constexpr const char* name = #prefix;                                                                  \
        static constexpr int rows = golden::prefix##_rows;                                                            \
        static std::span<const std::uint16_t> weights() { return golden::prefix##_weights; }                          \
        static AffineGolden affine(int group, int bits) {                                                             \
            if (group == 64 && bits == 4) return LOWBIT_AFFINE_GOLDEN(prefix, 64, 4);                                 \
            if (group == 32 && bits == 8) return LOWBIT_AFFINE_GOLDEN(prefix, 32, 8);                                 \
            if (group == 128 && bits == 3) return LOWBIT_AFFINE_GOLDEN(prefix, 128, 3);                               \
            if (group == 64 && bits == 1) return LOWBIT_AFFINE_GOLDEN(prefix, 64, 1);                                 \
            if (group == 32 && bits == 2) return LOWBIT_AFFINE_GOLDEN(prefix, 32, 2);                                 \
            return LOWBIT_AFFINE_GOLDEN(prefix, 64, 6);                                                               \
        }                                                                                                             \
        static FloatModeGolden mxfp4() {                                                                              \
            return {golden::prefix##_mxfp4_codes, golden::prefix##_mxfp4_scales, golden::prefix##_mxfp4_dequantized}; \
        }                                                                                                             \
        static FloatModeGolden nvfp4() {                                                                              \
            return {golden::prefix##_nvfp4_codes, golden::prefix##_nvfp4_scales, golden::prefix##_nvfp4_dequantized}; \
        }                                                                                                             \
        static FloatModeGolden mxfp8() {                                                                              \
            return {golden::prefix##_mxfp8_codes, golden::prefix##_mxfp8_scales, golden::prefix##_mxfp8_dequantized}; \
        }                                                                                                             \
        static SweepGolden mxfp4_sweep() {                                                                            \
            return {golden::prefix##_mxfp4_sweep_starts, golden::prefix##_mxfp4_sweep_scales,                         \
                    golden::prefix##_mxfp4_sweep_codes, golden::prefix##_mxfp4_sweep_end};                            \
        }                                                                                                             \
        static SweepGolden nvfp4_sweep() {                                                                            \
            return {golden::prefix##_nvfp4_sweep_starts, golden::prefix##_nvfp4_sweep_scales,                         \
                    golden::prefix##_nvfp4_sweep_codes, golden::prefix##_nvfp4_sweep_end};                            \
        }                                                                                                             \
        static SweepGolden mxfp8_sweep() {                                                                            \
            return {golden::prefix##_mxfp8_sweep_starts, golden::prefix##_mxfp8_sweep_scales,                         \
                    golden::prefix##_mxfp8_sweep_codes, golden::prefix##_mxfp8_sweep_end};                            \
        }                                                                                                             \
    };
LOWBIT_DTYPE_GOLDEN(Eigen::half, f16)
LOWBIT_DTYPE_GOLDEN(Eigen::bfloat16, bf16)
#undef LOWBIT_DTYPE_GOLDEN
#undef LOWBIT_AFFINE_GOLDEN

template <class T, int GroupSize, int Bits>
void check_affine() {
    using G = Golden<T>;
    INFO(G::name << " GroupSize " << GroupSize << " Bits " << Bits);
    const RowMatrixOf<T> w = matrix_of<T>(G::weights(), G::rows);
    const AffineGolden expected = G::affine(GroupSize, Bits);
    const auto q = lowbit::quantize<GroupSize, Bits>(w);
    REQUIRE(static_cast<std::size_t>(q.codes.size()) == expected.codes.size());
    REQUIRE(static_cast<std::size_t>(q.scales.size()) == expected.scales.size());
    for (std::size_t i = 0; i < expected.codes.size(); ++i) {
        INFO("word " << i);
        CHECK(q.codes.data()[i] == expected.codes[i]);
    }
    for (std::size_t i = 0; i < expected.scales.size(); ++i) {
        INFO("group " << i);
        // The float scales and biases hold values of T: exactly MLX's.
        CHECK(bits16(T(q.scales.data()[i])) == expected.scales[i]);
        CHECK(static_cast<float>(T(q.scales.data()[i])) == q.scales.data()[i]);
        CHECK(bits16(T(q.biases.data()[i])) == expected.biases[i]);
        CHECK(static_cast<float>(T(q.biases.data()[i])) == q.biases.data()[i]);
    }
    const RowMatrixOf<T> deq = lowbit::dequantize<T>(q);
    for (std::size_t i = 0; i < expected.dequantized.size(); ++i) {
        INFO("value " << i);
        CHECK(bits16(deq.data()[i]) == expected.dequantized[i]);
    }
}

template <class T, class Format>
void check_float_mode(const FloatModeGolden& expected) {
    using G = Golden<T>;
    INFO(G::name << " " << Format::mode);
    const RowMatrixOf<T> w = matrix_of<T>(G::weights(), G::rows);
    const auto q = lowbit::quantize<Format>(w);
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
    const RowMatrixOf<T> deq = lowbit::dequantize<T>(q);
    for (std::size_t i = 0; i < expected.dequantized.size(); ++i) {
        INFO("value " << i);
        CHECK(bits16(deq.data()[i]) == expected.dequantized[i]);
    }
    // The float values are the exact ones, which round to MLX's in T.
    const RowMatrixXf exact = lowbit::dequantize(q);
    for (Eigen::Index i = 0; i < exact.size(); ++i) CHECK(bits16(T(exact.data()[i])) == bits16(deq.data()[i]));
}

/// Every positive finite value a of T as the largest magnitude of the group [a, 0, ..., 0]: the scale
/// byte and the code of a, run by run as MLX gives them; a run MLX stores with a wrapped exponent
/// (byte 256 in the golden) is refused, naming row and group.
template <class T, class Format>
void check_sweep(const SweepGolden& sweep) {
    INFO(Golden<T>::name << " " << Format::mode);
    constexpr int group = Format::group_size;
    const auto run_end = [&](std::size_t run) {
        return run + 1 < sweep.starts.size() ? sweep.starts[run + 1] : sweep.end;
    };
    // Rows of the stored values, one per value; the refused runs checked by their end points.
    Eigen::Index stored = 0;
    for (std::size_t run = 0; run < sweep.starts.size(); ++run)
        if (sweep.scales[run] != 256) stored += run_end(run) - sweep.starts[run];
    RowMatrixOf<T> w = RowMatrixOf<T>::Zero(stored, group);
    Eigen::Index row = 0;
    for (std::size_t run = 0; run < sweep.starts.size(); ++run) {
        if (sweep.scales[run] == 256) {
            for (const std::uint16_t bits : {sweep.starts[run], static_cast<std::uint16_t>(run_end(run) - 1)}) {
                RowMatrixOf<T> one = RowMatrixOf<T>::Zero(1, group);
                one(0, 0) = from_bits16<T>(bits);
                INFO("value bits " << bits);
                CHECK_THROWS_WITH(lowbit::quantize<Format>(one),
                                  ContainsSubstring("row 0, group 0") && ContainsSubstring("is too small for"));
            }
            continue;
        }
        for (unsigned bits = sweep.starts[run]; bits < run_end(run); ++bits) w(row++, 0) = from_bits16<T>(bits);
    }
    const auto q = lowbit::quantize<Format>(w);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(group));
    row = 0;
    for (std::size_t run = 0; run < sweep.starts.size(); ++run) {
        if (sweep.scales[run] == 256) continue;
        for (unsigned bits = sweep.starts[run]; bits < run_end(run); ++bits, ++row) {
            lowbit::detail::kernels::unpack_codes<Format::bits>(&q.codes(row, 0), codes.size(), codes.data());
            if (int{q.scales(row, 0)} != int{sweep.scales[run]} || codes[0] != sweep.codes[run]) {
                INFO("value bits " << bits << " (" << static_cast<float>(from_bits16<T>(bits)) << "): scale byte "
                                   << int{q.scales(row, 0)} << ", code " << int{codes[0]});
                CHECK(int{q.scales(row, 0)} == int{sweep.scales[run]});
                CHECK(int{codes[0]} == int{sweep.codes[run]});
            }
        }
    }
    CHECK(row == stored);
}

}  // namespace

TEMPLATE_TEST_CASE("quantize on half and bfloat16 weights: affine codes, scales, biases and dequantized values as MLX",
                   "[quantize][mlx][dtype]", Eigen::half, Eigen::bfloat16) {
    check_affine<TestType, 64, 4>();
    check_affine<TestType, 32, 8>();
    check_affine<TestType, 128, 3>();
    check_affine<TestType, 64, 1>();
    check_affine<TestType, 32, 2>();
    check_affine<TestType, 64, 6>();
}

TEMPLATE_TEST_CASE("quantize on half and bfloat16 weights: mxfp4, nvfp4 and mxfp8 as MLX", "[quantize][mlx][dtype]",
                   Eigen::half, Eigen::bfloat16) {
    using G = Golden<TestType>;
    check_float_mode<TestType, lowbit::Mxfp4>(G::mxfp4());
    check_float_mode<TestType, lowbit::Nvfp4>(G::nvfp4());
    check_float_mode<TestType, lowbit::Mxfp8>(G::mxfp8());
}

TEMPLATE_TEST_CASE("quantize on half and bfloat16 weights: every largest magnitude's scale and code as MLX",
                   "[quantize][mlx][dtype]", Eigen::half, Eigen::bfloat16) {
    using G = Golden<TestType>;
    check_sweep<TestType, lowbit::Mxfp4>(G::mxfp4_sweep());
    check_sweep<TestType, lowbit::Nvfp4>(G::nvfp4_sweep());
    check_sweep<TestType, lowbit::Mxfp8>(G::mxfp8_sweep());
}

TEST_CASE("quantize on half weights: worked examples of the dtype's own rounding", "[quantize][dtype]") {
    using half = Eigen::half;
    RowMatrixOf<half> w = RowMatrixOf<half>::Zero(1, 32);
    // mxfp8: amax 0.00684 gives amax / 448 = 1.527e-5, a half subnormal that rounds to 256 * 2^-24 =
    // 2^-16 exactly, so E = -16 (byte 111) where float32 weights get E = -15 (byte 112).
    w(0, 0) = half(0.00684f);
    CHECK(int{lowbit::quantize<lowbit::Mxfp8>(w).scales(0, 0)} == 111);
    CHECK(int{lowbit::quantize<lowbit::Mxfp8>(RowMatrixXf(w.cast<float>())).scales(0, 0)} == 112);
    // A quotient below half the smallest half subnormal rounds to 0: exponent 0 (byte 127), codes 0.
    w(0, 0) = half(1e-5f);
    const auto tiny = lowbit::quantize<lowbit::Mxfp8>(w);
    CHECK(int{tiny.scales(0, 0)} == 127);
    CHECK(tiny.codes(0, 0) == 0u);
    CHECK(lowbit::dequantize(tiny)(0, 0) == 0.0f);
    // Affine 1-bit: a group spanning more than 65520 has a scale beyond half's range.
    w(0, 0) = half(-65504.0f);
    w(0, 1) = half(65504.0f);
    CHECK_THROWS_WITH((lowbit::quantize<32, 1>(w)), ContainsSubstring("row 0, group 0") &&
                                                        ContainsSubstring("overflows") &&
                                                        ContainsSubstring("(float16 weights)"));
    CHECK_NOTHROW((lowbit::quantize<32, 1>(RowMatrixXf(w.cast<float>()))));
    // NaN and Inf are refused as for float weights.
    w(0, 1) = std::numeric_limits<half>::infinity();
    CHECK_THROWS_WITH(lowbit::quantize<lowbit::Nvfp4>(w), ContainsSubstring("row 0, column 1 is inf"));
}

TEST_CASE("dequantize into half: values beyond half's range are infinite, zeros stay zero", "[quantize][dtype]") {
    RowMatrixXf w = RowMatrixXf::Zero(1, 32);
    w(0, 0) = 1e6f;
    w(0, 2) = -3e5f;
    const auto q = lowbit::quantize<lowbit::Mxfp8>(w);
    const RowMatrixOf<Eigen::half> deq = lowbit::dequantize<Eigen::half>(q);
    CHECK(static_cast<float>(deq(0, 0)) == std::numeric_limits<float>::infinity());
    CHECK(static_cast<float>(deq(0, 2)) == -std::numeric_limits<float>::infinity());
    CHECK(static_cast<float>(deq(0, 1)) == 0.0f);
    const RowMatrixOf<Eigen::bfloat16> deq_bf16 = lowbit::dequantize<Eigen::bfloat16>(q);
    CHECK(static_cast<float>(deq_bf16(0, 0)) == static_cast<float>(Eigen::bfloat16(lowbit::dequantize(q)(0, 0))));
}
