// The int8-activation matmul (docs/numerics.md N11, Activations::int8): the SIMD kernels (this build's
// detail::dispatch_int8_ops: the row-dot kernel of int8_gemv.hpp for a few rows, the panel GEMM of
// int8_gemm.hpp from MlxAffineI8Kernels::gemm_rows on) against the scalar reference
// (int8_matmul_reference.hpp, through the format's compiled entry) for every format of
// lowbit::test::TestedFormats (every format, or a
// representative set in the narrower CI presets: support/formats.hpp), over M and N around the 4-row block of the
// row-dot kernel, the row block (MR) and column panel (NR) of the GEMM and the ranges the drivers
// slice, K of 1..4 groups, one and two lane blocks of groups plus one (so partial blocks, chunk tails
// and panels whose words are not a whole number of transposed blocks are read), a large K, and odd
// strides; each kernel also called directly over every M, and the GEMM on a layer's panels (built
// once: QuantizedLinear's int8 forward; for one row, panels walked in pairs) bit for bit against the
// per-call GEMM; the vectorized activation quantizer against its reference; the integer sums bit for
// bit (inputs whose float arithmetic is exact); all-zero groups; ties at .5; NaN and Inf; and the
// documented bound of the int8 path against the f32 path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <lowbit/detail/dispatch/formats.hpp>
#include <lowbit/detail/gemm/int8_matmul_reference.hpp>
#include <lowbit/detail/mlx_affine/packing_reference.hpp>
#include <lowbit/formats/formats.hpp>
#include <lowbit/inference.hpp>

#include "support/formats.hpp"
#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

using Eigen::Index;
using lowbit::RowMatrixXf;
namespace detail = lowbit::detail;

constexpr float sentinel = 12345.0f;  // written in the row padding of out; no path may touch it

/// Per output: sum_g (|p_g| + |b| a sum|xq|) (for int8_kernel_tolerance) and sum_g a sum |s q + b| (for
/// the activation bound), from the reference quantizer; q is a code's value and s the group's scale
/// by the format's own rule (Format::value, Format::group_scale).
template <class Format>
struct Terms {
    std::vector<double> abs_terms, abs_quantization;
    Terms(const float* x, Index x_stride, Index M, const lowbit::QuantizedMatrixOf<Format>& q) {
        constexpr int GroupSize = Format::group_size;
        const Index N = q.rows(), K = q.cols(), groups = K / GroupSize;
        abs_terms.assign(static_cast<std::size_t>(M * N), 0.0);
        abs_quantization.assign(static_cast<std::size_t>(M * N), 0.0);
        std::vector<std::int8_t> xq(static_cast<std::size_t>(K));
        std::vector<float> a(static_cast<std::size_t>(groups));
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
        for (Index m = 0; m < M; ++m) {
            detail::reference::quantize_x_int8_groups<GroupSize>(x + m * x_stride, K, xq.data(), a.data());
            for (Index n = 0; n < N; ++n) {
                detail::reference::unpack_codes<Format::bits>(&q.codes(n, 0), static_cast<std::size_t>(K), codes.data());
                double terms = 0.0, quantization = 0.0;
                for (Index g = 0; g < groups; ++g) {
                    const double s = Format::group_scale(q.scales(n, g)), b = lowbit::test::group_bias(q, n, g);
                    double isum = 0.0, weight_abs = 0.0, xq_abs = 0.0;
                    for (Index k = g * GroupSize; k < (g + 1) * GroupSize; ++k) {
                        const double level = Format::value(codes[std::size_t(k)]);
                        isum += level * double(xq[std::size_t(k)]);
                        weight_abs += std::fabs(s * level + b);
                        xq_abs += std::fabs(double(xq[std::size_t(k)]));
                    }
                    const double scale = a[std::size_t(g)];
                    terms += std::fabs(s * scale * isum) + std::fabs(b) * scale * xq_abs;
                    quantization += scale * weight_abs;
                }
                abs_terms[std::size_t(m * N + n)] = terms;
                abs_quantization[std::size_t(m * N + n)] = quantization;
            }
        }
    }
};

/// Which code computes the int8 matmul in check_against_reference. layer_panels: the dispatch with a
/// layer's panel cache (QuantizedLinear's int8 forward), run twice (building the panels, then reusing
/// them) and checked bit for bit against the per-call panel GEMM, whose tiles it shares.
enum class Int8Runner { dispatch, row_dot_kernel, panel_gemm_kernel, layer_panels };

