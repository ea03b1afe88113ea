// The packed ternary kernels (docs/numerics.md N14, detail/ternary/): the TQ1 digit arithmetic over all 243
// numbers, packing round trips over row tails, the shared int8 GEMM of every instruction set this build
// has (AVX-512 VNNI and AVX2 under -march=native; AVX2 alone under -march=haswell; none with
// LOWBIT_FORCE_SCALAR) against the scalar reference, and the threaded matmul bit for bit against the
// reference and against the float computation of the same integers, over M across the row blocks, N
// across the panels, K over group and chunk tails, per tensor and per group, I2 and TQ1, 1 and 2 threads.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/detail/ternary/int8_gemm.hpp>
#include <lowbit/ternary_linear.hpp>

#include "support/compare.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"

namespace {

using Eigen::Index;
using lowbit::TernaryFormat;
namespace ternary = lowbit::detail::ternary;

lowbit::RowMatrixXi8 random_codes(std::mt19937_64& rng, Index rows, Index cols) {
    std::uniform_int_distribution<int> code(-1, 1);
    lowbit::RowMatrixXi8 codes(rows, cols);
    for (Index i = 0; i < codes.size(); ++i) codes.data()[i] = static_cast<std::int8_t>(code(rng));
    return codes;
}

/// The shared int8 GEMM of Ops on a layer's panels against the reference, for M across the row blocks
/// and N across the panels (NR columns), K over group and chunk tails.
template <class Ops>
void check_int8_gemm(std::uint64_t salt) {
    auto rng = lowbit::test::make_rng(salt);
    constexpr int NR = lowbit::detail::kernels::Int8TileShape<Ops>::columns;
    for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1})
        for (const bool per_tensor : {true, false})
            for (const Index K : {Index{64}, Index{100}, Index{192}, Index{256}, Index{320}, Index{1344}})
                for (const Index M : {Index{1}, Index{2}, Index{5}, Index{6}, Index{7}, Index{13}})
                    for (const Index N : {Index{1}, Index{NR - 1}, Index{NR + 3}, Index{3 * NR}}) {
                        if (!per_tensor && K % 64 != 0) continue;
                        INFO("format " << lowbit::ternary_format_name(format) << ", per_tensor " << per_tensor << ", M "
                                       << M << ", N " << N << ", K " << K);
                        const lowbit::RowMatrixXf w = lowbit::test::random_weights(rng, N, K);
                        const lowbit::TernaryLinear layer(
                            per_tensor ? lowbit::quantize_ternary_per_tensor(w) : lowbit::quantize_ternary(w, 64),
                            Eigen::VectorXf::Random(N), format);
                        lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
                        x(0, K - 1) = 40.0f;  // a code of 127 in row 0
                        const auto act = ternary::prepare_activations(x.data(), K, M, K, format, !per_tensor, "test");
                        lowbit::RowMatrixXf expected(M, N), actual(M, N);
                        ternary::reference::ternary_matmul(layer.view(), act, expected.data(), N);
                        const auto panels = ternary::kernels::pack_ternary_panels<Ops, NR>(layer.view());
                        ternary::kernels::ternary_matmul_int8<Ops>(layer.view(), panels, act, actual.data(), N);
                        CHECK(lowbit::test::first_matrix_difference(actual, expected) == -1);
                    }
}

/// Output rows per int8 panel of Ops (32 for the reference, which has no panels).
template <class Ops>
constexpr Index panel_rows() {
    if constexpr (std::is_void_v<Ops>)
        return 32;
    else
        return lowbit::detail::kernels::Int8TileShape<Ops>::columns;
}

}  // namespace

TEST_CASE("TQ1 digits: byte arithmetic reads all 243 numbers back", "[ternary][kernels]") {
    const auto& table = ternary::tq1_number_of_memory_byte();
    for (int v = 0; v < 243; ++v) {
        const std::uint8_t q = ternary::tq1_memory_byte(v);
        CHECK(table[q] == v);
        int rest = v;
        for (int s = 4; s >= 0; --s) {
            CHECK(ternary::tq1_digit(q, s) == rest % 3);
            rest /= 3;
        }
    }
}

TEST_CASE("Ternary packing: pack then unpack is the identity over row tails", "[ternary][kernels]") {
    auto rng = lowbit::test::make_rng(1501);
    for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1})
        for (const Index K : {Index{1}, Index{5}, Index{63}, Index{64}, Index{255}, Index{256}, Index{257}, Index{319},
                              Index{320}, Index{321}, Index{1000}}) {
            const auto codes = random_codes(rng, 1, K);
            std::vector<std::uint8_t> row(static_cast<std::size_t>(ternary::row_bytes(format, K)));
            ternary::pack_row(format, codes.data(), K, row.data());
            lowbit::RowMatrixXi8 back(1, K);
            ternary::unpack_row(format, row.data(), K, back.data());
            CHECK(back == codes);
            // padding weights are t = 0 (digit 1)
            for (Index k = K; k < ternary::padded_cols(format, K); ++k)
                CHECK(ternary::packed_digit(format, row.data(), k) == 1);
        }
}

