// Threaded entry points at the edges of their thread split: sizes just under, at and just over one
// grain, and between one and `threads` grains, at 1, 2, 3 and 4 threads. parallel_for cuts [0, count)
// into min(threads, ceil(count / grain)) nearly equal ranges (detail/threading/parallel.hpp), so between one and
// `threads` grains the ranges are shorter than a grain: any per-range bookkeeping indexed by
// begin / grain collides there. Every result must equal the 1-thread result bit for bit, and every
// reduction must find the extremes wherever they are: at the ends, and in the middle of each range.
//
// Tagged [threads]: the tsan preset runs these under ThreadSanitizer.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/lowbit.hpp>

#include "support/compare.hpp"
#include "support/random.hpp"
#include "support/threads.hpp"
#include "support/tolerance.hpp"

namespace {
using lowbit::test::first_difference;
using lowbit::test::first_matrix_difference;
using lowbit::test::same_bits;
using lowbit::test::ThreadCountGuard;

using lowbit::RowMatrixXf;
using Eigen::Index;

/// Restores the default thread count however the test ends.

constexpr std::size_t grain = lowbit::detail::elementwise_grain;
constexpr int thread_counts[] = {1, 2, 3, 4};

/// First index of range r when parallel_for splits count into `ranges` pieces (detail/threading/parallel.hpp).
std::size_t range_begin(std::size_t count, std::size_t ranges, std::size_t r) {
    const std::size_t base = count / ranges, extra = count % ranges;
    return r * base + std::min(r, extra);
}

/// Middle index of range r of the split parallel_for makes for count, grain and threads (r clipped to
/// the ranges there are).
std::size_t middle_of_range(std::size_t count, std::size_t grain_size, std::size_t threads, std::size_t r) {
    const std::size_t ranges = std::max<std::size_t>(1, std::min(threads, (count + grain_size - 1) / grain_size));
    r = std::min(r, ranges - 1);
    return (range_begin(count, ranges, r) + range_begin(count, ranges, r + 1)) / 2;
}

/// The element-wise sizes around the grain.
std::vector<std::size_t> elementwise_sizes() {
    return {grain - 1, grain, grain + 1, 2 * grain - 1, 2 * grain + 1, 3 * grain + 5, 4 * grain - 3};
}




constexpr float placed_min = -2.5f;
constexpr float placed_max = 3.75f;

/// Uniform [-1, 1) data with a +Inf, a -Inf and a NaN sprinkled in (skipped by the observers), then
/// the extremes placed at min_at and max_at.
std::vector<float> data_with_extremes(std::size_t count, std::size_t min_at, std::size_t max_at, std::uint64_t salt) {
    auto rng = lowbit::test::make_rng(salt);
    std::vector<float> x = lowbit::test::uniform_floats(rng, count, -1.0f, 1.0f);
    x[count / 5] = std::numeric_limits<float>::infinity();
    x[count / 7] = -std::numeric_limits<float>::infinity();
    x[count / 11] = std::numeric_limits<float>::quiet_NaN();
    x[min_at] = placed_min;
    x[max_at] = placed_max;
    return x;
}

/// Where the extremes go for one size: the two ends both ways round, and the middles of ranges 1, 2
/// and 3 of the 2-, 3- and 4-thread splits.
std::vector<std::pair<std::size_t, std::size_t>> placements(std::size_t count) {
    std::vector<std::pair<std::size_t, std::size_t>> result{{0, count - 1}, {count - 1, 0}};
    for (std::size_t threads : {2u, 3u, 4u}) {
        for (std::size_t r = 1; r < threads; ++r) {
            const std::size_t middle = middle_of_range(count, grain, threads, r);
            result.emplace_back(middle, middle + 1);
            result.emplace_back(middle + 1, middle);
        }
    }
    return result;
}

}  // namespace