template <class Format>
void run_int8(Int8Runner runner, const float* x, Index x_stride, Index M, const lowbit::QuantizedMatrixOf<Format>& q,
              float* out, Index out_stride) {
    // One kernel for any M through the dispatch entry (compiled once for the suite: format_instances.hpp).
    if (runner == Int8Runner::layer_panels) {
        detail::Int8PanelCache panels;
        std::vector<float> first(static_cast<std::size_t>(M * out_stride), sentinel), per_call(first);
        detail::quantized_matmul_int8(x, x_stride, M, q.view(), first.data(), out_stride,
                                      detail::MatmulKernel::automatic, &panels);
        detail::quantized_matmul_int8(x, x_stride, M, q.view(), out, out_stride, detail::MatmulKernel::automatic,
                                      &panels);
        CHECK(std::equal(first.begin(), first.end(), out));
        // A format that keeps panels (MLX affine: 2, 4 and 8 bits, this build's column count: the test
        // below) runs the per-call GEMM's tiles on them.
        if (panels.panels.columns != 0) {
            detail::quantized_matmul_int8(x, x_stride, M, q.view(), per_call.data(), out_stride,
                                          detail::MatmulKernel::gemm);
            CHECK(std::equal(per_call.begin(), per_call.end(), out));
        }
        return;
    }
    const detail::MatmulKernel kernel = runner == Int8Runner::row_dot_kernel      ? detail::MatmulKernel::gemv
                                        : runner == Int8Runner::panel_gemm_kernel ? detail::MatmulKernel::gemm
                                                                                  : detail::MatmulKernel::automatic;
    detail::quantized_matmul_int8(x, x_stride, M, q.view(), out, out_stride, kernel);
}

/// Runs the int8 matmul (dispatched, or one kernel directly) and the reference on the same strided x
/// and out; checks every output within int8_kernel_tolerance and the padding untouched.
template <class Format>
void check_against_reference(std::mt19937_64& rng, Index M, Index N, Index K, Index x_padding, Index out_padding,
                             Int8Runner runner = Int8Runner::dispatch) {
    INFO("M = " << M << ", N = " << N << ", K = " << K << ", x stride +" << x_padding << ", out stride +" << out_padding
                << ", runner " << int(runner));
    constexpr int GroupSize = Format::group_size;
    const auto q = lowbit::quantize<Format>(lowbit::test::random_weights(rng, N, K));
    const Index x_stride = K + x_padding, out_stride = N + out_padding;
    const auto x = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(M * x_stride), -1.0f, 1.0f);
    std::vector<float> out(static_cast<std::size_t>(M * out_stride), sentinel), expected(out);
    run_int8(runner, x.data(), x_stride, M, q, out.data(), out_stride);
    detail::quantized_matmul_int8(x.data(), x_stride, M, q.view(), expected.data(), out_stride,
                                  detail::MatmulKernel::reference);
    const Terms<Format> terms(x.data(), x_stride, M, q);
    const auto groups = static_cast<std::size_t>(K / GroupSize);
    int failures = 0;
    for (Index m = 0; m < M; ++m) {
        for (Index n = 0; n < N; ++n) {
            const float got = out[std::size_t(m * out_stride + n)], want = expected[std::size_t(m * out_stride + n)];
            const double bound = lowbit::test::int8_kernel_tolerance(groups, terms.abs_terms[std::size_t(m * N + n)]);
            if (!(std::fabs(double(got) - double(want)) <= bound) && failures++ < 5) {
                INFO("m = " << m << ", n = " << n << ": kernel " << got << ", reference " << want << ", bound " << bound);
                CHECK(std::fabs(double(got) - double(want)) <= bound);
            }
        }
        for (Index n = N; n < out_stride; ++n) CHECK(out[std::size_t(m * out_stride + n)] == sentinel);
    }
    CHECK(failures == 0);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("int8 matmul kernels agree with the N11 reference", "[int8][kernels][N11]",
                        lowbit::test::TestedFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(0x1A80 + G * 16 + B);
    // The kernels take 4 activation rows at a time (1..3 at the end) and merge groups in blocks of
    // 16 (AVX-512) or 8 (AVX2) lanes; rows of codes are read in 64- or 32-byte chunks with a tail.
    for (const Index M : {1, 2, 3, 4, 5, 7, 8, 9})
        for (const Index N : {1, 3, 17})
            for (const Index groups : {1, 2, 3, 4}) check_against_reference<TestType>(rng, M, N, groups * G, M % 2, N % 3);
    for (const Index groups : {8, 9, 16, 17, 33}) check_against_reference<TestType>(rng, 5, 6, groups * G, 3, 1);
    check_against_reference<TestType>(rng, 1, 40, 4096, 0, 0);  // large K, GEMV
    check_against_reference<TestType>(rng, 6, 9, 4096, 5, 2);   // large K, GEMM with a 2-row tail
    // More output rows than one slice of the driver (8 KiB of codes) and one thread range.
    check_against_reference<TestType>(rng, 3, 300, 512, 1, 0);
    check_against_reference<TestType>(rng, 13, 300, 512, 1, 0);  // the GEMM: 10 panels of 32 columns, 3 row blocks
}

