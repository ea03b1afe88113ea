// The xsimd compatibility shim against plain loops, and proof that this build's SIMD path is live.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/simd.hpp>

#include "support/compare.hpp"
#include "support/random.hpp"

namespace simd = lowbit::detail::simd;

TEST_CASE("simd::enabled matches how this test binary was built", "[simd]") {
#if defined(LOWBIT_FORCE_SCALAR)
    CHECK_FALSE(simd::enabled);
#elif defined(__x86_64__) || defined(__aarch64__)
    // Every x86-64 has SSE2 and every AArch64 has NEON: the vector path must be the one compiled.
    CHECK(simd::enabled);
#endif
    UNSCOPED_INFO("architecture " << simd::arch::name() << ", " << simd::width<float> << " float lanes");
    CHECK(simd::width<float> >= 1);
}

#if !defined(LOWBIT_FORCE_SCALAR)
TEST_CASE("simd reductions equal the scalar loop", "[simd]") {
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    auto rng = lowbit::test::make_rng(1);
    for (int trial = 0; trial < 200; ++trial) {
        // Small integers: every summation order gives the same exact float.
        std::vector<float> values = lowbit::test::uniform_floats(rng, lanes, -1000.0f, 1000.0f);
        for (auto& value : values) value = static_cast<float>(static_cast<int>(value));
        const batch loaded = batch::load_unaligned(values.data());
        CHECK(simd::reduce_add(loaded) == std::accumulate(values.begin(), values.end(), 0.0f));
        CHECK(simd::reduce_max(loaded) == *std::max_element(values.begin(), values.end()));
        CHECK(simd::reduce_min(loaded) == *std::min_element(values.begin(), values.end()));
    }
}

TEST_CASE("simd::reduce_min_each and reduce_max_each put row r's extreme in lane r", "[simd]") {
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    auto rng = lowbit::test::make_rng(3);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> values = lowbit::test::uniform_floats(rng, lanes * lanes, -1000.0f, 1000.0f);
        // Trial 0 and 1 put row r's extremes in lane r and in lane lanes - 1 - r: every lane position feeds
        // every result lane.
        if (trial < 2) {
            for (std::size_t r = 0; r < lanes; ++r) {
                const std::size_t at = trial == 0 ? r : lanes - 1 - r;
                values[r * lanes + at] = -2000.0f - static_cast<float>(r);
                values[r * lanes + (at + 1) % lanes] = 2000.0f + static_cast<float>(r);
            }
        }
        std::array<batch, lanes> rows;
        for (std::size_t r = 0; r < lanes; ++r) rows[r] = batch::load_unaligned(values.data() + r * lanes);
        std::array<float, 64> smallest{}, largest{};
        simd::reduce_min_each(rows.data()).store_unaligned(smallest.data());
        simd::reduce_max_each(rows.data()).store_unaligned(largest.data());
        for (std::size_t r = 0; r < lanes; ++r) {
            INFO("trial " << trial << ", row " << r);
            const auto row = values.begin() + static_cast<std::ptrdiff_t>(r * lanes);
            CHECK(smallest[r] == *std::min_element(row, row + lanes));
            CHECK(largest[r] == *std::max_element(row, row + lanes));
        }
    }
}

TEST_CASE("simd::reduce_add_each puts reduce_add of row r in lane r, bit for bit", "[simd]") {
    // Values over many binades, so that any other order of the additions rounds differently somewhere.
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    auto rng = lowbit::test::make_rng(4);
    std::uniform_int_distribution<int> exponent(-20, 20);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> values = lowbit::test::uniform_floats(rng, lanes * lanes, -1.0f, 1.0f);
        for (float& value : values) value = std::ldexp(value, exponent(rng));
        std::array<batch, lanes> rows;
        for (std::size_t r = 0; r < lanes; ++r) rows[r] = batch::load_unaligned(values.data() + r * lanes);
        std::array<float, 64> sums{};
        simd::reduce_add_each(rows.data()).store_unaligned(sums.data());
        for (std::size_t r = 0; r < lanes; ++r) {
            INFO("trial " << trial << ", row " << r);
            CHECK(lowbit::test::same_bits(sums[r], simd::reduce_add(rows[r])));
        }
    }
}