TEST_CASE("observers find the extremes at every grain boundary and thread count", "[threads][boundaries]") {
    ThreadCountGuard guard;
    std::uint64_t salt = 9100;
    for (const std::size_t count : elementwise_sizes()) {
        for (const auto& [min_at, max_at] : placements(count)) {
            const std::vector<float> x = data_with_extremes(count, min_at, max_at, ++salt);
            lowbit::FakeQuantize<8, false> expected;
            expected.calibrate_range(placed_min, placed_max);
            for (const int threads : thread_counts) {
                lowbit::set_num_threads(threads);
                INFO("count " << count << " (grain " << grain << "), min at " << min_at << ", max at " << max_at
                              << ", threads " << threads);

                lowbit::FakeQuantize<8, false> calibrated;
                calibrated.calibrate(x);
                CHECK(calibrated.observed_min() == placed_min);
                CHECK(calibrated.observed_max() == placed_max);
                CHECK(calibrated.scale() == expected.scale());
                CHECK(calibrated.zero_point() == expected.zero_point());

                lowbit::FakeQuantize<8, false> observed;
                observed.observe(std::vector<float>{0.0f, 0.5f});
                observed.observe(x);
                CHECK(observed.observed_min() == placed_min);
                CHECK(observed.observed_max() == placed_max);

                // The same data as a 1 x count row-major matrix and as a count x 1 column.
                lowbit::FakeQuantize<8, true> symmetric;
                symmetric.calibrate(Eigen::Map<const RowMatrixXf>(x.data(), 1, static_cast<Index>(count)));
                CHECK(symmetric.observed_min() == placed_min);
                CHECK(symmetric.observed_max() == placed_max);
                CHECK(symmetric.scale() == placed_max / 127.0f);

                // Per channel: one channel spanning all of x, and the Eigen form.
                lowbit::PerChannelFakeQuantize<8, false> per_channel;
                per_channel.calibrate(x, 1);
                REQUIRE(per_channel.channels() == 1);
                CHECK(per_channel.channel(0).observed_min() == placed_min);
                CHECK(per_channel.channel(0).observed_max() == placed_max);
                per_channel.calibrate(Eigen::Map<const RowMatrixXf>(x.data(), 1, static_cast<Index>(count)));
                CHECK(per_channel.channel(0).observed_min() == placed_min);
                CHECK(per_channel.channel(0).observed_max() == placed_max);
                per_channel.observe(x, 1);
                CHECK(per_channel.channel(0).observed_min() == placed_min);
                CHECK(per_channel.channel(0).observed_max() == placed_max);
            }
        }
    }
}

TEST_CASE("forward_with_calibration calibrates on the whole input at every grain boundary", "[threads][boundaries]") {
    ThreadCountGuard guard;
    std::uint64_t salt = 9200;
    for (const std::size_t count : elementwise_sizes()) {
        for (const auto& [min_at, max_at] : placements(count)) {
            const std::vector<float> x = data_with_extremes(count, min_at, max_at, ++salt);
            lowbit::set_num_threads(1);
            lowbit::FakeQuantize<4> one_thread;
            const std::vector<float> expected = one_thread.forward_with_calibration(x);
            REQUIRE(one_thread.scale() == placed_max / 7.0f);
            for (const int threads : {2, 3, 4}) {
                lowbit::set_num_threads(threads);
                INFO("count " << count << ", min at " << min_at << ", max at " << max_at << ", threads " << threads);
                lowbit::FakeQuantize<4> quantizer;
                const std::vector<float> y = quantizer.forward_with_calibration(x);
                CHECK(quantizer.scale() == one_thread.scale());
                CHECK(first_difference(y, expected) == -1);
            }
        }
    }
}

