// Quantization-aware training: FakeQuantize<Bits, Symmetric>, per-tensor fake quantization with min-max
// observers, configured by FakeQuantConfig (fake_quant_config.hpp); the per-channel form is
// PerChannelFakeQuantize (per_channel_fake_quantize.hpp). Numerics: docs/numerics.md N1-N6.
//
//   forward:  v = x / s   (PyTorch preset: x * fl(1/s))
//             y = (clamp(R(v) + z, qmin, qmax) - z) * s         R = config().rounding, z added after R
//   ranges:   symmetric narrow [-(2^(b-1)-1), 2^(b-1)-1] (default), symmetric full [-2^(b-1), 2^(b-1)-1],
//             asymmetric [0, 2^b - 1]
//   backward: g (STE);  backward_clamped: g where (qmin - z) s <= x <= (qmax - z) s (raw x, inclusive),
//             PyTorch preset: where qmin <= R(v) + z <= qmax (rounded, unclamped code); else +0
//
// Every operation takes a std::span<const float> (with a std::span<float> for the output, or returning
// a std::vector<float>) or a tensor-like (Eigen dense object of any storage order, Map, Ref, Eigen::Tensor
// of any rank, TensorMap) and returns the input's shape as a plain evaluated object.
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/checks.hpp"
#include "detail/fake_quant/passes.hpp"
#include "detail/tensor_like.hpp"
#include "fake_quant_config.hpp"
#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Per-tensor fake quantization with Bits-bit codes (N3 ranges), calibrated by min-max observers (N4).
///
/// Before any calibration, forward uses scale 1 and zero point 0 and is_initialized()
/// is false. calibrate(data) sets the qparams from this data alone (and restarts the observer from it);
/// observe(data) feeds the configured observer and recomputes the qparams from its state. Non-finite
/// values are skipped; data with no finite value (or empty) changes nothing. Rounding::stochastic draws
/// from a UniformStream: forward(x, stream) advances the caller's stream, forward(x) uses a fresh
/// UniformStream(config().seed) each call (so the same x gives the same y). The zero point of a
/// stochastic quantizer is computed with half_away_from_zero. Not thread-safe for concurrent mutation.
template <int Bits, bool Symmetric = true>
class FakeQuantize {
    static_assert(Bits >= 2 && Bits <= 16, "lowbit::FakeQuantize: Bits must be from 2 to 16");

public:
    static constexpr int bits = Bits;
    static constexpr bool symmetric = Symmetric;

    FakeQuantize() : FakeQuantize(FakeQuantConfig{}) {}

    /// Throws std::invalid_argument for averaging_constant outside (0, 1] or a min_scale that is not a
    /// valid scale (finite and >= FLT_MIN: see detail::require_valid_scale).
    explicit FakeQuantize(FakeQuantConfig config) : config_(config) {
        if (!(config.averaging_constant > 0.0f && config.averaging_constant <= 1.0f))
            throw std::invalid_argument("lowbit::FakeQuantize: averaging_constant = " +
                                        detail::float_text(config.averaging_constant) + " must be in (0, 1]");
        detail::require_valid_scale("lowbit::FakeQuantize", config.min_scale, "min_scale");
    }

    // ---- code range (N3) ----
    int qmin() const noexcept {
        if constexpr (!Symmetric) return 0;
        else return config_.narrow_range ? -((1 << (Bits - 1)) - 1) : -(1 << (Bits - 1));
    }
    int qmax() const noexcept {
        if constexpr (!Symmetric) return (1 << Bits) - 1;
        else return (1 << (Bits - 1)) - 1;
    }
    int num_levels() const noexcept { return qmax() - qmin() + 1; }

    // ---- qparams ----
    float scale() const noexcept { return scale_; }
    int zero_point() const noexcept { return zero_point_; }
    bool is_initialized() const noexcept { return initialized_; }
    const FakeQuantConfig& config() const noexcept { return config_; }
    /// The observer's current range (meaningful once has_observed()).
    float observed_min() const noexcept { return observed_min_; }
    float observed_max() const noexcept { return observed_max_; }
    bool has_observed() const noexcept { return observed_; }

