// Code packing: the fast block kernel against the bit-stream reference, and docs/numerics.md N9.d exactly.
#include <cstdint>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/mlx_affine/packing.hpp>
#include <lowbit/detail/mlx_affine/packing_reference.hpp>

#include "support/random.hpp"

namespace {

namespace kernels = lowbit::detail::kernels;
namespace reference = lowbit::detail::reference;

template <int Bits>
void check_example_d(const std::vector<std::uint32_t>& expected) {
    std::vector<std::uint8_t> codes(32);
    for (int i = 0; i < 32; ++i) codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i % (1 << Bits));
    std::vector<std::uint32_t> fast(Bits, 0xDEADBEEFu), slow(Bits, 0xDEADBEEFu);
    kernels::pack_codes<Bits>(codes.data(), 32, fast.data());
    reference::pack_codes<Bits>(codes.data(), 32, slow.data());
    CHECK(fast == expected);
    CHECK(slow == expected);
    std::vector<std::uint8_t> back(32);
    kernels::unpack_codes<Bits>(expected.data(), 32, back.data());
    CHECK(back == codes);
    reference::unpack_codes<Bits>(expected.data(), 32, back.data());
    CHECK(back == codes);
}

template <int Bits>
void check_random_round_trip(std::uint64_t salt) {
    auto rng = lowbit::test::make_rng(salt);
    for (std::size_t count : {32u, 64u, 96u, 128u, 32u * 37u}) {
        std::vector<std::uint8_t> codes(count);
        for (auto& code : codes) code = static_cast<std::uint8_t>(rng() % (1u << Bits));
        std::vector<std::uint32_t> fast(count * Bits / 32), slow(count * Bits / 32);
        kernels::pack_codes<Bits>(codes.data(), count, fast.data());
        reference::pack_codes<Bits>(codes.data(), count, slow.data());
        REQUIRE(fast == slow);
        std::vector<std::uint8_t> fast_back(count), slow_back(count);
        std::vector<float> float_back(count);
        kernels::unpack_codes<Bits>(fast.data(), count, fast_back.data());
        kernels::unpack_codes<Bits>(fast.data(), count, float_back.data());
        reference::unpack_codes<Bits>(slow.data(), count, slow_back.data());
        CHECK(fast_back == codes);
        CHECK(slow_back == codes);
        for (std::size_t i = 0; i < count; ++i) CHECK(float_back[i] == static_cast<float>(codes[i]));
    }
}

}  // namespace

TEST_CASE("packing: N9.d words for codes i mod 2^b", "[packing]") {
    check_example_d<2>({0xE4E4E4E4u, 0xE4E4E4E4u});
    check_example_d<3>({0x88FAC688u, 0xC688FAC6u, 0xFAC688FAu});
    check_example_d<4>({0x76543210u, 0xFEDCBA98u, 0x76543210u, 0xFEDCBA98u});
    check_example_d<5>({0x8A418820u, 0xC5A92839u, 0xCA307B9Au, 0x38BDAB49u, 0xFFBBCDEBu});
    check_example_d<6>({0x440C2040u, 0xA2481C61u, 0x3CE34C2Cu, 0x544D2450u, 0xA6585D65u, 0x7DE75C6Du});
    check_example_d<8>({0x03020100u, 0x07060504u, 0x0B0A0908u, 0x0F0E0D0Cu, 0x13121110u, 0x17161514u,
                        0x1B1A1918u, 0x1F1E1D1Cu});
}

TEST_CASE("packing: eight 3-bit codes are the 24-bit value 0x70E547 (N9.d)", "[packing]") {
    std::vector<std::uint8_t> codes(32, 0);
    const std::uint8_t first[8] = {7, 0, 5, 2, 6, 1, 4, 3};
    for (int i = 0; i < 8; ++i) codes[static_cast<std::size_t>(i)] = first[i];
    std::vector<std::uint32_t> words(3);
    kernels::pack_codes<3>(codes.data(), 32, words.data());
    CHECK(words[0] == 0x0070E547u);
}

TEST_CASE("packing: kernel equals reference and round-trips for every width", "[packing]") {
    check_random_round_trip<2>(11);
    check_random_round_trip<3>(12);
    check_random_round_trip<4>(13);
    check_random_round_trip<5>(14);
    check_random_round_trip<6>(15);
    check_random_round_trip<8>(16);
}