TEST_CASE("element-wise passes equal the 1-thread result and the reference at every grain boundary",
          "[threads][boundaries]") {
    ThreadCountGuard guard;
    std::uint64_t salt = 9300;
    for (const std::size_t count : elementwise_sizes()) {
        const std::vector<float> x = data_with_extremes(count, 0, count - 1, ++salt);
        auto rng = lowbit::test::make_rng(++salt);
        const std::vector<float> grad = lowbit::test::uniform_floats(rng, count, -1.0f, 1.0f);

        lowbit::FakeQuantize<8, false> asymmetric;
        asymmetric.calibrate_range(-1.5f, 2.0f);
        lowbit::FakeQuantize<8> pytorch(lowbit::FakeQuantConfig::pytorch());
        pytorch.calibrate_range(-1.5f, 2.0f);
        lowbit::FakeQuantConfig stochastic_config;
        stochastic_config.rounding = lowbit::Rounding::stochastic;
        stochastic_config.seed = 77;
        lowbit::FakeQuantize<4> stochastic(stochastic_config);
        stochastic.calibrate_range(-1.0f, 1.0f);

        // Scalar references (no threads at all).
        std::vector<float> forward_expected(count), pytorch_expected(count), mask_expected(count),
            pytorch_mask_expected(count), stochastic_expected(count), ste_expected(count);
        lowbit::detail::reference::fake_quantize_forward(asymmetric.params(), x.data(), forward_expected.data(), count);
        lowbit::detail::reference::fake_quantize_forward(pytorch.params(), x.data(), pytorch_expected.data(), count);
        lowbit::detail::reference::backward_clamped(asymmetric.mask(), grad.data(), x.data(), mask_expected.data(),
                                                    count);
        lowbit::detail::reference::backward_clamped(pytorch.mask(), grad.data(), x.data(),
                                                    pytorch_mask_expected.data(), count);
        lowbit::detail::reference::fake_quantize_forward_stochastic(stochastic.params(), lowbit::UniformStream(77), 0,
                                                                    x.data(), stochastic_expected.data(), count);
        {
            lowbit::FakeQuantParams ste;
            ste.scale = 0.25f;
            ste.code_min = -3.0f;
            ste.code_max = 3.0f;
            ste.finish();
            lowbit::detail::reference::fake_quantize_forward(ste, x.data(), ste_expected.data(), count);
        }

        lowbit::set_num_threads(1);
        const std::vector<float> lsq_one = asymmetric.backward_lsq(grad, x).grad_input;
        const float lsq_scale_one = asymmetric.backward_lsq(grad, x).grad_scale;

        for (const int threads : thread_counts) {
            lowbit::set_num_threads(threads);
            INFO("count " << count << " (grain " << grain << "), threads " << threads);
            CHECK(first_difference(asymmetric.forward(x), forward_expected) == -1);
            CHECK(first_difference(pytorch.forward(x), pytorch_expected) == -1);
            CHECK(first_difference(asymmetric.backward_clamped(grad, x), mask_expected) == -1);
            CHECK(first_difference(pytorch.backward_clamped(grad, x), pytorch_mask_expected) == -1);
            CHECK(first_difference(stochastic.forward(x), stochastic_expected) == -1);
            lowbit::UniformStream stream(77);
            CHECK(first_difference(stochastic.forward(x, stream), stochastic_expected) == -1);
            CHECK(stream.position() == count);
            CHECK(first_difference(lowbit::ste_forward(x, 0.25f, -3.0f, 3.0f), ste_expected) == -1);
            const auto lsq = asymmetric.backward_lsq(grad, x);
            CHECK(first_difference(lsq.grad_input, lsq_one) == -1);
            CHECK(lsq.grad_scale == lsq_scale_one);

            // Eigen forms over the same memory, row-major [2, count / 2] when even.
            if (count % 2 == 0) {
                const Eigen::Map<const RowMatrixXf> matrix(x.data(), 2, static_cast<Index>(count / 2));
                const RowMatrixXf y = asymmetric.forward(matrix);
                CHECK(first_difference(std::span<const float>(y.data(), count), forward_expected) == -1);
            }
        }
    }
}