TEST_CASE("simd::round_residual, nearbyint_to_int and max_magnitude equal std::nearbyint and std::abs", "[simd]") {
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    auto rng = lowbit::test::make_rng(4);
    // Exact ties (to even both ways), integers, values an ulp beside a tie, signed zeros and values where
    // every float is an integer, then random ones.
    std::vector<float> special{0.5f,  -0.5f, 1.5f,       -1.5f,       2.5f,   -2.5f, 0.0f,  -0.0f,  3.0f,   -7.0f,
                               16.5f, 15.5f, 8388607.5f, -8388607.5f, 1.6e7f, -3e9f, 0.25f, -0.75f, 1e-30f, -1e-30f};
    special.push_back(std::nextafter(0.5f, 1.0f));
    special.push_back(std::nextafter(0.5f, 0.0f));
    special.push_back(std::nextafter(-14.5f, 0.0f));
    std::vector<float> values = lowbit::test::uniform_floats(rng, 64 * lanes, -300.0f, 300.0f);
    std::copy(special.begin(), special.end(), values.begin());
    const std::vector<float> others = lowbit::test::uniform_floats(rng, values.size(), -300.0f, 300.0f);
    for (std::size_t at = 0; at + lanes <= values.size(); at += lanes) {
        const batch loaded = batch::load_unaligned(values.data() + at);
        std::array<float, 64> residual{}, magnitude{};
        std::array<std::int32_t, 64> rounded{};
        simd::round_residual(loaded).store_unaligned(residual.data());
        simd::max_magnitude(loaded, batch::load_unaligned(others.data() + at)).store_unaligned(magnitude.data());
        simd::nearbyint_to_int(loaded).store_unaligned(rounded.data());  // unspecified beyond int32: not checked
        for (std::size_t i = 0; i < lanes; ++i) {
            const float value = values[at + i];
            INFO("value " << value);
            CHECK(residual[i] == value - std::nearbyint(value));  // exact in float
            CHECK(magnitude[i] == std::max(std::abs(value), std::abs(others[at + i])));
            CHECK_FALSE(std::signbit(magnitude[i]));
            if (std::abs(value) < 2e9f) CHECK(rounded[i] == static_cast<std::int32_t>(std::nearbyint(value)));
        }
    }
}

TEST_CASE("simd::div is IEEE division, bit for bit the scalar quotient", "[simd]") {
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    auto rng = lowbit::test::make_rng(5);
    // Quotients at a half (0.15 / 0.3: a refined reciprocal gives 0.49999997), subnormal, huge and
    // infinite divisors and numerators, signed zeros; then random ones over many magnitudes.
    const std::vector<std::pair<float, float>> special{
        {0.15f, 0.3f},     {0.0f, 1e-39f},   {1e-38f, 1e-39f}, {3.0f, 0x1p-149f}, {-0.0f, 2.0f},   {1.0f, 3.0f},
        {7.0f, 0.1f},      {1e38f, 0.5f},    {1.0f, 1e38f},    {5.0f, 0.0f},      {-5.0f, -0.0f},  {0.0f, 0.0f},
        {1.0f, INFINITY},  {2.5f, 0.5f},     {4.5f, 0.01f},    {0x1p-126f, 3.0f}, {-1e-45f, 7.0f}, {1e30f, 1e-30f}};
    std::vector<float> numerators(64 * lanes), denominators(64 * lanes);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-140, 120), sign(0, 1);
    for (std::size_t i = 0; i < numerators.size(); ++i) {
        numerators[i] = std::ldexp(mantissa(rng), exponent(rng)) * (sign(rng) ? -1.0f : 1.0f);
        denominators[i] = std::ldexp(mantissa(rng), exponent(rng)) * (sign(rng) ? -1.0f : 1.0f);
    }
    for (std::size_t i = 0; i < special.size(); ++i) std::tie(numerators[i], denominators[i]) = special[i];
    for (std::size_t at = 0; at + lanes <= numerators.size(); at += lanes) {
        std::array<float, 64> quotients{};
        simd::div(batch::load_unaligned(numerators.data() + at), batch::load_unaligned(denominators.data() + at))
            .store_unaligned(quotients.data());
        for (std::size_t i = 0; i < lanes; ++i) {
            const float expected = numerators[at + i] / denominators[at + i];
            INFO(numerators[at + i] << " / " << denominators[at + i] << " = " << expected << ", got " << quotients[i]);
            if (std::isnan(expected)) CHECK(std::isnan(quotients[i]));
            else CHECK(std::bit_cast<std::uint32_t>(quotients[i]) == std::bit_cast<std::uint32_t>(expected));
        }
    }
}