    /// Sets the qparams directly (and marks the quantizer initialized). Throws std::invalid_argument for
    /// a scale that is zero, negative, NaN, infinite or subnormal (below FLT_MIN), or so large that
    /// an end of the code range, (qmin - z) * scale or (qmax - z) * scale, overflows float; a zero point
    /// outside [qmin, qmax]; or a non-zero zero point on a symmetric quantizer.
    void set_qparams(float scale, int zero_point) {
        detail::require_valid_scale("lowbit::FakeQuantize::set_qparams", scale);
        if (zero_point < qmin() || zero_point > qmax())
            throw std::invalid_argument("lowbit::FakeQuantize::set_qparams: zero_point = " + std::to_string(zero_point) +
                                        " is outside [" + std::to_string(qmin()) + ", " + std::to_string(qmax()) + "]");
        if (Symmetric && zero_point != 0)
            throw std::invalid_argument("lowbit::FakeQuantize::set_qparams: zero_point = " + std::to_string(zero_point) +
                                        " must be 0 for a symmetric quantizer");
        if (!levels_finite(scale, zero_point))
            throw std::invalid_argument("lowbit::FakeQuantize::set_qparams: scale = " + detail::float_text(scale) +
                                        " with zero_point = " + std::to_string(zero_point) +
                                        " puts the end of the code range beyond the largest float");
        scale_ = scale;
        zero_point_ = zero_point;
        initialized_ = true;
    }

    // ---- calibration (N4) ----
    void calibrate(std::span<const float> data) {
        const detail::FiniteRange range = detail::finite_min_max(data.data(), data.size());
        if (range.found) calibrate_range(range.min, range.max);
    }
    template <detail::TensorLike X>
    void calibrate(const X& data) {
        const detail::ContiguousInput<X> input(data);
        calibrate(input.span());
    }
    void observe(std::span<const float> data) {
        const detail::FiniteRange range = detail::finite_min_max(data.data(), data.size());
        if (range.found) observe_range(range.min, range.max);
    }
    template <detail::TensorLike X>
    void observe(const X& data) {
        const detail::ContiguousInput<X> input(data);
        observe(input.span());
    }

    /// calibrate() from a known finite range (min <= max), e.g. one reduced elsewhere.
    void calibrate_range(float min, float max) {
        require_range("lowbit::FakeQuantize::calibrate_range", min, max);
        observed_min_ = min;
        observed_max_ = max;
        observed_ = true;
        set_from_range(min, max);
    }
    /// observe() from the finite range of one batch (min <= max).
    void observe_range(float min, float max) {
        require_range("lowbit::FakeQuantize::observe_range", min, max);
        if (!observed_) {
            observed_min_ = min;
            observed_max_ = max;
            observed_ = true;
        } else if (config_.observer == Observer::min_max) {
            observed_min_ = min < observed_min_ ? min : observed_min_;
            observed_max_ = max > observed_max_ ? max : observed_max_;
        } else {
            // The exact averages keep min <= max; rounded, a batch narrower than the range can leave them
            // one ulp crossed (where PyTorch's qparams check fails): put in order (N4.7).
            const float low = moving_average(observed_min_, min), high = moving_average(observed_max_, max);
            observed_min_ = low <= high ? low : high;
            observed_max_ = low <= high ? high : low;
        }
        set_from_range(observed_min_, observed_max_);
    }