TEMPLATE_LIST_TEST_CASE("int8 GEMM: M around the row block, N around the column panel", "[int8][kernels][N11]",
                        lowbit::test::TestedFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(0x1A85 + G * 16 + B);
    // Row blocks of MR = 6 (AVX-512) or 4 (AVX2) rows, split evenly; panels of 32 or 8 columns, whose
    // words are transposed in blocks of 16 or 8 rows x words (the rest word by word); groups of words
    // unrolled 8 at a time.
    // The GEMM kernel directly (the dispatch takes it from MlxAffineI8Kernels::gemm_rows rows on).
    for (const Index M : {1, 3, 4, 5, 6, 7, 11, 12, 13, 25})
        for (const Index N : {7, 8, 9, 15, 16, 17, 31, 32, 33, 65})
            for (const Index groups : {1, 3, 8})
                check_against_reference<TestType>(rng, M, N, groups * G, N % 2, M % 3, Int8Runner::panel_gemm_kernel);
    // The row-dot kernel directly past the rows the dispatch gives it; the dispatch on both sides of the threshold.
    for (const Index M : {4, 5, 9, 12, 13}) check_against_reference<TestType>(rng, M, 33, 5 * G, 1, 2, Int8Runner::row_dot_kernel);
    for (const Index M : {11, 12, 13}) check_against_reference<TestType>(rng, M, 33, 5 * G, 1, 2);
}

TEMPLATE_LIST_TEST_CASE("int8 GEMM on a layer's panels: every M, N around the panel, built once",
                        "[int8][kernels][N11]", lowbit::test::TestedFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(0x1A86 + G * 16 + B);
    // The panels of the whole matrix, built on the first call (Int8PanelCache): the MLX words for 2, 4
    // and 8 bits, the codes repacked at 2, 4 or 8 bits for 1, 3, 5 and 6.
    for (const Index M : {1, 2, 5, 8, 13})
        for (const Index N : {7, 32, 33, 65})
            for (const Index groups : {1, 3})
                check_against_reference<TestType>(rng, M, N, groups * G, M % 2, N % 3, Int8Runner::layer_panels);
    check_against_reference<TestType>(rng, 3, 300, 512, 1, 0, Int8Runner::layer_panels);  // several panels per pass and thread
    // One row walks two panels side by side, half the range apart (an odd last one alone): 10 and 7
    // panels over one or two threads; two rows one at a time.
    for (const Index M : {1, 2}) {
        check_against_reference<TestType>(rng, M, 300, 512, 0, 1, Int8Runner::layer_panels);
        check_against_reference<TestType>(rng, M, 200, 3 * G, 1, 0, Int8Runner::layer_panels);
    }
}

TEMPLATE_LIST_TEST_CASE("MLX affine layers of every width keep int8 panels of this build's width",
                        "[int8][kernels][N11]", lowbit::test::TestedAffineFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    using table = detail::MlxAffineI8Kernels<G, B, detail::dispatch_int8_ops>;
    auto rng = lowbit::test::make_rng(0x1A87 + G * 16 + B);
    const auto q = lowbit::quantize<TestType>(lowbit::test::random_weights(rng, 9, 2 * G));
    const auto x = lowbit::test::uniform_floats(rng, 2 * 2 * G, -1.0f, 1.0f);
    std::vector<float> out(2 * 9);
    detail::Int8PanelCache panels;
    detail::quantized_matmul_int8(x.data(), 2 * G, 2, q.view(), out.data(), 9, detail::MatmulKernel::automatic, &panels);
    if constexpr (table::prepacked) CHECK(panels.panels.columns == detail::kernels::Int8TileShape<typename table::ops>::columns);
    else CHECK(panels.panels.columns == 0);
}