TEST_CASE("per-channel passes at channel lengths around the grain", "[threads][boundaries]") {
    ThreadCountGuard guard;
    std::uint64_t salt = 9400;
    for (const std::size_t length : {grain - 1, grain + 1, 2 * grain + 3}) {
        const std::size_t channels = 2;
        std::vector<float> x = data_with_extremes(channels * length, 0, channels * length - 1, ++salt);
        // Channel 0: max in the middle of its second half; channel 1: min in the middle of its first half.
        x[length / 2 + length / 4] = 5.0f;
        x[length + length / 4] = -6.0f;
        lowbit::set_num_threads(1);
        lowbit::PerChannelFakeQuantize<8, false> one;
        one.calibrate(x, channels);
        const std::vector<float> y_one = one.forward(x);
        REQUIRE(one.channel(0).observed_max() == 5.0f);
        REQUIRE(one.channel(0).observed_min() == placed_min);
        REQUIRE(one.channel(1).observed_min() == -6.0f);
        REQUIRE(one.channel(1).observed_max() == placed_max);
        for (const int threads : thread_counts) {
            lowbit::set_num_threads(threads);
            INFO("channel length " << length << ", threads " << threads);
            lowbit::PerChannelFakeQuantize<8, false> quantizer;
            quantizer.calibrate(x, channels);
            CHECK(quantizer.scales() == one.scales());
            CHECK(quantizer.zero_points() == one.zero_points());
            CHECK(first_difference(quantizer.forward(x), y_one) == -1);
            lowbit::PerChannelFakeQuantize<8, false> with_calibration;
            CHECK(first_difference(with_calibration.forward_with_calibration(x, channels), y_one) == -1);
        }
    }
}

namespace {

/// rows_per_range of quantized_matrix.hpp for this width, mirrored here (about 64K values per range).
std::size_t quantize_rows_per_range(Index cols) {
    return std::max<std::size_t>(1, (std::size_t{1} << 16) / static_cast<std::size_t>(cols));
}

RowMatrixXf random_matrix(std::mt19937_64& rng, Index rows, Index cols) {
    const std::vector<float> values =
        lowbit::test::uniform_floats(rng, static_cast<std::size_t>(rows * cols), -1.0f, 1.0f);
    return Eigen::Map<const RowMatrixXf>(values.data(), rows, cols);
}

/// quantize, dequantize, quantized_matmul (one row: qgemv; up to 16: the batch GEMV; more: qgemm) and QuantizedLinear
/// forward at every thread count equal the 1-thread results; dequantize also equals the scalar
/// unpack-and-scale rule, and quantized_matmul is checked against the scalar reference kernel's
/// result within the dot-product bound (it sums in a different order).
template <int GroupSize, int Bits>
void check_quantized_rows(std::mt19937_64& rng, Index rows, Index cols, Index batch) {
    const RowMatrixXf w = random_matrix(rng, rows, cols);
    const RowMatrixXf x = random_matrix(rng, batch, cols);
    const Eigen::VectorXf bias = Eigen::VectorXf::LinSpaced(rows, -1.0f, 1.0f);
    lowbit::set_num_threads(1);
    const auto q_one = lowbit::quantize<GroupSize, Bits>(w);
    const RowMatrixXf w_one = lowbit::dequantize(q_one);
    const RowMatrixXf y_one = lowbit::quantized_matmul(x, q_one);
    const RowMatrixXf y_row_one = lowbit::quantized_matmul(x.row(0), q_one);
    const lowbit::QuantizedLinear<GroupSize, Bits> layer(q_one, bias);
    const RowMatrixXf layer_one = layer.forward(x);
    const RowMatrixXf layer_row_one = layer.forward(x.row(batch - 1));
    {
        RowMatrixXf reference(batch, rows);
        lowbit::detail::reference::quantized_matmul(x.data(), x.cols(), batch, q_one.view(), reference.data(), rows);
        const RowMatrixXf exact = x * w_one.transpose();
        const double worst = (reference - y_one).cwiseAbs().maxCoeff();
        const double magnitude = (x.cwiseAbs() * w_one.cwiseAbs().transpose()).maxCoeff();
        const double bound = lowbit::test::dot_tolerance(static_cast<std::size_t>(cols), magnitude);
        CHECK(worst <= 2.0 * bound);  // both within the bound of the exact product
        CHECK((exact - y_one).cwiseAbs().maxCoeff() <= 2.0 * bound);
    }
    for (const int threads : thread_counts) {
        lowbit::set_num_threads(threads);
        INFO("GroupSize " << GroupSize << ", Bits " << Bits << ", rows " << rows << ", cols " << cols << ", batch "
                          << batch << ", threads " << threads);
        const auto q = lowbit::quantize<GroupSize, Bits>(w);
        CHECK(q.codes == q_one.codes);
        CHECK(first_matrix_difference(q.scales, q_one.scales) == -1);
        CHECK(first_matrix_difference(q.biases, q_one.biases) == -1);
        CHECK(first_matrix_difference(lowbit::dequantize(q_one), w_one) == -1);
        CHECK(first_matrix_difference(lowbit::quantized_matmul(x, q_one), y_one) == -1);
        CHECK(first_matrix_difference(lowbit::quantized_matmul(x.row(0), q_one), y_row_one) == -1);
        CHECK(first_matrix_difference(layer.forward(x), layer_one) == -1);
        CHECK(first_matrix_difference(layer.forward(x.row(batch - 1)), layer_row_one) == -1);
        lowbit::GroupFakeQuantize<GroupSize, Bits> fake;
        CHECK(first_matrix_difference(fake.forward(w), w_one) == -1);
    }
}

/// A float mode's quantize and f32 quantized_matmul (the whole matrix and one row of x) at every thread
/// count equal the 1-thread results bit for bit.
template <class Format>
void check_format_rows(std::mt19937_64& rng, Index rows, Index cols, Index batch) {
    const RowMatrixXf w = random_matrix(rng, rows, cols);
    const RowMatrixXf x = random_matrix(rng, batch, cols);
    lowbit::set_num_threads(1);
    const auto q_one = lowbit::quantize<Format>(w);
    const RowMatrixXf y_one = lowbit::quantized_matmul(x, q_one);
    const RowMatrixXf y_row_one = lowbit::quantized_matmul(x.row(0), q_one);
    for (const int threads : thread_counts) {
        lowbit::set_num_threads(threads);
        INFO(Format::mode << ", rows " << rows << ", cols " << cols << ", batch " << batch << ", threads " << threads);
        const auto q = lowbit::quantize<Format>(w);
        CHECK(q.codes == q_one.codes);
        CHECK(q.scales == q_one.scales);
        CHECK(first_matrix_difference(lowbit::quantized_matmul(x, q_one), y_one) == -1);
        CHECK(first_matrix_difference(lowbit::quantized_matmul(x.row(0), q_one), y_row_one) == -1);
    }
}

}  // namespace

