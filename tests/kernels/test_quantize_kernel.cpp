// The vector MLX-affine group quantizer and word packer against their scalar references, bit for bit,
// for every supported format: random groups, groups built on exact RNE ties, constant groups (tiny and
// ordinary), all-zero groups with either sign of zero, single-sign groups, and groups holding NaN/Inf
// (the kernel must say so instead of quantizing).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/lowbit.hpp>

#include "support/random.hpp"

namespace {
namespace detail = lowbit::detail;
namespace simd = lowbit::detail::simd;

template <int GroupSize, int Bits>
void check_group(const std::vector<float>& values) {
    std::vector<std::int32_t> expected(GroupSize), actual(GroupSize, -1);
    const auto [scale, bias] = detail::reference::quantize_group<Bits>(values.data(), GroupSize, expected.data());
    float kernel_scale = 0.0f, kernel_bias = 0.0f;
    REQUIRE(detail::quantize_group<GroupSize, Bits>(values.data(), actual.data(), kernel_scale, kernel_bias));
    CHECK(std::bit_cast<std::uint32_t>(kernel_scale) == std::bit_cast<std::uint32_t>(scale));
    CHECK(std::bit_cast<std::uint32_t>(kernel_bias) == std::bit_cast<std::uint32_t>(bias));
    CHECK(actual == expected);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("quantize_group kernel equals the scalar MLX rule", "[quantize][kernels]",
                        lowbit::MlxAffineFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(400 + 10 * B + G / 32);
    std::uniform_real_distribution<float> value(-3.0f, 3.0f), offset(-2.0f, 2.0f);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> values(G);
        const float shift = trial % 3 == 0 ? 0.0f : offset(rng);
        for (float& v : values) v = value(rng) + shift;
        check_group<G, B>(values);
    }
    // Exact ties: values on half-steps of a grid whose ends are the extremes.
    for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> values(G);
        const int steps = (1 << B) - 1;
        for (int i = 0; i < G; ++i) values[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>((i * 7 + trial) % (2 * steps + 1));
        check_group<G, B>(values);
    }
    for (float c : {0.0f, -0.0f, 3e-8f, 5e-8f, 1e-7f, -0.75f, 1234.5f}) check_group<G, B>(std::vector<float>(G, c));
    std::vector<float> signed_zeros(G, 0.0f);
    for (int i = 0; i < G; i += 2) signed_zeros[static_cast<std::size_t>(i)] = -0.0f;
    check_group<G, B>(signed_zeros);

    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        std::vector<float> values(G, 0.5f);
        values[G - 3] = bad;
        std::vector<std::int32_t> codes(G);
        float scale = 0.0f, bias = 0.0f;
        CHECK_FALSE(detail::quantize_group<G, B>(values.data(), codes.data(), scale, bias));
    }

    // Packing: the row packer equals the block packer for any codes.
    std::uniform_int_distribution<int> code(0, (1 << B) - 1);
    for (std::size_t count : {std::size_t{32}, std::size_t{64}, std::size_t{96}, std::size_t{4096}, std::size_t{4128}}) {
        std::vector<std::int32_t> codes(count);
        for (auto& c : codes) c = code(rng);
        std::vector<std::uint32_t> expected(count * B / 32), actual(count * B / 32, 0xDEADBEEFu);
        detail::kernels::pack_codes<B>(codes.data(), count, expected.data());
        detail::pack_row_codes<B>(codes.data(), count, actual.data());
        CHECK(actual == expected);
    }
}

TEST_CASE("quantize reports the first NaN in row-major order whatever the thread count", "[quantize][errors][threads]") {
    lowbit::RowMatrixXf w = lowbit::RowMatrixXf::Random(600, 256);
    w(450, 17) = std::numeric_limits<float>::infinity();
    w(301, 200) = std::numeric_limits<float>::quiet_NaN();
    w(599, 0) = std::numeric_limits<float>::quiet_NaN();
    for (int threads : {1, 2, 3}) {
        lowbit::set_num_threads(threads);
        CHECK_THROWS_WITH((lowbit::quantize<64, 4>(w)),
                          "lowbit::quantize: weight at row 301, column 200 is nan (NaN and Inf cannot be quantized)");
    }
    lowbit::set_num_threads(0);
}