TEMPLATE_LIST_TEST_CASE("int8 matmul integer sums are bit-exact (exact float inputs)", "[int8][kernels][N11]",
                        lowbit::test::TestedAffineFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(0x1A81 + G * 16 + B);
    // x integers in [-127, 127] with a 127 in every group: a = 1 exactly, xq = x. Scales 1, biases 0:
    // y = sum of isum, an integer below 2^24, so every float operation is exact in any order.
    const Index K = 2 * G, N = 23;
    for (const Index M : {1, 4, 6}) {
        INFO("M = " << M);
        std::uniform_int_distribution<int> value(-127, 127), code(0, (1 << B) - 1);
        RowMatrixXf x(M, K);
        for (Index m = 0; m < M; ++m)
            for (Index k = 0; k < K; ++k) x(m, k) = k % G == (m * 7) % G ? (m % 2 ? -127.0f : 127.0f) : float(value(rng));
        lowbit::QuantizedMatrix<G, B> q;
        q.codes.resize(N, K * B / 32);
        q.scales = RowMatrixXf::Ones(N, 2);
        q.biases = RowMatrixXf::Zero(N, 2);
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
        RowMatrixXf exact(M, N);
        for (Index n = 0; n < N; ++n) {
            for (auto& c : codes) c = static_cast<std::uint8_t>(code(rng));
            lowbit::detail::kernels::pack_codes<B>(codes.data(), codes.size(), &q.codes(n, 0));
            for (Index m = 0; m < M; ++m) {
                std::int64_t sum = 0;
                for (Index k = 0; k < K; ++k) sum += std::int64_t{codes[std::size_t(k)]} * std::int64_t(x(m, k));
                exact(m, n) = static_cast<float>(sum);
            }
        }
        const RowMatrixXf y = lowbit::quantized_matmul(x, q, lowbit::Activations::int8);
        RowMatrixXf reference(M, N);
        detail::reference::quantized_matmul_int8(x.data(), K, M, q.view(), reference.data(), N);
        CHECK(reference == exact);
        CHECK(y == exact);
    }
}

TEST_CASE("mxfp4 int8 matmul: the offset codes' sums are bit-exact (exact float inputs)", "[int8][kernels][N11]") {
    using lowbit::Mxfp4;
    auto rng = lowbit::test::make_rng(0x1A84);
    // x integers in [-127, 127] with a 127 in every group: a = 1 exactly, xq = x. Scale bytes 128
    // (group_scale 2^0): y = sum of value(code) * x, integers below 2^24, exact in any order. Every code
    // value, extreme activations included, through the decode table and the offset of 12.
    const Index K = 4 * Mxfp4::group_size, N = 37;
    for (const Index M : {1, 4, 7, 13}) {
        INFO("M = " << M);
        std::uniform_int_distribution<int> value(-127, 127), code(0, 15);
        RowMatrixXf x(M, K);
        for (Index m = 0; m < M; ++m)
            for (Index k = 0; k < K; ++k)
                x(m, k) = k % 32 == (m * 5) % 32 ? (m % 2 ? -127.0f : 127.0f) : float(value(rng));
        x.row(0).segment(32, 32).setConstant(-127.0f);  // the largest negative code sum
        lowbit::QuantizedMatrixOf<Mxfp4> q;
        q.codes.resize(N, K / 8);
        q.scales.setConstant(N, K / 32, std::uint8_t{128});
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
        RowMatrixXf exact(M, N);
        for (Index n = 0; n < N; ++n) {
            for (auto& c : codes) c = static_cast<std::uint8_t>(n == 0 ? 7 : code(rng));  // row 0: all +12
            lowbit::detail::kernels::pack_codes<4>(codes.data(), codes.size(), &q.codes(n, 0));
            for (Index m = 0; m < M; ++m) {
                std::int64_t sum = 0;
                for (Index k = 0; k < K; ++k)
                    sum += std::int64_t(Mxfp4::value(codes[std::size_t(k)])) * std::int64_t(x(m, k));
                exact(m, n) = static_cast<float>(sum);
            }
        }
        RowMatrixXf reference(M, N), y(M, N), y_panels(M, N);
        detail::reference::quantized_matmul_int8(x.data(), K, M, q.view(), reference.data(), N);
        detail::quantized_matmul_int8(x.data(), K, M, q.view(), y.data(), N, detail::MatmulKernel::automatic);
        detail::Int8PanelCache panels;
        detail::quantized_matmul_int8(x.data(), K, M, q.view(), y_panels.data(), N, detail::MatmulKernel::automatic,
                                      &panels);
        CHECK(reference == exact);
        CHECK(y == exact);
        CHECK(y_panels == exact);
    }
}