TEST_CASE("quantize and dequantize at row counts around rows_per_range", "[threads][boundaries]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(9500);
    constexpr Index cols = 512;
    const auto per_range = static_cast<Index>(quantize_rows_per_range(cols));  // 128 rows
    for (const Index rows : {per_range - 1, per_range, per_range + 1, 2 * per_range + 1, 3 * per_range + 5}) {
        check_quantized_rows<64, 4>(rng, rows, cols, 3);
    }
    check_quantized_rows<32, 3>(rng, 2 * per_range + 1, cols, 2);
}

/// Rows of x per block of the batch GEMV's driver for Arch (void: no SIMD, the reference runs).
template <class Arch>
constexpr Index batch_block_rows() {
    if constexpr (std::is_void_v<Arch>) {
        return 4;
    } else {
        using batch = lowbit::detail::kernels::QgemvF32Batch<Arch>;
        return batch::deep_rows > 0 ? batch::deep_rows : batch::max_rows;
    }
}

/// Rows of x per thread range of qgemm's x packing for Arch: PackedX::blocks_per_range register blocks
/// of MR rows (void: no SIMD, the reference runs; any count).
template <class Arch>
constexpr Index x_pack_grain_rows() {
    if constexpr (std::is_void_v<Arch>) {
        return 64;
    } else {
        using kernels = lowbit::detail::kernels::QgemmF32Ukernel<Arch>;
        return kernels::MR * static_cast<Index>(lowbit::detail::kernels::PackedX<Arch, 64>::blocks_per_range);
    }
}

