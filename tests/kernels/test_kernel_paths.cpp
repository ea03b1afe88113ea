// Proves which implementation ran: in a build with SIMD, every kernel operation must have run its SIMD
// kernel and never the scalar reference; in a LOWBIT_FORCE_SCALAR build, the reference. Without this a
// dispatch mistake would pass every numeric test (the reference gives the right answers too).
// lowbit-tests is compiled with LOWBIT_RECORD_KERNEL_PATHS (tests/CMakeLists.txt).
#include <type_traits>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/detail/dispatch/mlx_affine.hpp>
#include <lowbit/lowbit.hpp>

namespace {
using lowbit::detail::KernelOp;
using lowbit::detail::KernelPath;

unsigned path_bit(KernelPath path) { return static_cast<unsigned>(path); }

void check_ran(KernelOp op, const char* name) {
    INFO(name);
    const unsigned paths = lowbit::detail::recorded_paths(op);
    if constexpr (lowbit::detail::simd::enabled) {
        CHECK(paths == path_bit(KernelPath::simd));
    } else {
        CHECK(paths == path_bit(KernelPath::reference));
    }
}
}  // namespace

static_assert(
#if defined(LOWBIT_RECORD_KERNEL_PATHS)
    true,
#else
    false,
#endif
    "lowbit-tests must be built with LOWBIT_RECORD_KERNEL_PATHS");

TEST_CASE("every kernel operation ran its SIMD kernel (or, in a scalar build, its reference)", "[kernels][paths]") {
#if defined(LOWBIT_FORCE_SCALAR)
    CHECK_FALSE(lowbit::detail::simd::enabled);
#elif defined(__x86_64__) || defined(__aarch64__)
    CHECK(lowbit::detail::simd::enabled);  // these targets always have a SIMD unit xsimd knows
#endif
    lowbit::detail::reset_recorded_paths();

    const std::vector<float> x{-2.0f, 0.3f, 1.7f, 4.0f, -0.6f, 2.2f, 0.0f, 9.0f, -5.0f};
    lowbit::FakeQuantize<8, false> quantizer;
    quantizer.calibrate(x);
    (void)quantizer.forward(x);
    (void)quantizer.backward_clamped(std::vector<float>(x.size(), 1.0f), x);

    const lowbit::RowMatrixXf w = lowbit::RowMatrixXf::Random(24, 128);
    const auto q4 = lowbit::quantize<64, 4>(w);
    (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(1, 128), q4);
    (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(7, 128), q4);
    (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(33, 128), q4);

    check_ran(KernelOp::fake_quantize_forward, "fake_quantize_forward");
    check_ran(KernelOp::backward_clamped, "backward_clamped");
    check_ran(KernelOp::finite_min_max, "finite_min_max");
    check_ran(KernelOp::matmul_f32_gemv, "matmul_f32_gemv (M = 1, 4-bit)");
    check_ran(KernelOp::matmul_f32_gemm, "matmul_f32_gemm (M = 33)");
    if constexpr (lowbit::detail::simd::enabled)  // the reference records every M > 1 as a GEMM
        check_ran(KernelOp::matmul_f32_batch, "matmul_f32_batch (M = 7, 4-bit)");
    check_ran(KernelOp::quantize_group, "quantize_group");

    // Codes that straddle words (3-bit) have their own GEMV at M = 1 and batch GEMV up to the dispatch
    // table's batch_max_m rows, then the GEMM kernel, all SIMD (the reference records M > 1 as a GEMM, so
    // this holds for SIMD builds only).
    if constexpr (lowbit::detail::simd::enabled) {
        using straddling = lowbit::detail::MlxAffineF32Kernels<64, 3, lowbit::detail::dispatch_arch>;
        lowbit::detail::reset_recorded_paths();
        const auto q3 = lowbit::quantize<64, 3>(w);
        (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(1, 128), q3);
        check_ran(KernelOp::matmul_f32_gemv, "matmul_f32_gemv (M = 1, 3-bit)");
        (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(straddling::batch_max_m, 128), q3);
        check_ran(KernelOp::matmul_f32_batch, "matmul_f32_batch (M = batch_max_m, 3-bit)");
        CHECK(lowbit::detail::recorded_paths(KernelOp::matmul_f32_gemm) == 0u);
        (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(straddling::batch_max_m + 1, 128), q3);
        check_ran(KernelOp::matmul_f32_gemm, "matmul_f32_gemm (M = batch_max_m + 1, 3-bit)");
    }
}

TEST_CASE("the int8-activation matmul ran its SIMD kernel where the build has one", "[kernels][paths][int8]") {
    // AVX-512 VNNI+BW or AVX2+FMA targets have int8 kernels (detail/arch/int8.hpp); elsewhere, and in
    // a LOWBIT_FORCE_SCALAR build, the reference runs.
    constexpr bool int8_simd = !std::is_same_v<lowbit::detail::dispatch_int8_ops, void>;
#if defined(LOWBIT_FORCE_SCALAR)
    static_assert(!int8_simd);
#elif defined(__AVX512VNNI__) && defined(__AVX512BW__)
    static_assert(std::is_same_v<lowbit::detail::dispatch_int8_ops, lowbit::detail::simd::int8::avx512_vnni>);
#elif defined(__AVX2__) && defined(__FMA__)
    static_assert(std::is_same_v<lowbit::detail::dispatch_int8_ops, lowbit::detail::simd::int8::avx2>);
#endif
    const unsigned expected = path_bit(int8_simd ? KernelPath::simd : KernelPath::reference);
    const lowbit::RowMatrixXf w = lowbit::RowMatrixXf::Random(24, 128);
    lowbit::detail::reset_recorded_paths();
    (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(1, 128), lowbit::quantize<64, 4>(w), lowbit::Activations::int8);
    (void)lowbit::quantized_matmul(lowbit::RowMatrixXf::Random(7, 128), lowbit::quantize<64, 3>(w), lowbit::Activations::int8);
    CHECK(lowbit::detail::recorded_paths(KernelOp::matmul_i8_gemv) == expected);
    CHECK(lowbit::detail::recorded_paths(KernelOp::matmul_i8_gemm) == expected);
    CHECK(lowbit::detail::recorded_paths(KernelOp::matmul_f32_gemv) == 0u);  // no f32 kernel ran
    CHECK(lowbit::detail::recorded_paths(KernelOp::matmul_f32_gemm) == 0u);
}