TEST_CASE("mxfp8 int8 matmul: the digit planes' sums are bit-exact (exact float inputs)", "[int8][kernels][N11]") {
    using lowbit::Mxfp8;
    auto rng = lowbit::test::make_rng(0x1A88);
    // x integers in [-127, 127] with a +-127 in every group: a = 1 exactly, xq = x. Scale bytes 136
    // (group_scale 2^0): each group adds float(isum) (rounded to even from 2^24 on, N11), in group order,
    // so the kernels equal the int64 sums rounded that way bit for bit. Every code byte, the NaN patterns
    // (+-480 * 2^9) included; row 0 all 0x7F and row 1 all 0xFF against all-127 and all-(-127) groups:
    // the extremes of the int32 bound.
    const Index K = 4 * Mxfp8::group_size, N = 37;
    for (const Index M : {1, 4, 7, 13}) {
        INFO("M = " << M);
        std::uniform_int_distribution<int> value(-127, 127), code(0, 255);
        RowMatrixXf x(M, K);
        for (Index m = 0; m < M; ++m)
            for (Index k = 0; k < K; ++k)
                x(m, k) = k % 32 == (m * 5) % 32 ? (m % 2 ? -127.0f : 127.0f) : float(value(rng));
        x.row(0).segment(32, 32).setConstant(-127.0f);
        x.row(0).segment(64, 32).setConstant(127.0f);
        lowbit::QuantizedMatrixOf<Mxfp8> q;
        q.codes.resize(N, K / 4);
        q.scales.setConstant(N, K / 32, std::uint8_t{136});
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
        RowMatrixXf exact(M, N);
        for (Index n = 0; n < N; ++n) {
            for (auto& c : codes) c = static_cast<std::uint8_t>(n == 0 ? 0x7F : n == 1 ? 0xFF : code(rng));
            lowbit::detail::kernels::pack_codes<8>(codes.data(), codes.size(), &q.codes(n, 0));
            for (Index m = 0; m < M; ++m) {
                float total = 0.0f;
                for (Index g = 0; g < K / 32; ++g) {
                    std::int64_t sum = 0;
                    for (Index k = g * 32; k < (g + 1) * 32; ++k)
                        sum += std::int64_t(Mxfp8::value(codes[std::size_t(k)])) * std::int64_t(x(m, k));
                    total += static_cast<float>(sum);
                }
                exact(m, n) = total;
            }
        }
        RowMatrixXf reference(M, N), y(M, N), y_panels(M, N);
        detail::reference::quantized_matmul_int8(x.data(), K, M, q.view(), reference.data(), N);
        detail::quantized_matmul_int8(x.data(), K, M, q.view(), y.data(), N, detail::MatmulKernel::automatic);
        detail::Int8PanelCache panels;
        detail::quantized_matmul_int8(x.data(), K, M, q.view(), y_panels.data(), N, detail::MatmulKernel::automatic,
                                      &panels);
        CHECK(reference == exact);
        CHECK(y == exact);
        CHECK(y_panels == exact);
    }
}

TEMPLATE_LIST_TEST_CASE("int8 matmul stays within the documented bound of the f32 path", "[int8][N11]",
                        lowbit::test::TestedFormats) {
    constexpr int G = TestType::group_size, B = TestType::bits;
    auto rng = lowbit::test::make_rng(0x1A82 + G * 16 + B);
    for (const Index M : {1, 5}) {
        const Index N = 19, K = 8 * G;
        const auto q = lowbit::quantize<TestType>(lowbit::test::random_weights(rng, N, K));
        RowMatrixXf x(M, K);
        const auto values = lowbit::test::uniform_floats(rng, static_cast<std::size_t>(M * K), -2.0f, 2.0f);
        std::copy(values.begin(), values.end(), x.data());
        x.row(0).segment(G, G).setZero();  // an all-zero group
        const RowMatrixXf y8 = lowbit::quantized_matmul(x, q, lowbit::Activations::int8);
        const RowMatrixXf y32 = lowbit::quantized_matmul(x, q);
        const Terms<TestType> terms(x.data(), K, M, q);
        for (Index m = 0; m < M; ++m)
            for (Index n = 0; n < N; ++n) {
                // |s q| + |b| per input, as in the f32 path's own bound (N10).
                double abs_sum = 0.0;
                const RowMatrixXf w = lowbit::dequantize(q);
                for (Index k = 0; k < K; ++k)
                    abs_sum += std::fabs(double(x(m, k))) *
                               (std::fabs(double(w(n, k)) - lowbit::test::group_bias(q, n, k / G)) +
                                std::fabs(lowbit::test::group_bias(q, n, k / G)));
                const double bound =
                    lowbit::test::int8_activation_error_bound(terms.abs_quantization[std::size_t(m * N + n)]) +
                    lowbit::test::dot_tolerance(std::size_t(K), abs_sum) +
                    lowbit::test::int8_kernel_tolerance(std::size_t(K / G), terms.abs_terms[std::size_t(m * N + n)]);
                INFO("m = " << m << ", n = " << n);
                CHECK(std::fabs(double(y8(m, n)) - double(y32(m, n))) <= bound);
            }
    }
}