TEST_CASE("Ternary activations: the token quantizer equals quantize_activations_int8", "[ternary][kernels]") {
    auto rng = lowbit::test::make_rng(1505);
    for (const Index K : {Index{1}, Index{15}, Index{16}, Index{17}, Index{100}, Index{1000}}) {
        lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, 3, K);
        for (Index k = 1; k < K; k += 2) x(0, k) = static_cast<float>(k % 11) - 5.5f;  // ties at .5: the scale is 1
        x(0, 0) = -127.0f;
        x.row(1).setZero();
        const lowbit::Int8Activations expected = lowbit::quantize_activations_int8(x);
        for (Index m = 0; m < 3; ++m) {
            std::vector<std::int8_t> reference(static_cast<std::size_t>(K)), dispatched(static_cast<std::size_t>(K));
            float reference_scale = 0.0f, dispatched_scale = 0.0f;
            const std::int32_t reference_sum =
                ternary::quantize_token_reference(&x(m, 0), K, reference.data(), reference_scale);
            const std::int32_t sum = ternary::quantize_token(&x(m, 0), K, dispatched.data(), dispatched_scale);
            std::int32_t expected_sum = 0;
            for (Index k = 0; k < K; ++k) {
                CHECK(reference[static_cast<std::size_t>(k)] == expected.codes(m, k));
                CHECK(dispatched[static_cast<std::size_t>(k)] == expected.codes(m, k));
                expected_sum += expected.codes(m, k);
            }
            CHECK(lowbit::test::same_bits(reference_scale, expected.scales(m)));
            CHECK(lowbit::test::same_bits(dispatched_scale, expected.scales(m)));
            CHECK(reference_sum == expected_sum);
            CHECK(sum == expected_sum);
        }
    }
}

TEST_CASE(
    "Ternary activations: row counts around the thread ranges give the 1-thread codes, and the first "
    "non-finite row is named at every thread count",
    "[ternary][kernels][threads]") {
    // prepare_activations splits rows into ranges of activation_rows_per_range(K) (64 at K = 1024):
    // M just under, at and over one range and over two, at 1 to 4 threads, per tensor and per group.
    auto rng = lowbit::test::make_rng(1507);
    const Index K = 1024;
    const auto grain = static_cast<Index>(ternary::activation_rows_per_range(K));
    REQUIRE(grain == 64);
    for (const Index M : {grain - 1, grain, grain + 1, 2 * grain + 1, 3 * grain + 5})
        for (const bool per_group : {false, true}) {
            lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
            x.row(M / 2).setZero();
            const lowbit::Int8Activations expected = lowbit::quantize_activations_int8(x);
            for (const int threads : {1, 2, 3, 4}) {
                const lowbit::test::ThreadCountGuard guard(threads);
                INFO("M " << M << ", per_group " << per_group << ", threads " << threads);
                const auto act = ternary::prepare_activations(x.data(), K, M, K, TernaryFormat::i2, per_group, "test");
                REQUIRE(act.rows == M);
                bool codes_equal = true, scales_equal = true, sums_equal = true;
                for (Index m = 0; m < M; ++m) {
                    std::int32_t sum = 0;
                    for (Index k = 0; k < K; ++k) {
                        codes_equal = codes_equal && act.row(m)[k] == expected.codes(m, k);
                        sum += expected.codes(m, k);
                    }
                    for (Index k = K; k < act.padded; ++k) codes_equal = codes_equal && act.row(m)[k] == 0;
                    scales_equal = scales_equal &&
                                   lowbit::test::same_bits(act.scales[static_cast<std::size_t>(m)], expected.scales(m));
                    sums_equal = sums_equal && act.sums[static_cast<std::size_t>(m)] == sum;
                    for (Index g = 0; g < act.groups; ++g) {
                        std::int32_t group_sum = 0;
                        for (Index k = g * 64; k < (g + 1) * 64; ++k) group_sum += expected.codes(m, k);
                        sums_equal =
                            sums_equal && act.group_sums[static_cast<std::size_t>(m * act.groups + g)] == group_sum;
                    }
                }
                CHECK(codes_equal);
                CHECK(scales_equal);
                CHECK(sums_equal);
                CHECK(act.groups == (per_group ? K / 64 : 0));
            }
        }

    // A NaN in the second range and an infinity in the first: the infinity's row is named, whichever
    // range finishes first.
    const Index M = 3 * grain + 5;
    lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
    x(grain + 3, 7) = std::numeric_limits<float>::quiet_NaN();
    x(grain - 2, K - 1) = -std::numeric_limits<float>::infinity();
    for (const int threads : {1, 2, 3, 4}) {
        const lowbit::test::ThreadCountGuard guard(threads);
        INFO("threads " << threads);
        CHECK_THROWS_WITH(ternary::prepare_activations(x.data(), K, M, K, TernaryFormat::tq1, false, "fn"),
                          "fn: x(62, 1023) = -inf is not finite");
    }
}

