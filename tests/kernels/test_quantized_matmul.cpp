// Group-wise quantized matmul: every kernel of a format's compiled entry (FormatKernels<Format>::matmul:
// reference, GEMV, batch GEMV, GEMM; one the format lacks runs as the reference) against the float
// product x * dequantize(q)^T (evaluated in double), over every M and N around the microkernel's
// register block (read from QgemmF32Ukernel, so each instruction set's tile is covered), K of 1..4
// groups, a large K, more columns and rows than one tile, and odd row strides (quantized_matmul_sweep.hpp).
// This unit sweeps the affine formats of 1 to 4 bits of lowbit::test::TestedFormats (every format, or a
// representative set in the narrower CI presets: support/formats.hpp), test_quantized_matmul_wide.cpp
// the others; and checks the f32 kernels' code decoding for the floating-point formats.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/dispatch/formats.hpp>
#include <lowbit/detail/gemm/f32_driver.hpp>
#include <lowbit/detail/simd.hpp>
#include <lowbit/detail/unroll.hpp>
#include <lowbit/formats/formats.hpp>
#include <lowbit/quantized_matrix.hpp>

#include "kernels/quantized_matmul_sweep.hpp"
#include "support/formats.hpp"
#include "support/random.hpp"
#include "support/tolerance.hpp"

using namespace lowbit::test::quantized_matmul;

TEMPLATE_LIST_TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T", "[quantized_matmul]",
                        lowbit::test::TestedNarrowAffineFormats) {
    sweep<TestType>();
}

TEST_CASE("the xsimd quantized matmul kernels are the ones this build runs", "[quantized_matmul]") {
#if defined(LOWBIT_FORCE_SCALAR)
    CHECK_FALSE(simd::enabled);
#elif defined(__x86_64__) || defined(__aarch64__)
    CHECK(simd::enabled);
#else
    SKIP("no instruction set is expected on this architecture");
#endif
    UNSCOPED_INFO("qgemm register block " << kernels::QgemmF32Ukernel<simd::arch>::MR << " x "
                                           << kernels::QgemmF32Ukernel<simd::arch>::NR);
    SUCCEED();
}

TEST_CASE("mxfp4 codes in the f32 kernels: every code at every step is Mxfp4::value, -0 included",
          "[quantized_matmul][mxfp4]") {
    if constexpr (simd::enabled) {
        using Codes = kernels::F32Codes<lowbit::Mxfp4>;
        using ubatch = xsimd::batch<std::uint32_t, simd::arch>;
        using fbatch = xsimd::batch<float, simd::arch>;
        constexpr std::size_t W = fbatch::size;
        auto bits_of = [](float f) { return std::bit_cast<std::uint32_t>(f); };
        for (std::uint32_t code = 0; code < 16; ++code) {
            INFO("code " << code);
            const std::uint32_t expected = bits_of(lowbit::Mxfp4::value(code));
            // The other nibbles hold other codes (all ones, or the code's complement), which a step ignores.
            for (const std::uint32_t others : {0u, 0xFFFFFFFFu, 0x5A5A5A5Au}) {
                alignas(64) std::array<float, W> lanes{};
                lowbit::detail::static_for<8>([&](auto step) {
                    constexpr int t = decltype(step)::value;
                    const std::uint32_t word = (others & ~(0xFu << (4 * t))) | code << (4 * t);
                    Codes::step<simd::arch, t>(ubatch(word)).store_aligned(lanes.data());
                    for (const float lane : lanes) CHECK(bits_of(lane) == expected);
                });
                Codes::value<simd::arch>(ubatch((others & ~0xFu) | code)).store_aligned(lanes.data());
                for (const float lane : lanes) CHECK(bits_of(lane) == expected);
            }
        }
    }
}

TEMPLATE_TEST_CASE("decode_row_scales decodes a row of scale bytes as Format::group_scale, every length and tail",
                   "[quantized_matmul][mxfp4][nvfp4][mxfp8]", lowbit::Mxfp4, lowbit::Nvfp4, lowbit::Mxfp8) {
    if constexpr (simd::enabled) {
        constexpr std::uint32_t seed = 3501;
        INFO("seed " << seed);
        std::mt19937 rng(seed);
        std::uniform_int_distribution<int> byte(0, 255);
        constexpr Eigen::Index W = static_cast<Eigen::Index>(xsimd::batch<float, simd::arch>::size);
        for (Eigen::Index groups = 0; groups <= 4 * W + 3; ++groups) {
            INFO("groups " << groups);
            std::vector<std::uint8_t> bytes(static_cast<std::size_t>(groups));
            for (auto& b : bytes) b = static_cast<std::uint8_t>(byte(rng));
            // One float past the end, which must stay untouched.
            std::vector<float> decoded(static_cast<std::size_t>(groups) + 1, 1234.5f);
            kernels::decode_row_scales<simd::arch, TestType>(bytes.data(), groups, decoded.data());
            for (std::size_t g = 0; g < bytes.size(); ++g) {
                const float expected = TestType::group_scale(bytes[g]);
                if (std::isnan(expected))
                    CHECK(std::isnan(decoded[g]));
                else
                    CHECK(std::bit_cast<std::uint32_t>(decoded[g]) == std::bit_cast<std::uint32_t>(expected));
            }
            CHECK(decoded.back() == 1234.5f);
        }
    }
}

TEMPLATE_TEST_CASE("Byte scales in the f32 kernels: every byte decodes to Format::group_scale (group_scales)",
                   "[quantized_matmul][mxfp4][nvfp4][mxfp8]", lowbit::Mxfp4, lowbit::Nvfp4, lowbit::Mxfp8) {
    if constexpr (simd::enabled) {
        using Codes = kernels::F32Codes<TestType>;
        using ubatch = xsimd::batch<std::uint32_t, simd::arch>;
        using fbatch = xsimd::batch<float, simd::arch>;
        alignas(64) std::array<float, fbatch::size> lanes{};
        for (std::uint32_t byte = 0; byte < 256; ++byte) {
            INFO("scale byte " << byte);
            const float expected = TestType::group_scale(static_cast<std::uint8_t>(byte));
            Codes::template group_scales<simd::arch>(ubatch(byte)).store_aligned(lanes.data());
            for (const float lane : lanes) {
                if (std::isnan(expected))
                    CHECK(std::isnan(lane));
                else
                    CHECK(std::bit_cast<std::uint32_t>(lane) == std::bit_cast<std::uint32_t>(expected));
            }
        }
    }
}