TEST_CASE("simd::store_nibbles packs lanes 2i and 2i + 1 into byte i", "[simd]") {
    using ibatch = simd::batch<std::int32_t>;
    constexpr std::size_t lanes = ibatch::size;
    auto rng = lowbit::test::make_rng(5);
    std::uniform_int_distribution<int> nibble(0, 15);
    for (int trial = 0; trial < 100; ++trial) {
        std::array<std::int32_t, 64> codes{};
        for (std::size_t i = 0; i < lanes; ++i)
            codes[i] = trial == 0 ? 15 : trial == 1 ? static_cast<int>(i % 16) : nibble(rng);
        std::vector<std::uint8_t> bytes(lanes / 2 + 8, 0xCD);
        simd::store_nibbles(ibatch::load_unaligned(codes.data()), bytes.data() + 4);
        for (std::size_t i = 0; i < lanes / 2; ++i) CHECK(bytes[4 + i] == (codes[2 * i] | codes[2 * i + 1] << 4));
        for (std::size_t i : {std::size_t{0}, std::size_t{3}, lanes / 2 + 4, lanes / 2 + 7}) CHECK(bytes[i] == 0xCD);
    }
}

TEST_CASE("simd::bit_cast reinterprets lanes without changing bits", "[simd]") {
    using float_batch = simd::batch<float>;
    constexpr std::size_t lanes = float_batch::size;
    std::array<float, 64> values{};
    for (std::size_t i = 0; i < lanes; ++i) values[i] = static_cast<float>(i) * -1.5f + 0.25f;
    const auto as_bits = simd::bit_cast<std::uint32_t>(float_batch::load_unaligned(values.data()));
    std::array<std::uint32_t, 64> stored{};
    as_bits.store_unaligned(stored.data());
    for (std::size_t i = 0; i < lanes; ++i) {
        std::uint32_t expected = 0;
        std::memcpy(&expected, &values[i], sizeof expected);
        CHECK(stored[i] == expected);
    }
    const auto round_trip = simd::bit_cast<float>(as_bits);
    std::array<float, 64> back{};
    round_trip.store_unaligned(back.data());
    for (std::size_t i = 0; i < lanes; ++i) CHECK(back[i] == values[i]);
}

TEST_CASE("simd::fma rounds once where the instruction set has a fused multiply-add", "[simd]") {
    // xsimd 8.1 has no AVX-512 fma and falls back to a multiply and an add, which Clang rounds twice.
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    UNSCOPED_INFO("fused_multiply_add " << simd::fused_multiply_add);
    auto rng = lowbit::test::make_rng(2);
    std::size_t nonzero = 0;
    for (int trial = 0; trial < 500; ++trial) {
        const auto a = lowbit::test::uniform_floats(rng, lanes, -4.0f, 4.0f);
        const auto b = lowbit::test::uniform_floats(rng, lanes, -4.0f, 4.0f);
        std::vector<float> c(lanes);
        for (std::size_t i = 0; i < lanes; ++i) c[i] = -(a[i] * b[i]);  // a*b + c is the product's rounding error
        std::array<float, 64> result{};
        simd::fma(batch::load_unaligned(a.data()), batch::load_unaligned(b.data()), batch::load_unaligned(c.data()))
            .store_unaligned(result.data());
        for (std::size_t i = 0; i < lanes; ++i) {
            if constexpr (simd::fused_multiply_add) CHECK(result[i] == std::fma(a[i], b[i], c[i]));
            else CHECK(result[i] == 0.0f);  // fl(fl(a*b) + c) cancels exactly
            if (result[i] != 0.0f) ++nonzero;
        }
    }
    // One rounding leaves the product's rounding error, which is rarely exactly zero.
    if constexpr (simd::fused_multiply_add) CHECK(nonzero > 0);
}