TEST_CASE("int8 activation quantizer: kernel equals reference, zero groups, ties to even", "[int8][kernels][N11]") {
    constexpr int G = 32;
    using arch = detail::dispatch_arch;
    auto rng = lowbit::test::make_rng(0x1A83);
    // Generic, so that the kernel call is not instantiated in a build without SIMD (no arch to give it).
    auto run_both = [](const auto& x, std::vector<std::int8_t>& codes, std::vector<float>& a) {
        const auto K = static_cast<Index>(x.size());
        std::vector<std::int8_t> codes_ref(x.size());
        std::vector<float> a_ref(x.size() / G);
        codes.assign(x.size(), 99);
        a.assign(x.size() / G, -1.0f);
        detail::reference::quantize_x_int8_groups<G>(x.data(), K, codes_ref.data(), a_ref.data());
        if constexpr (lowbit::detail::simd::enabled) {
            detail::kernels::quantize_x_int8_groups<arch, G>(x.data(), K, codes.data(), a.data());
            CHECK(codes == codes_ref);
            CHECK(a == a_ref);
        }
        codes = codes_ref;
        a = a_ref;
    };
    std::vector<std::int8_t> codes;
    std::vector<float> a;

    SECTION("random rows over many magnitudes") {
        for (int trial = 0; trial < 50; ++trial) {
            const float magnitude = std::ldexp(1.0f, trial - 25);
            auto x = lowbit::test::uniform_floats(rng, 4 * G, -magnitude, magnitude);
            run_both(x, codes, a);
            for (std::size_t k = 0; k < x.size(); ++k) CHECK(std::abs(int(codes[k])) <= 127);
        }
    }
    SECTION("an all-zero group has scale 0 and codes 0; a subnormal group stays in range") {
        std::vector<float> x(3 * G, 0.0f);
        x[G] = std::numeric_limits<float>::denorm_min();
        x[G + 1] = -std::numeric_limits<float>::denorm_min();
        for (int k = 0; k < G; ++k) x[std::size_t(2 * G + k)] = std::numeric_limits<float>::min() * float(k - 16);
        run_both(x, codes, a);
        CHECK(a[0] == 0.0f);
        for (int k = 0; k < G; ++k) CHECK(codes[std::size_t(k)] == 0);
        for (const auto c : codes) CHECK(std::abs(int(c)) <= 127);
    }
    SECTION("ties at .5 of x / a round to even") {
        // max |x| = 127 gives a = 1 exactly, so x / a = x.
        std::vector<float> x(G, 0.0f);
        const std::vector<float> values{127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, -2.5f, 126.5f, -125.5f};
        std::copy(values.begin(), values.end(), x.begin());
        run_both(x, codes, a);
        CHECK(a[0] == 1.0f);
        const std::vector<int> expected{127, 2, -4, 0, 0, 2, -2, 126, -126};
        for (std::size_t i = 0; i < expected.size(); ++i) CHECK(int(codes[i]) == expected[i]);
    }
}

