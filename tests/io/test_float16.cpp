// f16 / bf16 <-> float: exhaustive round trips, Eigen's conversions as a second opinion for rounding,
// and the ties, overflow and subnormal cases by hand.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <Eigen/Core>
#include <catch2/catch_test_macros.hpp>

#include <lowbit/io/detail/float16.hpp>

#include "support/random.hpp"

namespace {

using lowbit::io_detail::bf16_to_float;
using lowbit::io_detail::f16_to_float;
using lowbit::io_detail::float_to_bf16;
using lowbit::io_detail::float_to_f16;

bool is_nan_f16(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

}  // namespace

TEST_CASE("every f16 widens exactly and narrows back to itself", "[io]") {
    for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
        const auto h = static_cast<std::uint16_t>(bits);
        const float value = f16_to_float(h);
        const Eigen::half eigen = Eigen::numext::bit_cast<Eigen::half>(h);
        INFO("f16 bits " << bits);
        if (is_nan_f16(h)) {
            REQUIRE(std::isnan(value));
            REQUIRE(std::signbit(value) == ((h & 0x8000u) != 0));
            REQUIRE(float_to_f16(value) == h);  // quiet or signalling, the payload comes back
            continue;
        }
        REQUIRE(std::bit_cast<std::uint32_t>(value) == std::bit_cast<std::uint32_t>(static_cast<float>(eigen)));
        REQUIRE(float_to_f16(value) == h);
    }
}

TEST_CASE("every bf16 widens exactly and narrows back to itself", "[io]") {
    for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
        const auto b = static_cast<std::uint16_t>(bits);
        const float value = bf16_to_float(b);
        INFO("bf16 bits " << bits);
        REQUIRE(float_to_bf16(value) == b);  // NaNs included
    }
}

TEST_CASE("float to f16 / bf16 rounds to nearest even like Eigen's converters", "[io]") {
    auto rng = lowbit::test::make_rng(0xf16);
    std::uniform_int_distribution<std::uint32_t> any_bits;
    for (int i = 0; i < 2'000'000; ++i) {
        const float value = std::bit_cast<float>(any_bits(rng));
        if (std::isnan(value)) continue;
        INFO("float bits " << std::bit_cast<std::uint32_t>(value));
        REQUIRE(float_to_f16(value) == Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value)));
        REQUIRE(float_to_bf16(value) == Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(value)));
    }
}

TEST_CASE("f16 rounding at ties, overflow and subnormals", "[io]") {
    CHECK(float_to_f16(1.0f) == 0x3c00);
    CHECK(float_to_f16(1.0f + 0x1.0p-11f) == 0x3c00);               // tie, even stays
    CHECK(float_to_f16(1.0f + 3 * 0x1.0p-11f) == 0x3c02);           // tie, odd rounds up
    CHECK(float_to_f16(65504.0f) == 0x7bff);
    CHECK(float_to_f16(65519.996f) == 0x7bff);
    CHECK(float_to_f16(65520.0f) == 0x7c00);                        // tie to even: Inf
    CHECK(float_to_f16(-1e30f) == 0xfc00);
    CHECK(float_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(float_to_f16(0x1.0p-24f) == 0x0001);                      // smallest subnormal
    CHECK(float_to_f16(0x1.0p-25f) == 0x0000);                      // tie to even: 0
    CHECK(float_to_f16(0x1.8p-25f) == 0x0001);
    CHECK(float_to_f16(-0.0f) == 0x8000);
    CHECK(float_to_f16(0x1.ff8p-15f) == 0x03ff);                    // largest subnormal
    CHECK(float_to_f16(0x1.ffcp-15f) == 0x0400);                    // tie: rounds to even, the smallest normal
    CHECK(float_to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);               // tie, even
    CHECK(float_to_bf16(1.0f + 3 * 0x1.0p-8f) == 0x3f82);
    CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    // A float NaN whose payload lies only in bits the narrow type drops stays a NaN (quiet bit set).
    CHECK(float_to_f16(std::bit_cast<float>(0x7f800001u)) == 0x7e00);
    CHECK(float_to_bf16(std::bit_cast<float>(0xff800001u)) == 0xffc0);
}
