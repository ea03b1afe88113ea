// libFuzzer target over lowbit's quantized-weight and fake-quant entry points with hostile inputs:
// float weights of any bit pattern, hand-built QuantizedMatrix / TernaryWeights / Int8Activations whose
// parts disagree in shape or hold NaN/Inf, BitNet span forms with sizes that overflow or are negative,
// FakeQuantize / PerChannelFakeQuantize with any qparams. The byte format is quantized_input.hpp's.
//
// The contract checked: every call returns or throws std::invalid_argument (or a type derived from
// it), which is the only exception caught here; anything else (another exception, a crash, a
// sanitizer report) ends the run. Where a result is documented finite, it is checked and a violation
// aborts with a message.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include <unsupported/Eigen/CXX11/Tensor>

#include <lowbit/lowbit.hpp>

#include "quantized_input.hpp"

namespace {

using Eigen::Index;
using lowbit::RowMatrixXf;
using lowbit_fuzz::Reader;

[[noreturn]] void violation(const char* what) {
    std::fprintf(stderr, "lowbit fuzz_quantized: contract violation: %s\n", what);
    std::abort();
}

void require(bool condition, const char* what) {
    if (!condition) violation(what);
}

bool all_finite(const float* values, Index count) {
    for (Index i = 0; i < count; ++i)
        if (!std::isfinite(values[i])) return false;
    return true;
}

RowMatrixXf read_matrix(Reader& in, Index rows, Index cols) {
    RowMatrixXf m(rows, cols);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = in.f32();
    return m;
}

std::vector<float> read_floats(Reader& in, std::size_t count) {
    std::vector<float> values(count);
    for (float& v : values) v = in.f32();
    return values;
}

/// Runs fn; std::invalid_argument (and derived) is the documented refusal and is swallowed.
template <class Fn>
void attempt(Fn&& fn) {
    try {
        fn();
    } catch (const std::invalid_argument&) {
    }
}

// ---- Op::quantize: float weights through quantize, dequantize, GroupFakeQuantize, quantized_matmul ----
template <int GroupSize, int Bits>
void fuzz_quantize(Reader& in) {
    const Index rows = in.u8() % 9;
    const Index cols = in.u16() % (3 * GroupSize + 2);
    const RowMatrixXf w = read_matrix(in, rows, cols);
    const Index batch = in.u8() % 4;
    const RowMatrixXf x = read_matrix(in, batch, cols);
    attempt([&] {
        const auto q = lowbit::quantize<GroupSize, Bits>(w);
        require(all_finite(w.data(), w.size()), "quantize accepted a NaN or Inf weight");
        require(all_finite(q.scales.data(), q.scales.size()), "quantize returned a non-finite scale");
        require(all_finite(q.biases.data(), q.biases.size()), "quantize returned a non-finite bias");
        const RowMatrixXf dq = lowbit::dequantize(q);
        require(all_finite(dq.data(), dq.size()), "dequantize(quantize(w)) is not finite for finite w");
        const RowMatrixXf fake = lowbit::GroupFakeQuantize<GroupSize, Bits>().forward(w);
        require(fake == dq, "GroupFakeQuantize::forward differs from dequantize(quantize(w))");
        attempt([&] { (void)lowbit::quantized_matmul(x, q); });
        attempt([&] {
            const lowbit::QuantizedLinear<GroupSize, Bits> layer(q, Eigen::VectorXf::Ones(q.rows()));
            (void)layer.forward(x);
        });
    });
}

// ---- Op::quantized_matrix: hand-built parts of any shape and bit pattern ----
template <int GroupSize, int Bits>
void fuzz_quantized_matrix(Reader& in) {
    using Q = lowbit::QuantizedMatrix<GroupSize, Bits>;
    Q q;
    const bool consistent = in.flag();
    const Index rows = in.u8() % 6;
    const Index groups = in.u8() % 4;
    if (consistent) {
        q.codes.resize(rows, groups * Q::words_per_group);
        q.scales.resize(rows, groups);
        q.biases.resize(rows, groups);
    } else {
        q.codes.resize(rows, in.u8() % (3 * Q::words_per_group + 2));
        q.scales.resize(in.u8() % 6, in.u8() % 5);
        q.biases.resize(in.u8() % 6, in.u8() % 5);
    }
    for (Index i = 0; i < q.codes.size(); ++i) q.codes.data()[i] = in.u32();
    for (Index i = 0; i < q.scales.size(); ++i) q.scales.data()[i] = in.f32();
    for (Index i = 0; i < q.biases.size(); ++i) q.biases.data()[i] = in.f32();
    const Index batch = in.u8() % 4;
    const Index x_cols = in.flag() ? q.cols() : static_cast<Index>(in.u16() % (4 * GroupSize + 1));
    const RowMatrixXf x = read_matrix(in, batch, x_cols);
    const Index bias_size = in.flag() ? q.rows() : static_cast<Index>(in.u8() % 7);
    const Eigen::VectorXf bias = Eigen::Map<const Eigen::VectorXf>(read_floats(in, static_cast<std::size_t>(bias_size)).data(), bias_size);
    attempt([&] { (void)lowbit::dequantize(q); });
    attempt([&] { (void)lowbit::quantized_matmul(x, q); });
    attempt([&] {
        const lowbit::QuantizedLinear<GroupSize, Bits> layer(q, bias);
        (void)layer.forward(x);
        (void)layer.dequantize();
        Eigen::Tensor<float, 3, Eigen::RowMajor> t(1, batch, x_cols);
        for (Index i = 0; i < x.size(); ++i) t.data()[i] = x.data()[i];
        (void)layer.forward(t);
    });
    attempt([&] {
        const lowbit::QuantizedLinear<GroupSize, Bits> layer(q);
        (void)layer.forward(x.transpose().transpose().eval());
    });
}

template <template <int, int> class Fn>
void with_format(std::uint8_t index, Reader& in) {
    switch (index % lowbit_fuzz::format_count) {
        case 0: Fn<32, 2>::run(in); break;
        case 1: Fn<64, 3>::run(in); break;
        case 2: Fn<64, 4>::run(in); break;
        case 3: Fn<128, 8>::run(in); break;
        case 4: Fn<32, 5>::run(in); break;
        default: Fn<64, 6>::run(in); break;
    }
}
template <int G, int B>
struct QuantizeOp {
    static void run(Reader& in) { fuzz_quantize<G, B>(in); }
};
template <int G, int B>
struct QuantizedMatrixOp {
    static void run(Reader& in) { fuzz_quantized_matrix<G, B>(in); }
};

// ---- Op::ternary_weights / Op::int8_activations: hand-built BitNet results ----
void fuzz_ternary_weights(Reader& in) {
    lowbit::TernaryWeights t;
    const Index rows = in.u8() % 6, cols = in.u8() % 9;
    t.codes.resize(rows, cols);
    for (Index i = 0; i < t.codes.size(); ++i) t.codes.data()[i] = static_cast<std::int8_t>(in.u8());
    t.group_size = static_cast<int>(static_cast<std::int8_t>(in.u8()));
    t.per_tensor = in.flag();
    t.scales.resize(in.u8() % 6, in.u8() % 6);
    for (Index i = 0; i < t.scales.size(); ++i) t.scales.data()[i] = in.f32();
    attempt([&] {
        const RowMatrixXf w = t.dequantize();
        require(w.rows() == rows && w.cols() == cols, "TernaryWeights::dequantize changed the shape");
    });
}

void fuzz_int8_activations(Reader& in) {
    lowbit::Int8Activations a;
    const Index rows = in.u8() % 6, cols = in.u8() % 9;
    a.codes.resize(rows, cols);
    for (Index i = 0; i < a.codes.size(); ++i) a.codes.data()[i] = static_cast<std::int8_t>(in.u8());
    a.scales.resize(in.u8() % 8);
    for (Index i = 0; i < a.scales.size(); ++i) a.scales.data()[i] = in.f32();
    attempt([&] {
        const RowMatrixXf x = a.dequantize();
        require(x.rows() == rows && x.cols() == cols, "Int8Activations::dequantize changed the shape");
    });
}

// ---- Op::bitnet_sizes: span forms with hostile rows, cols and group sizes ----
Index hostile_size(Reader& in) {
    switch (in.u8() % 4) {
        case 0: return static_cast<Index>(in.u8() % 9);
        case 1: return -static_cast<Index>(in.u8() % 9);
        case 2: return static_cast<Index>(in.i64());
        default: return (Index{1} << (in.u8() % 63)) + static_cast<Index>(in.u8() % 3) - 1;
    }
}

void fuzz_bitnet_sizes(Reader& in) {
    const Index rows = hostile_size(in), cols = hostile_size(in);
    const int group = in.flag() ? static_cast<int>(in.u8() % 9) : in.i32();
    const lowbit::Rounding rounding = static_cast<lowbit::Rounding>(in.u8() % 3);
    const std::vector<float> values = read_floats(in, in.u8() % 65);
    std::vector<float> out(values.size() + (in.flag() ? 1 : 0));
    const bool finite = all_finite(values.data(), static_cast<Index>(values.size()));
    attempt([&] {
        const lowbit::TernaryWeights t = lowbit::quantize_ternary(values, rows, cols, group, rounding);
        require(finite, "quantize_ternary accepted a NaN or Inf");
        require(t.codes.rows() * t.codes.cols() == static_cast<Index>(values.size()), "quantize_ternary: wrong size");
        require(all_finite(t.scales.data(), t.scales.size()), "quantize_ternary: non-finite scale");
        for (Index i = 0; i < t.codes.size(); ++i)
            require(t.codes.data()[i] >= -1 && t.codes.data()[i] <= 1, "quantize_ternary: code outside {-1, 0, 1}");
        (void)t.dequantize();
    });
    attempt([&] { (void)lowbit::quantize_ternary_per_tensor(values, rows, cols, rounding).dequantize(); });
    attempt([&] {
        const lowbit::Int8Activations a = lowbit::quantize_activations_int8(values, rows, cols, rounding);
        require(finite, "quantize_activations_int8 accepted a NaN or Inf");
        for (Index r = 0; r < a.scales.size(); ++r)
            require(std::isfinite(a.scales(r)) && a.scales(r) > 0.0f,
                    "quantize_activations_int8: scale not finite and > 0");
        (void)a.dequantize();
    });
    attempt([&] { lowbit::fake_quantize_ternary(values, out, rows, cols, group, rounding); });
    attempt([&] { lowbit::fake_quantize_activations_int8(values, out, rows, cols, rounding); });
    attempt([&] { (void)lowbit::absmax_scale(values); });
    attempt([&] { (void)lowbit::absmean_scale(values); });
}

// ---- Op::fake_quantize ----
lowbit::FakeQuantConfig read_config(Reader& in) {
    lowbit::FakeQuantConfig config = in.flag() ? lowbit::FakeQuantConfig::pytorch() : lowbit::FakeQuantConfig{};
    const std::uint8_t bits = in.u8();
    if (bits & 1u) config.rounding = static_cast<lowbit::Rounding>(in.u8() % 3);
    if (bits & 2u) config.narrow_range = in.flag();
    if (bits & 4u) config.observer = in.flag() ? lowbit::Observer::moving_average : lowbit::Observer::min_max;
    if (bits & 8u) config.averaging_constant = in.f32();
    if (bits & 16u) config.multiply_by_reciprocal = in.flag();
    if (bits & 32u) config.gradient_mask = in.flag() ? lowbit::GradientMask::rounded_code : lowbit::GradientMask::input_band;
    if (bits & 64u) config.min_scale = in.f32();
    if (bits & 128u) config.seed = in.u32();
    return config;
}

template <class Quantizer>
void check_forward_finite(const Quantizer& quantizer, const std::vector<float>& x, const std::vector<float>& y) {
    if (!quantizer.is_initialized()) return;
    for (std::size_t i = 0; i < x.size(); ++i)
        if (!std::isnan(x[i]) && !std::isfinite(y[i])) violation("FakeQuantize::forward: non-NaN input gave a non-finite output");
}

template <int Bits, bool Symmetric>
void fuzz_fake_quantize(Reader& in) {
    const lowbit::FakeQuantConfig config = read_config(in);
    std::optional<lowbit::FakeQuantize<Bits, Symmetric>> made;
    attempt([&] { made.emplace(config); });
    if (!made) return;
    auto& quantizer = *made;
    const int steps = in.u8() % 4;
    for (int step = 0; step < steps; ++step) {
        switch (in.u8() % 5) {
            case 0: {
                const float scale = in.f32();
                const int zero_point = in.i32() % 70000;
                attempt([&] { quantizer.set_qparams(scale, zero_point); });
                break;
            }
            case 1: {
                const std::vector<float> data = read_floats(in, in.u8() % 17);
                attempt([&] { quantizer.calibrate(data); });
                break;
            }
            case 2: {
                const std::vector<float> data = read_floats(in, in.u8() % 17);
                attempt([&] { quantizer.observe(data); });
                break;
            }
            case 3: {
                const float low = in.f32(), high = in.f32();
                attempt([&] { quantizer.calibrate_range(low, high); });
                break;
            }
            default: {
                const float low = in.f32(), high = in.f32();
                attempt([&] { quantizer.observe_range(low, high); });
                break;
            }
        }
        if (quantizer.is_initialized())
            require(std::isfinite(quantizer.scale()) && quantizer.scale() > 0.0f, "FakeQuantize: scale not finite and > 0");
    }
    const std::vector<float> x = read_floats(in, in.u8() % 33);
    const std::vector<float> grad = read_floats(in, x.size());
    attempt([&] {
        const std::vector<float> y = quantizer.forward(x);
        check_forward_finite(quantizer, x, y);
    });
    attempt([&] { (void)quantizer.backward_clamped(grad, x); });
    attempt([&] { (void)quantizer.backward_lsq(grad, x, in.f32()); });
    attempt([&] {
        lowbit::UniformStream stream(in.u32());
        (void)quantizer.forward(x, stream);
    });
    attempt([&] { (void)quantizer.forward_with_calibration(x); });
    attempt([&] {
        const float scale = in.f32(), low = in.f32(), high = in.f32();
        (void)lowbit::ste_forward(x, scale, low, high, config.rounding);
        (void)lowbit::ternary_ste(x, scale);
        (void)lowbit::int8_ste(x, scale);
    });
}

// ---- Op::per_channel ----
template <int Bits, bool Symmetric>
void fuzz_per_channel(Reader& in) {
    const lowbit::FakeQuantConfig config = read_config(in);
    const int axis = in.u8() % 3;
    std::optional<lowbit::PerChannelFakeQuantize<Bits, Symmetric>> made;
    attempt([&] { made.emplace(config, axis); });
    if (!made) return;
    auto& quantizer = *made;
    const Index rows = in.u8() % 5, cols = in.u8() % 7;
    const RowMatrixXf x = read_matrix(in, rows, cols);
    const RowMatrixXf grad = read_matrix(in, rows, cols);
    switch (in.u8() % 4) {
        case 0: attempt([&] { quantizer.calibrate(x); }); break;
        case 1: attempt([&] { quantizer.observe(x); }); break;
        case 2: {
            const std::vector<float> scales = read_floats(in, in.u8() % 6);
            std::vector<int> zero_points(in.flag() ? scales.size() : in.u8() % 6);
            for (int& z : zero_points) z = in.i32() % 300;
            attempt([&] { quantizer.set_qparams(scales, zero_points); });
            break;
        }
        default: break;  // uncalibrated
    }
    attempt([&] { (void)quantizer.forward(x); });
    attempt([&] { (void)quantizer.backward_clamped(grad, x); });
    attempt([&] { (void)quantizer.backward_lsq(grad, x); });
    attempt([&] { (void)quantizer.forward_with_calibration(x); });
    const std::vector<float> flat(x.data(), x.data() + x.size());
    attempt([&] { (void)quantizer.forward(flat); });
    attempt([&] { (void)quantizer.forward_with_calibration(flat, static_cast<std::size_t>(in.u8() % 5)); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Reader in(data, size);
    lowbit::set_num_threads(1 + in.u8() % 3);
    const auto op = static_cast<lowbit_fuzz::Op>(in.u8() % lowbit_fuzz::op_count);
    const std::uint8_t variant = in.u8();
    switch (op) {
        case lowbit_fuzz::Op::quantize: with_format<QuantizeOp>(variant, in); break;
        case lowbit_fuzz::Op::quantized_matrix: with_format<QuantizedMatrixOp>(variant, in); break;
        case lowbit_fuzz::Op::ternary_weights: fuzz_ternary_weights(in); break;
        case lowbit_fuzz::Op::int8_activations: fuzz_int8_activations(in); break;
        case lowbit_fuzz::Op::bitnet_sizes: fuzz_bitnet_sizes(in); break;
        case lowbit_fuzz::Op::fake_quantize:
            switch (variant % 4) {
                case 0: fuzz_fake_quantize<8, true>(in); break;
                case 1: fuzz_fake_quantize<8, false>(in); break;
                case 2: fuzz_fake_quantize<2, true>(in); break;
                default: fuzz_fake_quantize<16, false>(in); break;
            }
            break;
        case lowbit_fuzz::Op::per_channel:
            if (variant % 2 == 0) fuzz_per_channel<8, true>(in);
            else fuzz_per_channel<4, false>(in);
            break;
    }
    return 0;
}