TEST_CASE("int8 matmul: the bias term multiplies the dequantized activations (worked example)", "[int8][N11]") {
    // Codes 0 and scales 1, biases 1: every weight is 1, so y is the sum of the activations the path
    // uses. x = [127, 0.4 x 63] per group of 64: a = 1, xq = [127, 0 x 63], so the int8 path gives the
    // dequantized activations' sum 127 in every group (not sum x = 152.2: the bias term must see the
    // same activations as the scale term, or their rounding errors stop cancelling; N11), at every M
    // and on every kernel (row dot, GEMM, a layer's panels).
    for (const Index M : {1, 3, 13}) {
        INFO("M = " << M);
        lowbit::QuantizedMatrix<64, 4> q;
        q.codes = lowbit::QuantizedMatrix<64, 4>::CodeMatrix::Zero(5, 128 * 4 / 32);
        q.scales = RowMatrixXf::Ones(5, 2);
        q.biases = RowMatrixXf::Ones(5, 2);
        RowMatrixXf x = RowMatrixXf::Constant(M, 128, 0.4f);
        x.col(0).setConstant(127.0f);
        x.col(64).setConstant(-127.0f);                        // the second group: -127 + 0 = -127
        const RowMatrixXf expected = RowMatrixXf::Zero(M, 5);  // 127 - 127
        CHECK(lowbit::quantized_matmul(x, q, lowbit::Activations::int8) == expected);
        for (const auto kernel :
             {detail::MatmulKernel::reference, detail::MatmulKernel::gemv, detail::MatmulKernel::gemm}) {
            RowMatrixXf y(M, 5);
            detail::quantized_matmul_int8(x.data(), 128, M, q.view(), y.data(), 5, kernel);
            CHECK(y == expected);
        }
        const lowbit::QuantizedLinear<64, 4> layer(q);
        CHECK(layer.forward(x, lowbit::Activations::int8) == expected);
        // The f32 path multiplies x itself: 2 * 63 * 0.4 in float.
        CHECK(std::fabs(lowbit::quantized_matmul(x, q)(0, 0) - 50.4f) < 1e-4f);
    }
}

TEST_CASE("int8 matmul: ties, zero rows and the f32 default are unchanged", "[int8][N11]") {
    auto rng = lowbit::test::make_rng(0x1A84);
    const auto q = lowbit::quantize<64, 4>(lowbit::test::random_weights(rng, 21, 128));
    RowMatrixXf x = RowMatrixXf::Zero(3, 128);
    x.row(1).setConstant(0.5f);
    x(1, 0) = 127.0f;  // a = 1: every other value is a tie at 0.5, code 0
    x(1, 64) = -127.0f;
    x.row(2) = RowMatrixXf::Random(1, 128);
    const RowMatrixXf y = lowbit::quantized_matmul(x, q, lowbit::Activations::int8);
    RowMatrixXf reference(3, 21);
    detail::reference::quantized_matmul_int8(x.data(), 128, 3, q.view(), reference.data(), 21);
    CHECK(y.row(0).isZero(0.0f));  // all-zero row: a = 0, codes 0, xsum 0
    for (Index n = 0; n < 21; ++n) CHECK(std::fabs(y(1, n) - reference(1, n)) <= 1e-4f * (1.0f + std::fabs(reference(1, n))));

    // Activations::f32 is exactly the default.
    CHECK(lowbit::quantized_matmul(x, q, lowbit::Activations::f32) == lowbit::quantized_matmul(x, q));
    const lowbit::QuantizedLinear<64, 4> layer(q, Eigen::VectorXf::Constant(21, 0.25f));
    CHECK(layer.forward(x, lowbit::Activations::f32) == layer.forward(x));
    // The layer's int8 forward runs the panel GEMM (on its panels, at every M): bit for bit the per-call
    // GEMM's result plus the bias; a copy shares the panels and gives the same.
    RowMatrixXf gemm(3, 21);
    detail::quantized_matmul_int8(x.data(), 128, 3, q.view(), gemm.data(), 21, detail::MatmulKernel::gemm);
    const RowMatrixXf y_layer = layer.forward(x, lowbit::Activations::int8);
    CHECK(y_layer == (gemm.rowwise() + Eigen::RowVectorXf::Constant(21, 0.25f)));
    const lowbit::QuantizedLinear<64, 4> copy = layer;
    CHECK(copy.forward(x, lowbit::Activations::int8) == y_layer);
    // A cache holding another microkernel's panels (a program mixing instruction sets) is left alone:
    // the call packs per call.
    detail::Int8PanelCache foreign;
    std::call_once(foreign.built, [&] { foreign.panels.columns = 1; });
    RowMatrixXf y_foreign(3, 21);
    detail::quantized_matmul_int8(x.data(), 128, 3, q.view(), y_foreign.data(), 21, detail::MatmulKernel::automatic,
                                  &foreign);
    CHECK(y_foreign == y);
    CHECK(foreign.panels.columns == 1);

    // Thread count never changes a result.
    const RowMatrixXf big_x = RowMatrixXf::Random(6, 128);
    const auto big_q = lowbit::quantize<64, 4>(lowbit::test::random_weights(rng, 700, 128));
    const int threads = lowbit::num_threads();
    lowbit::set_num_threads(1);
    const RowMatrixXf one = lowbit::quantized_matmul(big_x, big_q, lowbit::Activations::int8);
    lowbit::set_num_threads(2);
    const RowMatrixXf two = lowbit::quantized_matmul(big_x, big_q, lowbit::Activations::int8);
    lowbit::set_num_threads(threads);
    CHECK(one == two);
}