TEST_CASE("quantized_matmul at output-row counts around its thread grains", "[threads][boundaries]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(9600);
    // qgemv (one row of x): about 256 KiB of packed codes per range, 2^18 / (cols * Bits / 8) rows:
    // 128 rows for 2048 8-bit columns, 256 for 4096 2-bit columns.
    for (const Index rows : {Index{127}, Index{128}, Index{129}, Index{257}, Index{385}, Index{511}})
        check_quantized_rows<64, 8>(rng, rows, 2048, 1);
    for (const Index rows : {Index{255}, Index{257}, Index{513}})
        check_quantized_rows<128, 2>(rng, rows, 4096, 1);
    // The GEMV of codes that straddle words, on the same grain: 341 rows of 2048 3-bit columns, and 165
    // rows of 2112 6-bit columns (a row ends in a partial chunk, read on into the next row's words).
    for (const Index rows : {Index{340}, Index{341}, Index{342}, Index{683}})
        check_quantized_rows<64, 3>(rng, rows, 2048, 1);
    for (const Index rows : {Index{164}, Index{165}, Index{166}, Index{331}})
        check_quantized_rows<64, 6>(rng, rows, 2112, 1);
    // The batch GEMV (2 to 16 rows of x, Bits in {2, 4, 8}): about 256 KiB of codes per range counted
    // once per block of rows of x (8 on AVX-512, else 4), 2^18 / (cols * Bits / 8 * blocks) output
    // rows: for 512 4-bit columns and 9 rows of x, 512 (2 blocks) or 341 (3 blocks).
    constexpr Index block_rows = batch_block_rows<lowbit::detail::dispatch_arch>();
    const Index batch_grain = (Index{1} << 18) / (256 * ((9 + block_rows - 1) / block_rows));
    for (const Index rows : {batch_grain - 1, batch_grain, batch_grain + 1, 2 * batch_grain + 1, 3 * batch_grain + 1})
        check_quantized_rows<64, 4>(rng, rows, 512, 9);
    // The batch GEMV of codes that straddle words (2 to 7 rows of x, Bits in {3, 5, 6}), on the same
    // grain: for 512 3-bit columns (192 bytes of codes a row) and 4 rows of x (one block of rows on
    // every instruction set), 2^18 / 192 = 1365 output rows; 640 5-bit columns end in a partial chunk,
    // read on into the next row's words.
    const Index straddling_grain = (Index{1} << 18) / 192;
    for (const Index rows : {straddling_grain - 1, straddling_grain, straddling_grain + 1, 2 * straddling_grain + 1})
        check_quantized_rows<64, 3>(rng, rows, 512, 4);
    check_quantized_rows<32, 5>(rng, 2 * ((Index{1} << 18) / 400) + 1, 640, 3);
    // qgemm (more rows of x, or other bit widths): tiles of 256 output columns by 256 rows of x, one
    // tile per task.
    for (const Index rows : {Index{255}, Index{256}, Index{257}, Index{513}, Index{769}, Index{1025}})
        check_quantized_rows<64, 4>(rng, rows, 512, 40);
    check_quantized_rows<32, 5>(rng, 513, 256, 300);
    // qgemm packs x once per call, register blocks of x split over threads blocks_per_range at a time:
    // rows of x around that grain (64 with AVX-512, 48 with AVX2) and two of them.
    constexpr Index pack_grain = x_pack_grain_rows<lowbit::detail::dispatch_arch>();
    for (const Index batch : {pack_grain - 1, pack_grain, pack_grain + 1, 2 * pack_grain + 1})
        check_quantized_rows<64, 4>(rng, 64, 256, batch);
    // The float modes on the same kernels: 4-bit codes, so the GEMV's grain is 128 rows of 4096 columns.
    for (const Index rows : {Index{127}, Index{129}, Index{257}}) check_format_rows<lowbit::Mxfp4>(rng, rows, 4096, 1);
    check_format_rows<lowbit::Nvfp4>(rng, 257, 4096, 9);
    check_format_rows<lowbit::Nvfp4>(rng, 257, 512, 40);
    check_format_rows<lowbit::Mxfp8>(rng, 65, 4096, 1);  // 8-bit codes: the GEMV's grain is 64 rows
    check_format_rows<lowbit::Mxfp8>(rng, 129, 256, 40);
}