TEST_CASE("Ternary matmul: the int8 GEMM of every instruction set against the scalar reference", "[ternary][kernels]") {
    std::uint64_t salt = 1510;
    [&]<class... Ops>(std::tuple<Ops...>*) {
        (check_int8_gemm<Ops>(salt++), ...);
    }(static_cast<lowbit::detail::simd::int8::all*>(nullptr));
    SUCCEED("instruction sets of this build checked: " << std::tuple_size_v<lowbit::detail::simd::int8::all>);
}

TEST_CASE("Ternary matmul: dispatched kernels bit for bit against the reference and the integers",
          "[ternary][kernels][threads]") {
    auto rng = lowbit::test::make_rng(1530);
    for (const int threads : {1, 2}) {
        const lowbit::test::ThreadCountGuard guard(threads);
        for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1})
            for (const bool per_tensor : {true, false})
                for (const Index K : {Index{64}, Index{320}, Index{448}, Index{1024}})
                    for (const Index M : {Index{1}, Index{2}, Index{3}, Index{4}, Index{5}, Index{8}, Index{11}})
                        for (const Index N : {Index{1}, Index{7}, Index{33}}) {
                            INFO("threads " << threads << ", format " << lowbit::ternary_format_name(format)
                                            << ", per_tensor " << per_tensor << ", M " << M << ", N " << N << ", K "
                                            << K);
                            const lowbit::RowMatrixXf w = lowbit::test::random_weights(rng, N, K);
                            const lowbit::TernaryWeights tw =
                                per_tensor ? lowbit::quantize_ternary_per_tensor(w) : lowbit::quantize_ternary(w, 64);
                            Eigen::VectorXf bias = Eigen::VectorXf::Random(N);
                            const lowbit::TernaryLinear layer(tw, bias, format);
                            lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
                            if (M > 2) x.row(2).setZero();  // all-zero token: scale 1, codes 0
                            const lowbit::RowMatrixXf y = layer.forward(x);

                            const auto act =
                                ternary::prepare_activations(x.data(), K, M, K, format, !per_tensor, "test");
                            lowbit::RowMatrixXf expected(M, N);
                            ternary::reference::ternary_matmul(layer.view(), act, expected.data(), N);
                            CHECK(lowbit::test::first_matrix_difference(y, expected) == -1);

                            // The same integers from the unpacked codes, and the float computation of them.
                            const lowbit::Int8Activations xq = lowbit::quantize_activations_int8(x);
                            const Index groups = per_tensor ? 1 : K / 64, width = K / groups;
                            for (Index m = 0; m < M; ++m)
                                for (Index n = 0; n < N; ++n) {
                                    std::vector<std::int32_t> isum(static_cast<std::size_t>(groups), 0);
                                    double exact = 0.0;
                                    for (Index k = 0; k < K; ++k) {
                                        isum[static_cast<std::size_t>(k / width)] += tw.codes(n, k) * xq.codes(m, k);
                                        const float gamma = per_tensor ? tw.scales(0, 0) : tw.scales(n, k / width);
                                        exact +=
                                            static_cast<double>(tw.codes(n, k)) * gamma * xq.codes(m, k) * xq.scales(m);
                                    }
                                    const float from_integers =
                                        per_tensor ? ternary::ternary_output_per_tensor(isum[0], tw.scales(0, 0),
                                                                                        xq.scales(m), bias(n))
                                                   : ternary::ternary_output_per_group(isum.data(), &tw.scales(n, 0),
                                                                                       groups, xq.scales(m), bias(n));
                                    CHECK(lowbit::test::same_bits(y(m, n), from_integers));
                                    exact += bias(n);
                                    double magnitude = std::fabs(static_cast<double>(bias(n)));
                                    for (Index k = 0; k < K; ++k)
                                        magnitude += std::fabs(static_cast<double>(xq.codes(m, k))) * xq.scales(m) *
                                                     (per_tensor ? tw.scales(0, 0) : tw.scales(n, k / width));
                                    CHECK(std::fabs(y(m, n) - exact) <= 4.0 * (groups + 2) * 6e-8 * magnitude + 1e-30);
                                }
                        }
    }
}