TEST_CASE("int8 matmul rejects NaN and Inf in x, naming row and column, and what f32 rejects", "[int8][N11]") {
    const auto q = lowbit::quantize<32, 4>(RowMatrixXf::Random(5, 64));
    RowMatrixXf x = RowMatrixXf::Random(3, 64);
    x(2, 5) = std::numeric_limits<float>::quiet_NaN();
    using Catch::Matchers::ContainsSubstring;
    CHECK_THROWS_WITH(lowbit::quantized_matmul(x, q, lowbit::Activations::int8),
                      ContainsSubstring("lowbit::quantized_matmul") && ContainsSubstring("x(2, 5)"));
    x(2, 5) = 0.0f;
    x(1, 63) = -std::numeric_limits<float>::infinity();
    const lowbit::QuantizedLinear<32, 4> layer(q);
    CHECK_THROWS_WITH(layer.forward(x, lowbit::Activations::int8),
                      ContainsSubstring("QuantizedLinear::forward") && ContainsSubstring("x(1, 63)"));
    CHECK_NOTHROW(lowbit::quantized_matmul(x, q));  // f32 propagates non-finite values, as before
    // Shape errors are the f32 path's.
    CHECK_THROWS_AS(lowbit::quantized_matmul(RowMatrixXf::Random(2, 32), q, lowbit::Activations::int8), std::invalid_argument);
    CHECK(lowbit::quantized_matmul(RowMatrixXf(0, 64), q, lowbit::Activations::int8).rows() == 0);  // empty batch
}

TEST_CASE("int8 matmul's finite check sees every element of x and nothing outside it", "[int8][N11]") {
    // Every position of a 3 x 96 x (vector tails, every row), for NaN, +Inf and -Inf; x taken as a
    // block of a wider matrix (a strided view) whose other columns hold NaN, which must not count.
    using Catch::Matchers::ContainsSubstring;
    const auto q = lowbit::quantize<32, 4>(RowMatrixXf::Random(4, 96));
    RowMatrixXf wide = RowMatrixXf::Random(3, 100);
    wide.rightCols(4).setConstant(std::numeric_limits<float>::quiet_NaN());
    wide(0, 0) = std::numeric_limits<float>::max();  // finite extremes are not faults
    wide(1, 1) = -std::numeric_limits<float>::max();
    wide(2, 2) = std::numeric_limits<float>::denorm_min();
    // Rows 0 and 1 overflow to +-Inf and NaN (as the f32 path's sums do): the same in both forms.
    const RowMatrixXf expected = lowbit::quantized_matmul(RowMatrixXf(wide.leftCols(96)), q, lowbit::Activations::int8);
    const RowMatrixXf strided = lowbit::quantized_matmul(wide.leftCols(96), q, lowbit::Activations::int8);
    CHECK(((strided.array() == expected.array()) || (strided.array().isNaN() && expected.array().isNaN())).all());
    const float faults[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    for (const float fault : faults)
        for (Eigen::Index r = 0; r < 3; ++r)
            for (Eigen::Index c = 0; c < 96; ++c) {
                const float kept = wide(r, c);
                wide(r, c) = fault;
                const std::string where = "x(" + std::to_string(r) + ", " + std::to_string(c) + ")";
                CHECK_THROWS_WITH(lowbit::quantized_matmul(wide.leftCols(96), q, lowbit::Activations::int8),
                                  ContainsSubstring(where));
                wide(r, c) = kept;
            }
    // A column-major x (copied to row-major first) is checked the same way.
    Eigen::MatrixXf column_major = wide.leftCols(96);
    column_major(2, 95) = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(lowbit::quantized_matmul(column_major, q, lowbit::Activations::int8), ContainsSubstring("x(2, 95)"));
}