namespace {

/// quantized_matmul with Activations::int8 (docs/numerics.md N11) of x [batch, cols] and a quantized
/// rows x cols matrix at every thread count equals the 1-thread result bit for bit (each output is
/// one row dot or one GEMM tile, summed in a fixed order), so does a QuantizedLinear's int8 forward
/// on its panels (built at that count), and the 1-thread result is near the scalar
/// reference's (the kernel tests hold the exact bound; here a result cut short at a range edge or
/// written to the wrong row would be far off).
template <class Format>
void check_int8_rows(std::mt19937_64& rng, Index rows, Index cols, Index batch) {
    const auto q = lowbit::quantize<Format>(random_matrix(rng, rows, cols));
    const RowMatrixXf x = random_matrix(rng, batch, cols);
    lowbit::set_num_threads(1);
    const RowMatrixXf y_one = lowbit::quantized_matmul(x, q, lowbit::Activations::int8);
    RowMatrixXf reference(batch, rows);
    lowbit::detail::reference::quantized_matmul_int8(x.data(), x.cols(), batch, q.view(), reference.data(), rows);
    const double magnitude = (x.cwiseAbs() * lowbit::dequantize(q).cwiseAbs().transpose()).maxCoeff();
    INFO(Format::mode << " GroupSize " << Format::group_size << ", Bits " << Format::bits << ", rows " << rows
                      << ", cols " << cols << ", batch " << batch);
    CHECK((reference - y_one).cwiseAbs().maxCoeff() <= 1e-4 * magnitude);
    RowMatrixXf y_layer_first;
    for (const int threads : thread_counts) {
        lowbit::set_num_threads(threads);
        INFO("threads " << threads);
        CHECK(first_matrix_difference(lowbit::quantized_matmul(x, q, lowbit::Activations::int8), y_one) == -1);
        // A layer builds its panels (threaded over panels) on its first int8 forward, at this count,
        // and runs the panel GEMM on them at every M: the same result at every count.
        const lowbit::QuantizedLinearOf<Format> layer(q);
        const RowMatrixXf y_layer = layer.forward(x, lowbit::Activations::int8);
        CHECK(first_matrix_difference(layer.forward(x, lowbit::Activations::int8), y_layer) == -1);
        if (threads == thread_counts[0]) y_layer_first = y_layer;
        CHECK(first_matrix_difference(y_layer, y_layer_first) == -1);
    }
    CHECK((reference - y_layer_first).cwiseAbs().maxCoeff() <= 1e-4 * magnitude);
}

}  // namespace

TEST_CASE("quantized_matmul with int8 activations at output-row counts around its thread grains",
          "[threads][boundaries][int8]") {
    ThreadCountGuard guard;
    auto rng = lowbit::test::make_rng(9700);
    // The row-dot kernel (fewer than MlxAffineI8Kernels::gemm_rows rows of x): about 256 KiB of code
    // bytes per range, 2^18 / (cols * Bits / 8) output rows: 256 for 2048 4-bit columns.
    for (const Index rows : {Index{255}, Index{256}, Index{257}, Index{513}, Index{769}}) {
        check_int8_rows<lowbit::MlxAffine<64, 4>>(rng, rows, 2048, 1);
        check_int8_rows<lowbit::MlxAffine<64, 4>>(rng, rows, 2048, 5);
    }
    // The panel GEMM (from gemm_rows rows of x on): one panel of NR output rows (32 with AVX-512, 8
    // with AVX2) per task, x's row blocks of MR rows (6 or 4) quantized across the threads.
    const Index first_gemm = lowbit::detail::MlxAffineI8Kernels<64, 4, lowbit::detail::dispatch_int8_ops>::gemm_rows;
    for (const Index rows : {Index{7}, Index{8}, Index{9}, Index{31}, Index{32}, Index{33}, Index{65}, Index{97}})
        for (const Index batch : {first_gemm, first_gemm + 1, Index{40}})
            check_int8_rows<lowbit::MlxAffine<64, 4>>(rng, rows, 256, batch);
    check_int8_rows<lowbit::MlxAffine<32, 3>>(rng, 65, 256, 20);   // codes unpacked to bytes per panel
    check_int8_rows<lowbit::MlxAffine<128, 8>>(rng, 33, 512, 13);  // 8-bit codes (AVX2 splits them)
    check_int8_rows<lowbit::Mxfp4>(rng, 65, 256, 20);              // E2M1 codes through the code table
    check_int8_rows<lowbit::Nvfp4>(rng, 33, 256, 1);
    check_int8_rows<lowbit::Mxfp8>(rng, 65, 256, 20);  // E4M3 codes as three digit planes
}