TEST_CASE("simd::spread_groups puts value j over the j-th of Groups equal runs of lanes, reading Groups values",
          "[simd]") {
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    std::array<float, 16> values{-1.25f, 3.5f,  0.0f, -0.0f, 7.0f, 1e-40f, -2.0f, 8.5f,
                                 9.0f,   -3.0f, 4.0f, 5.0f,  6.0f, 11.0f,  12.0f, -13.0f};
    const auto check = [&]<int Groups>(std::integral_constant<int, Groups>) {
        if constexpr (lanes % Groups == 0) {
            INFO("Groups = " << Groups);
            std::array<float, 64> stored{};
            simd::spread_groups<Groups, simd::arch>(values.data()).store_unaligned(stored.data());
            for (std::size_t i = 0; i < lanes; ++i)
                CHECK(std::bit_cast<std::uint32_t>(stored[i]) ==
                      std::bit_cast<std::uint32_t>(values[i * Groups / lanes]));
        }
    };
    check(std::integral_constant<int, 1>{});
    check(std::integral_constant<int, 2>{});
    check(std::integral_constant<int, 4>{});
    check(std::integral_constant<int, 8>{});
    check(std::integral_constant<int, 16>{});
}
TEST_CASE("simd::permute_lanes gives lane i the value of lane index[i], bit for bit", "[simd]") {
    using batch = simd::batch<float>;
    using index_batch = simd::batch<std::uint32_t>;
    constexpr std::size_t lanes = batch::size;
    auto rng = lowbit::test::make_rng(0x5EED7);
    std::uniform_int_distribution<std::uint32_t> lane(0, static_cast<std::uint32_t>(lanes - 1));
    alignas(64) std::array<float, 64> values{}, stored{};
    alignas(64) std::array<std::uint32_t, 64> index{};
    for (std::size_t i = 0; i < lanes; ++i) values[i] = i % 3 == 0 ? -0.0f : std::ldexp(1.5f, int(i)) - float(i);
    values[1] = 1e-40f;  // subnormals pass through unchanged
    for (int trial = 0; trial < 20; ++trial) {
        for (std::size_t i = 0; i < lanes; ++i) index[i] = trial == 0 ? std::uint32_t(i) : lane(rng);  // identity first
        simd::permute_lanes<simd::arch>(batch::load_aligned(values.data()), index_batch::load_aligned(index.data()))
            .store_aligned(stored.data());
        for (std::size_t i = 0; i < lanes; ++i)
            CHECK(std::bit_cast<std::uint32_t>(stored[i]) == std::bit_cast<std::uint32_t>(values[index[i]]));
    }
}

TEST_CASE("simd::spread_byte_groups puts byte j over the j-th of Groups equal runs of lanes, reading Groups bytes",
          "[simd]") {
    using batch = simd::batch<std::uint32_t>;
    constexpr std::size_t lanes = batch::size;
    // Bytes above 127 too (zero-extended, never sign-extended); the byte after the Groups read is a
    // sentinel that no lane may show.
    const std::array<std::uint8_t, 17> bytes{0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE, 0x38, 0xC0, 0x10,
                                             0x9A, 0x7E, 0x81, 0x42, 0x03, 0xAA, 0x55, 0xEE};
    const auto check = [&]<int Groups>(std::integral_constant<int, Groups>) {
        if constexpr (lanes % Groups == 0) {
            INFO("Groups = " << Groups);
            std::array<std::uint32_t, 64> stored{};
            simd::spread_byte_groups<Groups, simd::arch>(bytes.data()).store_unaligned(stored.data());
            for (std::size_t i = 0; i < lanes; ++i) CHECK(stored[i] == bytes[i * Groups / lanes]);
        }
    };
    check(std::integral_constant<int, 1>{});
    check(std::integral_constant<int, 2>{});
    check(std::integral_constant<int, 4>{});
    check(std::integral_constant<int, 8>{});
    check(std::integral_constant<int, 16>{});
}

TEST_CASE("simd::shift_left shifts every lane, bits leaving at the top", "[simd]") {
    using batch = simd::batch<std::uint32_t>;
    std::array<std::uint32_t, 64> stored{};
    simd::shift_left<20>(batch(0xFFFu)).store_unaligned(stored.data());
    for (std::size_t i = 0; i < batch::size; ++i) CHECK(stored[i] == 0xFFF00000u);
    simd::shift_left<24>(batch(0x1FFu)).store_unaligned(stored.data());
    for (std::size_t i = 0; i < batch::size; ++i) CHECK(stored[i] == 0xFF000000u);
}

TEST_CASE("simd::transpose_words turns rows into columns", "[simd]") {
    using batch = simd::batch<std::uint32_t>;
    constexpr std::size_t lanes = batch::size;
    // Word (r, c) = 1000 r + c: every word distinct, so a misplaced one names where it came from.
    std::array<batch, lanes> rows;
    std::array<std::uint32_t, 64> words{};
    for (std::size_t r = 0; r < lanes; ++r) {
        for (std::size_t c = 0; c < lanes; ++c) words[c] = static_cast<std::uint32_t>(1000 * r + c);
        rows[r] = batch::load_unaligned(words.data());
    }
    simd::transpose_words(rows);
    for (std::size_t r = 0; r < lanes; ++r) {
        rows[r].store_unaligned(words.data());
        for (std::size_t c = 0; c < lanes; ++c) {
            INFO("row " << r << ", lane " << c);
            CHECK(words[c] == 1000 * c + r);
        }
    }
}
#endif