TEST_CASE("Ternary matmul: several thread ranges give the one-thread bits", "[ternary][kernels][threads]") {
    // N = 700 is 22 (AVX-512) or 88 (AVX2) panels, which 2 threads split into two ranges.
    auto rng = lowbit::test::make_rng(1535);
    const Index N = 700, K = 4096;
    const lowbit::RowMatrixXf w = lowbit::test::random_weights(rng, N, K);
    const lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, 6, K);
    for (const TernaryFormat format : {TernaryFormat::i2, TernaryFormat::tq1})
        for (const bool per_tensor : {true, false}) {
            const lowbit::TernaryLinear layer(
                per_tensor ? lowbit::quantize_ternary_per_tensor(w) : lowbit::quantize_ternary(w, 64), std::nullopt,
                format);
            lowbit::RowMatrixXf one_thread, two_threads;
            {
                const lowbit::test::ThreadCountGuard guard(1);
                one_thread = layer.forward(x);
            }
            {
                const lowbit::test::ThreadCountGuard guard(2);
                two_threads = layer.forward(x);
            }
            const auto act = ternary::prepare_activations(x.data(), K, x.rows(), K, format, !per_tensor, "test");
            lowbit::RowMatrixXf expected(x.rows(), N);
            ternary::reference::ternary_matmul(layer.view(), act, expected.data(), N);
            INFO("format " << lowbit::ternary_format_name(format) << ", per_tensor " << per_tensor);
            CHECK(lowbit::test::first_matrix_difference(one_thread, expected) == -1);
            CHECK(lowbit::test::first_matrix_difference(two_threads, expected) == -1);
        }
}

TEST_CASE("Ternary matmul: panel counts around the threads' ranges, and concurrent first forwards",
          "[ternary][kernels][threads]") {
    // The panels are split over threads one panel (NR output rows) per task and the activation blocks
    // (MR rows) likewise: N around one, two and three panels, M around one and two blocks, at 1 to 4
    // threads, give the reference's bits. Two threads calling one fresh layer build its panels once.
    auto rng = lowbit::test::make_rng(1545);
    constexpr Index NR = panel_rows<lowbit::detail::dispatch_int8_ops>();
    const Index K = 320;
    for (const bool per_tensor : {true, false})
        for (const Index N : {NR - 1, NR, NR + 1, 2 * NR + 1, 3 * NR})
            for (const Index M : {Index{1}, Index{5}, Index{7}, Index{13}}) {
                const lowbit::RowMatrixXf w = lowbit::test::random_weights(rng, N, K);
                const lowbit::TernaryLinear layer(per_tensor ? lowbit::quantize_ternary_per_tensor(w)
                                                             : lowbit::quantize_ternary(w, 64));
                const lowbit::RowMatrixXf x = lowbit::test::random_weights(rng, M, K);
                const auto act =
                    ternary::prepare_activations(x.data(), K, M, K, TernaryFormat::i2, !per_tensor, "test");
                lowbit::RowMatrixXf expected(M, N);
                ternary::reference::ternary_matmul(layer.view(), act, expected.data(), N);
                INFO("per_tensor " << per_tensor << ", N " << N << ", M " << M);
                for (const int threads : {1, 2, 3, 4}) {
                    const lowbit::test::ThreadCountGuard guard(threads);
                    INFO("threads " << threads);
                    CHECK(lowbit::test::first_matrix_difference(layer.forward(x), expected) == -1);
                }
                const lowbit::TernaryLinear fresh(layer.ternary_weights());
                lowbit::RowMatrixXf first, second;
                std::thread other([&] { first = fresh.forward(x); });
                second = fresh.forward(x);
                other.join();
                CHECK(lowbit::test::first_matrix_difference(first, expected) == -1);
                CHECK(lowbit::test::first_matrix_difference(second, expected) == -1);
            }
}

TEST_CASE("Ternary matmul: the kernel path is recorded", "[ternary][kernels]") {
#if defined(LOWBIT_RECORD_KERNEL_PATHS)
    using lowbit::detail::KernelOp;
    using lowbit::detail::KernelPath;
    const unsigned expected = static_cast<unsigned>(
        std::is_same_v<lowbit::detail::dispatch_int8_ops, void> ? KernelPath::reference : KernelPath::simd);
    lowbit::detail::reset_recorded_paths();
    auto rng = lowbit::test::make_rng(1540);
    const lowbit::TernaryLinear layer(lowbit::quantize_ternary_per_tensor(lowbit::test::random_weights(rng, 5, 128)));
    (void)layer.forward(lowbit::test::random_weights(rng, 1, 128));
    (void)layer.forward(lowbit::test::random_weights(rng, 3, 128));
    CHECK(lowbit::detail::recorded_paths(KernelOp::ternary_gemv) == expected);
    CHECK(lowbit::detail::recorded_paths(KernelOp::ternary_gemm) == expected);
#else
    SKIP("kernel paths are not recorded in this build (LOWBIT_RECORD_KERNEL_PATHS unset)");
#endif
}
