// Per-channel fake quantization: PerChannelFakeQuantize<Bits, Symmetric>, one FakeQuantize per slice
// along an axis (fake_quantize.hpp has the per-tensor rules it applies per channel). Numerics:
// docs/numerics.md N1-N6.
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/checks.hpp"
#include "detail/fake_quant/passes.hpp"
#include "detail/tensor_like.hpp"
#include "fake_quant_config.hpp"
#include "fake_quantize.hpp"
#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Per-channel fake quantization: one scale and zero point per slice along `axis` (default 0: the output
/// rows of a [out, in] weight matrix), each slice quantized exactly as a FakeQuantize<Bits, Symmetric>
/// with the same config would (the same observers, rules and errors, per channel).
///
/// Span forms read the data as a row-major [channels, size / channels] matrix (channel = slowest
/// index); calibrate(span, channels) and observe(span, channels) fix the channel count, later span
/// calls check it. Tensor-like forms take the channel count from the extent along axis(). Fastest when
/// the channel axis is the slowest-varying one in storage (e.g. axis 0 of a row-major matrix): each
/// channel is then one contiguous run for the vector kernels; otherwise runs are shorter.
/// Rounding::stochastic: each forward call draws from one UniformStream(config().seed) over the whole
/// tensor, element i in storage order taking uniform(i), so channels and runs get independent noise.
template <int Bits, bool Symmetric = true>
class PerChannelFakeQuantize {
public:
    using Channel = FakeQuantize<Bits, Symmetric>;

    PerChannelFakeQuantize() : PerChannelFakeQuantize(FakeQuantConfig{}) {}
    explicit PerChannelFakeQuantize(FakeQuantConfig config, int axis = 0) : prototype_(config), axis_(axis) {
        if (axis < 0)
            throw std::invalid_argument("lowbit::PerChannelFakeQuantize: axis = " + std::to_string(axis) +
                                        " must be >= 0");
    }

    int axis() const noexcept { return axis_; }
    std::size_t channels() const noexcept { return channels_.size(); }
    int qmin() const noexcept { return prototype_.qmin(); }
    int qmax() const noexcept { return prototype_.qmax(); }
    int num_levels() const noexcept { return prototype_.num_levels(); }
    const FakeQuantConfig& config() const noexcept { return prototype_.config(); }
    /// True once every channel has been calibrated (a channel whose data had no finite value is not).
    bool is_initialized() const noexcept {
        if (channels_.empty()) return false;
        for (const Channel& channel : channels_)
            if (!channel.is_initialized()) return false;
        return true;
    }
    std::vector<float> scales() const {
        std::vector<float> result;
        for (const Channel& channel : channels_) result.push_back(channel.scale());
        return result;
    }
    std::vector<int> zero_points() const {
        std::vector<int> result;
        for (const Channel& channel : channels_) result.push_back(channel.zero_point());
        return result;
    }
    /// One quantizer per channel (read-only access, e.g. to its params()). Throws std::out_of_range
    /// for index >= channels().
    const Channel& channel(std::size_t index) const { return channels_.at(index); }

    /// Sets every channel's qparams (FakeQuantize::set_qparams rules, the message naming the channel);
    /// the sizes fix the channel count. Throws std::invalid_argument for sizes that differ or are 0.
    void set_qparams(std::span<const float> scales, std::span<const int> zero_points) {
        detail::require_same_size("lowbit::PerChannelFakeQuantize::set_qparams", "scales", scales.size(),
                                  "zero_points", zero_points.size());
        if (scales.empty())
            throw std::invalid_argument("lowbit::PerChannelFakeQuantize::set_qparams: no channels (scales is empty)");
        std::vector<Channel> next(scales.size(), prototype_);
        for (std::size_t c = 0; c < scales.size(); ++c) {
            try {
                next[c].set_qparams(scales[c], zero_points[c]);
            } catch (const std::invalid_argument& error) {
                throw std::invalid_argument("lowbit::PerChannelFakeQuantize::set_qparams: channel " + std::to_string(c) +
                                            ": " + error.what());
            }
        }
        channels_ = std::move(next);
    }