    // ---- forward (N5) ----
    void forward(std::span<const float> x, std::span<float> out) const {
        detail::require_same_size("lowbit::FakeQuantize::forward", "x", x.size(), "out", out.size());
        if (config_.rounding == Rounding::stochastic) {
            UniformStream stream(config_.seed);
            detail::fake_quantize_forward_stochastic(params(), stream, x.data(), out.data(), x.size());
        } else {
            detail::fake_quantize_forward(params(), x.data(), out.data(), x.size());
        }
    }
    /// Rounding::stochastic with the caller's stream (advanced by x.size()); other rules ignore it.
    void forward(std::span<const float> x, std::span<float> out, UniformStream& stream) const {
        detail::require_same_size("lowbit::FakeQuantize::forward", "x", x.size(), "out", out.size());
        if (config_.rounding == Rounding::stochastic)
            detail::fake_quantize_forward_stochastic(params(), stream, x.data(), out.data(), x.size());
        else
            detail::fake_quantize_forward(params(), x.data(), out.data(), x.size());
    }
    std::vector<float> forward(std::span<const float> x) const {
        std::vector<float> out(x.size());
        forward(x, out);
        return out;
    }
    std::vector<float> forward(std::span<const float> x, UniformStream& stream) const {
        std::vector<float> out(x.size());
        forward(x, out, stream);
        return out;
    }
    template <detail::TensorLike X>
    detail::result_t<X> forward(const X& x) const {
        return detail::map_tensor(x, [&](std::span<const float> in, std::span<float> out) { forward(in, out); });
    }
    template <detail::TensorLike X>
    detail::result_t<X> forward(const X& x, UniformStream& stream) const {
        return detail::map_tensor(x, [&](std::span<const float> in, std::span<float> out) { forward(in, out, stream); });
    }

    /// Calibrates on x first if not yet initialized (once), then forward(x). Throws std::invalid_argument
    /// when the quantizer is uncalibrated and x has no finite value to calibrate on.
    void forward_with_calibration(std::span<const float> x, std::span<float> out) {
        calibrate_once(x);
        forward(x, out);
    }
    std::vector<float> forward_with_calibration(std::span<const float> x) {
        calibrate_once(x);
        return forward(x);
    }
    template <detail::TensorLike X>
    detail::result_t<X> forward_with_calibration(const X& x) {
        const detail::ContiguousInput<X> input(x);
        calibrate_once(input.span());
        return forward(x);
    }

    // ---- backward (N6) ----
    /// Straight-through estimator: the gradient unchanged.
    void backward(std::span<const float> grad, std::span<float> out) const {
        detail::require_same_size("lowbit::FakeQuantize::backward", "grad", grad.size(), "out", out.size());
        if (grad.data() != out.data()) std::copy(grad.begin(), grad.end(), out.begin());
    }
    std::vector<float> backward(std::span<const float> grad) const { return {grad.begin(), grad.end()}; }
    template <detail::TensorLike G>
    detail::result_t<G> backward(const G& grad) const {
        return detail::map_tensor(grad, [&](std::span<const float> in, std::span<float> out) { backward(in, out); });
    }

    /// Clamped STE: grad where the input passes config().gradient_mask, else +0 (NaN inputs never pass).
    /// Throws std::invalid_argument when grad and input differ in shape.
    void backward_clamped(std::span<const float> grad, std::span<const float> input, std::span<float> out) const {
        detail::require_same_size("lowbit::FakeQuantize::backward_clamped", "grad", grad.size(), "input", input.size());
        detail::require_same_size("lowbit::FakeQuantize::backward_clamped", "grad", grad.size(), "out", out.size());
        detail::backward_clamped(mask(), grad.data(), input.data(), out.data(), grad.size());
    }
    std::vector<float> backward_clamped(std::span<const float> grad, std::span<const float> input) const {
        std::vector<float> out(grad.size());
        backward_clamped(grad, input, out);
        return out;
    }
    template <detail::TensorLike G, detail::TensorLike X>
    detail::result_t<G> backward_clamped(const G& grad, const X& input) const {
        return detail::map_tensor2(grad, input, "lowbit::FakeQuantize::backward_clamped",
                                   [&](std::span<const float> g, std::span<const float> x, std::span<float> out) {
                                       backward_clamped(g, x, out);
                                   });
    }

