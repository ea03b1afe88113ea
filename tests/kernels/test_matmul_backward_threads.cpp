// quantized_matmul_dx (docs/numerics.md N20) at shapes large enough that two threads really split the
// work (the GEMV's chunks, the panel GEMM's tiles of at least 2 MFLOP), for the tsan preset, which runs
// the [threads] tests under ThreadSanitizer. A file of its own so that tsan's build (which compiles only
// the test files naming [threads], kernels included) compiles three formats, not every one.
#include <tuple>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>

#include <lowbit/inference.hpp>
#include <lowbit/quantized_backward.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"

TEMPLATE_TEST_CASE("quantized_matmul_dx: two threads split the work and give the one-thread bits",
                   "[backward][N20][threads]", (lowbit::MlxAffine<64, 4>), (lowbit::MlxAffine<32, 8>), lowbit::Nvfp4) {
    using Index = Eigen::Index;
    auto rng = lowbit::test::make_rng(2004);
    for (const auto& [M, N, K] : {std::tuple<Index, Index, Index>{1, 64, 2048}, {40, 512, 1024}}) {
        INFO(lowbit::test::format_text<TestType>() << ", M = " << M << ", N = " << N << ", K = " << K);
        const auto q = lowbit::quantize<TestType>(lowbit::test::random_weights(rng, N, K));
        const lowbit::RowMatrixXf dy = lowbit::test::random_weights(rng, M, N);
        lowbit::RowMatrixXf one, two;
        {
            const lowbit::test::ThreadCountGuard threads(1);
            one = lowbit::quantized_matmul_dx(dy, q);
        }
        {
            const lowbit::test::ThreadCountGuard threads(2);
            two = lowbit::quantized_matmul_dx(dy, q);
        }
        CHECK(one == two);
    }
}