    void calibrate(std::span<const float> data, std::size_t channels) { gather(data, row_major_layout(data, channels, "calibrate"), false); }
    void observe(std::span<const float> data, std::size_t channels) { gather(data, row_major_layout(data, channels, "observe"), true); }
    template <detail::TensorLike X>
    void calibrate(const X& data) {
        const detail::ContiguousInput<X> input(data);
        gather(input.span(), detail::axis_layout(data, axis_, "lowbit::PerChannelFakeQuantize::calibrate"), false);
    }
    template <detail::TensorLike X>
    void observe(const X& data) {
        const detail::ContiguousInput<X> input(data);
        gather(input.span(), detail::axis_layout(data, axis_, "lowbit::PerChannelFakeQuantize::observe"), true);
    }

    void forward(std::span<const float> x, std::span<float> out) const {
        detail::require_same_size("lowbit::PerChannelFakeQuantize::forward", "x", x.size(), "out", out.size());
        run_forward(x, out, row_major_layout(x, channels_or_one(), "forward"));
    }
    std::vector<float> forward(std::span<const float> x) const {
        std::vector<float> out(x.size());
        forward(x, out);
        return out;
    }
    template <detail::TensorLike X>
    detail::result_t<X> forward(const X& x) const {
        const detail::AxisLayout layout = checked_layout(x, "forward");
        return detail::map_tensor(x, [&](std::span<const float> in, std::span<float> out) { run_forward(in, out, layout); });
    }
    template <detail::TensorLike X>
    detail::result_t<X> forward_with_calibration(const X& x) {
        if (!is_initialized()) {
            calibrate(x);
            require_calibrated();
        }
        return forward(x);
    }
    std::vector<float> forward_with_calibration(std::span<const float> x, std::size_t channels) {
        if (!is_initialized()) {
            calibrate(x, channels);
            require_calibrated();
        }
        return forward(x);
    }

    std::vector<float> backward(std::span<const float> grad) const { return {grad.begin(), grad.end()}; }
    template <detail::TensorLike G>
    detail::result_t<G> backward(const G& grad) const {
        return detail::map_tensor(grad, [](std::span<const float> in, std::span<float> out) {
            std::copy(in.begin(), in.end(), out.begin());
        });
    }

    void backward_clamped(std::span<const float> grad, std::span<const float> input, std::span<float> out) const {
        detail::require_same_size("lowbit::PerChannelFakeQuantize::backward_clamped", "grad", grad.size(), "input",
                                  input.size());
        detail::require_same_size("lowbit::PerChannelFakeQuantize::backward_clamped", "grad", grad.size(), "out",
                                  out.size());
        run_backward(grad, input, out, row_major_layout(input, channels_or_one(), "backward_clamped"));
    }
    std::vector<float> backward_clamped(std::span<const float> grad, std::span<const float> input) const {
        std::vector<float> out(grad.size());
        backward_clamped(grad, input, out);
        return out;
    }
    template <detail::TensorLike G, detail::TensorLike X>
    detail::result_t<G> backward_clamped(const G& grad, const X& input) const {
        const detail::AxisLayout layout = checked_layout(grad, "backward_clamped");
        return detail::map_tensor2(grad, input, "lowbit::PerChannelFakeQuantize::backward_clamped",
                                   [&](std::span<const float> g, std::span<const float> x, std::span<float> out) {
                                       run_backward(g, x, out, layout);
                                   });
    }

    /// LSQ per channel: the input gradient and one scale gradient per channel (one per slice along
    /// axis()). Before calibration every channel uses scale 1 and zero point 0, as forward does.
    template <detail::TensorLike G, detail::TensorLike X>
    PerChannelLsqGradients<detail::result_t<G>> backward_lsq(const G& grad, const X& input,
                                                             float grad_factor = 1.0f) const {
        const detail::AxisLayout layout = checked_layout(grad, "backward_lsq");
        std::vector<double> sums(layout.extent, 0.0);
        auto grad_input = detail::map_tensor2(
            grad, input, "lowbit::PerChannelFakeQuantize::backward_lsq",
            [&](std::span<const float> g, std::span<const float> x, std::span<float> out) {
                for_each_run(g.size(), layout, [&](std::size_t begin, std::size_t length, std::size_t c) {
                    sums[c] += channel_or_prototype(c).backward_lsq(g.subspan(begin, length), x.subspan(begin, length),
                                                         out.subspan(begin, length), grad_factor);
                });
            });
        return {std::move(grad_input), std::vector<float>(sums.begin(), sums.end())};
    }

private:
    std::size_t channels_or_one() const { return channels_.empty() ? 1 : channels_.size(); }
    const Channel& channel_or_prototype(std::size_t c) const { return channels_.empty() ? prototype_ : channels_[c]; }