    /// LSQ (docs/numerics.md N6.4) with this quantizer's quotient and rounding (z added after rounding, as forward;
    /// stochastic rounds half away from zero here). Per element, q = R(v) + z:
    ///   q < qmin: dx = 0, ds = g (qmin - z) f;   q > qmax: dx = 0, ds = g (qmax - z) f;
    ///   else      dx = g, ds = g (y - x) / s f    (y = forward(x); * fl(1/s) in the PyTorch preset)
    /// f = grad_factor (1/sqrt(numel qmax) for LSQ's gradient scaling). NaN inputs give dx = 0, ds = 0.
    /// Returns the scale gradient (summed in double, rounded once); writes dx to out.
    float backward_lsq(std::span<const float> grad, std::span<const float> input, std::span<float> out,
                       float grad_factor = 1.0f) const {
        detail::require_same_size("lowbit::FakeQuantize::backward_lsq", "grad", grad.size(), "input", input.size());
        detail::require_same_size("lowbit::FakeQuantize::backward_lsq", "grad", grad.size(), "out", out.size());
        FakeQuantParams p = params();
        if (p.rounding == Rounding::stochastic) p.rounding = Rounding::half_away_from_zero;
        const float low_step = static_cast<float>(qmin() - zero_point_);
        const float high_step = static_cast<float>(qmax() - zero_point_);
        double grad_scale = 0.0;
        for (std::size_t i = 0; i < grad.size(); ++i) {
            const float x = input[i];
            const float quotient = detail::fake_quant_quotient(p, x);
            const float code = detail::round_deterministic(p.rounding, quotient) + p.zero_point;
            float ds = 0.0f;
            if (std::isnan(x)) {
                out[i] = 0.0f;
            } else if (code < p.code_min) {
                out[i] = 0.0f;
                ds = grad[i] * low_step * grad_factor;
            } else if (code > p.code_max) {
                out[i] = 0.0f;
                ds = grad[i] * high_step * grad_factor;
            } else {
                const float y = (code - p.zero_point) * p.scale;
                const float relative = p.multiply_by_reciprocal ? (y - x) * p.inv_scale : (y - x) / p.scale;
                ds = grad[i] * relative * grad_factor;
                out[i] = grad[i];
            }
            grad_scale += static_cast<double>(ds);
        }
        return static_cast<float>(grad_scale);
    }
    LsqGradients<std::vector<float>> backward_lsq(std::span<const float> grad, std::span<const float> input,
                                                  float grad_factor = 1.0f) const {
        LsqGradients<std::vector<float>> result;
        result.grad_input.resize(grad.size());
        result.grad_scale = backward_lsq(grad, input, result.grad_input, grad_factor);
        return result;
    }
    template <detail::TensorLike G, detail::TensorLike X>
    LsqGradients<detail::result_t<G>> backward_lsq(const G& grad, const X& input, float grad_factor = 1.0f) const {
        float grad_scale = 0.0f;
        auto grad_input = detail::map_tensor2(
            grad, input, "lowbit::FakeQuantize::backward_lsq",
            [&](std::span<const float> g, std::span<const float> x, std::span<float> out) {
                grad_scale = backward_lsq(g, x, out, grad_factor);
            });
        return {std::move(grad_input), grad_scale};
    }

    /// The current qparams as one forward pass's parameters (<lowbit/fake_quant_params.hpp>: scale,
    /// zero point, code range, rounding; what forward computes with).
    FakeQuantParams params() const noexcept {
        FakeQuantParams p;
        p.scale = scale_;
        p.zero_point = static_cast<float>(zero_point_);
        p.code_min = static_cast<float>(qmin());
        p.code_max = static_cast<float>(qmax());
        p.multiply_by_reciprocal = config_.multiply_by_reciprocal;
        p.rounding = config_.rounding;
        return p.finish();
    }
    /// The pass band backward_clamped applies with the current qparams and config().gradient_mask.
    GradientMaskParams mask() const noexcept {
        GradientMaskParams m;
        m.code = params();
        if (m.code.rounding == Rounding::stochastic) m.code.rounding = Rounding::half_away_from_zero;
        m.on_rounded_code = config_.gradient_mask == GradientMask::rounded_code;
        m.low = static_cast<float>(qmin() - zero_point_) * scale_;
        m.high = static_cast<float>(qmax() - zero_point_) * scale_;
        return m;
    }

private:
    /// m + c (batch - m) in f32 as PyTorch computes it; when batch - m overflows (extremes of opposite
    /// sign near FLT_MAX) the same formula in double, whose result lies between m and batch and so fits.
    float moving_average(float average, float batch) const noexcept {
        const float c = config_.averaging_constant;
        const float next = average + c * (batch - average);
        if (std::isfinite(next)) return next;
        const double wide = static_cast<double>(average) +
                            static_cast<double>(c) * (static_cast<double>(batch) - static_cast<double>(average));
        return static_cast<float>(wide);
    }