    detail::AxisLayout row_major_layout(std::span<const float> data, std::size_t channels, const char* what) const {
        if (channels == 0 || data.size() % channels != 0)
            throw std::invalid_argument(std::string("lowbit::PerChannelFakeQuantize::") + what + ": " +
                                        std::to_string(data.size()) + " elements are not a whole number of rows for " +
                                        std::to_string(channels) + " channels");
        return {data.size() / channels, channels};
    }

    template <class X>
    detail::AxisLayout checked_layout(const X& x, const char* what) const {
        const std::string function = std::string("lowbit::PerChannelFakeQuantize::") + what;
        const detail::AxisLayout layout = detail::axis_layout(x, axis_, function.c_str());
        if (!channels_.empty() && layout.extent != channels_.size())
            throw std::invalid_argument(function + ": the input has " + std::to_string(layout.extent) +
                                        " channels along axis " + std::to_string(axis_) + " but the quantizer has " +
                                        std::to_string(channels_.size()));
        return layout;
    }

    void require_calibrated() const {
        if (!is_initialized())
            throw std::invalid_argument(
                "lowbit::PerChannelFakeQuantize::forward_with_calibration: some channel has no finite value to "
                "calibrate on");
    }

    /// Calls body(begin, length, channel) for every contiguous run of one channel.
    template <class Body>
    static void for_each_run(std::size_t size, const detail::AxisLayout& layout, Body&& body) {
        if (layout.extent == 0 || layout.stride == 0) return;
        for (std::size_t begin = 0; begin < size; begin += layout.stride)
            body(begin, std::min(layout.stride, size - begin), (begin / layout.stride) % layout.extent);
    }

    void gather(std::span<const float> data, const detail::AxisLayout& layout, bool observing) {
        if (channels_.size() != layout.extent) {
            if (observing && !channels_.empty())
                throw std::invalid_argument("lowbit::PerChannelFakeQuantize::observe: the data has " +
                                            std::to_string(layout.extent) + " channels but the quantizer has " +
                                            std::to_string(channels_.size()));
            channels_.assign(layout.extent, prototype_);
        }
        std::vector<detail::FiniteRange> ranges(layout.extent);
        for_each_run(data.size(), layout, [&](std::size_t begin, std::size_t length, std::size_t c) {
            const detail::FiniteRange run = detail::finite_min_max(data.data() + begin, length);
            if (!run.found) return;
            detail::FiniteRange& range = ranges[c];
            if (!range.found) {
                range = run;
            } else {
                range.min = std::min(range.min, run.min);
                range.max = std::max(range.max, run.max);
            }
        });
        for (std::size_t c = 0; c < layout.extent; ++c) {
            if (!ranges[c].found) continue;
            if (observing) channels_[c].observe_range(ranges[c].min, ranges[c].max);
            else channels_[c].calibrate_range(ranges[c].min, ranges[c].max);
        }
    }

    void run_forward(std::span<const float> x, std::span<float> out, const detail::AxisLayout& layout) const {
        if (channels_.empty()) {  // uncalibrated: scale 1, zero point 0 (as FakeQuantize)
            prototype_.forward(x, out);
            return;
        }
        if (config().rounding == Rounding::stochastic) {
            // One stream for the whole tensor, as FakeQuantize: element i (in storage order) draws
            // stream.uniform(i), whichever channel it belongs to.
            const UniformStream stream(config().seed);
            for_each_run(x.size(), layout, [&](std::size_t begin, std::size_t length, std::size_t c) {
                detail::reference::fake_quantize_forward_stochastic(channels_[c].params(), stream, begin,
                                                                    x.data() + begin, out.data() + begin, length);
            });
            return;
        }
        for_each_run(x.size(), layout, [&](std::size_t begin, std::size_t length, std::size_t c) {
            channels_[c].forward(x.subspan(begin, length), out.subspan(begin, length));
        });
    }

    void run_backward(std::span<const float> grad, std::span<const float> x, std::span<float> out,
                      const detail::AxisLayout& layout) const {
        if (channels_.empty()) {
            prototype_.backward_clamped(grad, x, out);
            return;
        }
        for_each_run(x.size(), layout, [&](std::size_t begin, std::size_t length, std::size_t c) {
            channels_[c].backward_clamped(grad.subspan(begin, length), x.subspan(begin, length),
                                          out.subspan(begin, length));
        });
    }

    Channel prototype_;
    int axis_ = 0;
    std::vector<Channel> channels_;
};

LOWBIT_END_NAMESPACE