    /// True when both ends of the code range, (qmin - z) s and (qmax - z) s, are finite floats.
    bool levels_finite(float scale, int zero_point) const noexcept {
        return std::isfinite(static_cast<float>(qmin() - zero_point) * scale) &&
               std::isfinite(static_cast<float>(qmax() - zero_point) * scale);
    }

    static void require_range(const char* function, float min, float max) {
        if (!(std::isfinite(min) && std::isfinite(max) && min <= max))
            throw std::invalid_argument(std::string(function) + ": range [" + detail::float_text(min) + ", " +
                                        detail::float_text(max) + "] must be finite with min <= max");
    }

    /// N4: symmetric s = max(|min|, |max|) / qmax, z = 0; asymmetric: widen to contain 0, then
    /// s = (max - min) / (qmax - qmin), floor s at min_scale, z = clamp(qmin - R(min / s), qmin, qmax).
    /// When a range touching +-FLT_MAX makes (qmax - z) s or (qmin - z) s overflow, s is lowered by the
    /// fewest ulps that keep both finite (forward(FLT_MAX) is then the largest finite level, not inf).
    void set_from_range(float min, float max) {
        float scale = 0.0f;
        int zero_point = 0;
        if constexpr (Symmetric) {
            const float magnitude = std::fmax(std::fabs(min), std::fabs(max));
            scale = magnitude / static_cast<float>(qmax());
            if (!(scale >= config_.min_scale)) scale = config_.min_scale;
        } else {
            const float low = std::fmin(min, 0.0f);
            const float high = std::fmax(max, 0.0f);
            const float levels = static_cast<float>(qmax() - qmin());
            float width = high - low;
            scale = std::isfinite(width)
                        ? width / levels
                        : static_cast<float>((static_cast<double>(high) - static_cast<double>(low)) / levels);
            if (!(scale >= config_.min_scale)) scale = config_.min_scale;
            const Rounding rule =
                config_.rounding == Rounding::stochastic ? Rounding::half_away_from_zero : config_.rounding;
            const float code = static_cast<float>(qmin()) - detail::round_deterministic(rule, low / scale);
            zero_point = static_cast<int>(detail::clamp_code(code, static_cast<float>(qmin()), static_cast<float>(qmax())));
        }
        // A range reaching +-FLT_MAX can round s up so far that qmax * s overflows: step s down to the
        // largest scale whose code-range ends are finite, so forward saturates at the largest finite level.
        while (!levels_finite(scale, zero_point)) scale = std::nextafter(scale, 0.0f);
        scale_ = scale;
        zero_point_ = zero_point;
        initialized_ = true;
    }

    void calibrate_once(std::span<const float> x) {
        if (initialized_) return;
        calibrate(x);
        if (!initialized_)
            throw std::invalid_argument(std::string("lowbit::FakeQuantize::forward_with_calibration: ") +
                                        (x.empty() ? "x is empty" : "x has no finite value (all NaN or Inf)") +
                                        ", so there is nothing to calibrate on");
    }

    FakeQuantConfig config_;
    float scale_ = 1.0f;
    int zero_point_ = 0;
    bool initialized_ = false;
    float observed_min_ = 0.0f;
    float observed_max_ = 0.0f;
    bool observed_ = false;
};

LOWBIT_END_NAMESPACE

// PerChannelFakeQuantize was declared in this header before it had its own; code that includes this one
// for it keeps compiling.
#include "per_channel_fake_quantize.hpp"
