// Straight-through-estimator free functions (docs/numerics.md N7):
//   ste_forward(x, s, lo, hi) = clamp(R(x / s), lo, hi) * s     R: Rounding, default half away from zero
//   ternary_ste(x, s) = ste_forward(x, s, -1, 1);  int8_ste(x, s) = ste_forward(x, s, -127, 127)
//   ste_backward(g) = g, the identity (the straight-through estimator's gradient of the rounding)
// NaN stays NaN; +-Inf saturate to lo * s, hi * s; a zero result is +0. Rounding::stochastic draws u from
// a fresh UniformStream(0), or from the caller's stream in the overloads that take one.
// Errors (std::invalid_argument): scale zero, negative, NaN, infinite or subnormal (below FLT_MIN);
// min_val > max_val or NaN bounds; a finite bound whose level bound * scale overflows float; x and out
// of different sizes.
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/fake_quant/passes.hpp"
#include "detail/tensor_like.hpp"
#include "fake_quantize.hpp"
#include "rounding.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail {

inline FakeQuantParams ste_params(const char* function, float scale, float min_val, float max_val, Rounding rounding) {
    require_valid_scale(function, scale);
    if (!(min_val <= max_val))
        throw std::invalid_argument(std::string(function) + ": min_val = " + float_text(min_val) +
                                    " must be <= max_val = " + float_text(max_val));
    // A finite bound whose level overflows would turn finite inputs into inf (as set_qparams refuses).
    for (const float bound : {min_val, max_val})
        if (std::isfinite(bound) && !std::isfinite(bound * scale))
            throw std::invalid_argument(std::string(function) + ": scale = " + float_text(scale) + " with bound " +
                                        float_text(bound) + " puts the end of the code range beyond the largest float");
    FakeQuantParams params;
    params.scale = scale;
    params.zero_point = 0.0f;
    params.code_min = min_val;
    params.code_max = max_val;
    params.multiply_by_reciprocal = false;
    params.rounding = rounding;
    return params.finish();
}

inline void ste_run(const char* function, const FakeQuantParams& params, UniformStream* stream,
                    std::span<const float> x, std::span<float> out) {
    require_same_size(function, "x", x.size(), "out", out.size());
    if (params.rounding == Rounding::stochastic) {
        UniformStream fresh;
        fake_quantize_forward_stochastic(params, stream != nullptr ? *stream : fresh, x.data(), out.data(), x.size());
    } else {
        fake_quantize_forward(params, x.data(), out.data(), x.size());
    }
}

/// ste_forward for the named STE functions (ternary_ste, int8_ste): same pass, errors naming `function`.
inline void named_ste(const char* function, std::span<const float> x, std::span<float> out, float scale,
                      float min_val, float max_val, Rounding rounding) {
    ste_run(function, ste_params(function, scale, min_val, max_val, rounding), nullptr, x, out);
}
template <TensorLike X>
result_t<X> named_ste(const char* function, const X& x, float scale, float min_val, float max_val, Rounding rounding) {
    const FakeQuantParams params = ste_params(function, scale, min_val, max_val, rounding);
    return map_tensor(x, [&](std::span<const float> in, std::span<float> out) {
        ste_run(function, params, nullptr, in, out);
    });
}

}  // namespace detail

/// out = clamp(R(x / scale), min_val, max_val) * scale.
inline void ste_forward(std::span<const float> x, std::span<float> out, float scale, float min_val, float max_val,
                        Rounding rounding = Rounding::half_away_from_zero) {
    detail::ste_run("lowbit::ste_forward", detail::ste_params("lowbit::ste_forward", scale, min_val, max_val, rounding),
                    nullptr, x, out);
}
/// Stochastic rounding with the caller's stream (advanced by x.size()).
inline void ste_forward(std::span<const float> x, std::span<float> out, float scale, float min_val, float max_val,
                        UniformStream& stream) {
    detail::ste_run("lowbit::ste_forward",
                    detail::ste_params("lowbit::ste_forward", scale, min_val, max_val, Rounding::stochastic), &stream, x,
                    out);
}
inline std::vector<float> ste_forward(std::span<const float> x, float scale, float min_val, float max_val,
                                      Rounding rounding = Rounding::half_away_from_zero) {
    std::vector<float> out(x.size());
    ste_forward(x, out, scale, min_val, max_val, rounding);
    return out;
}
template <detail::TensorLike X>
detail::result_t<X> ste_forward(const X& x, float scale, float min_val, float max_val,
                                Rounding rounding = Rounding::half_away_from_zero) {
    const FakeQuantParams params = detail::ste_params("lowbit::ste_forward", scale, min_val, max_val, rounding);
    return detail::map_tensor(x, [&](std::span<const float> in, std::span<float> out) {
        detail::ste_run("lowbit::ste_forward", params, nullptr, in, out);
    });
}
template <detail::TensorLike X>
detail::result_t<X> ste_forward(const X& x, float scale, float min_val, float max_val, UniformStream& stream) {
    const FakeQuantParams params =
        detail::ste_params("lowbit::ste_forward", scale, min_val, max_val, Rounding::stochastic);
    return detail::map_tensor(x, [&](std::span<const float> in, std::span<float> out) {
        detail::ste_run("lowbit::ste_forward", params, &stream, in, out);
    });
}

/// The STE gradient: grad unchanged.
inline void ste_backward(std::span<const float> grad, std::span<float> out) {
    detail::require_same_size("lowbit::ste_backward", "grad", grad.size(), "out", out.size());
    if (grad.data() != out.data()) std::copy(grad.begin(), grad.end(), out.begin());
}
inline std::vector<float> ste_backward(std::span<const float> grad) { return {grad.begin(), grad.end()}; }
template <detail::TensorLike G>
detail::result_t<G> ste_backward(const G& grad) {
    return detail::map_tensor(grad, [](std::span<const float> in, std::span<float> out) { ste_backward(in, out); });
}

/// Ternary STE: codes in {-1, 0, 1} (scale typically the absmean of the weights).
inline void ternary_ste(std::span<const float> x, std::span<float> out, float scale,
                        Rounding rounding = Rounding::half_away_from_zero) {
    detail::named_ste("lowbit::ternary_ste", x, out, scale, -1.0f, 1.0f, rounding);
}
inline std::vector<float> ternary_ste(std::span<const float> x, float scale,
                                      Rounding rounding = Rounding::half_away_from_zero) {
    std::vector<float> out(x.size());
    ternary_ste(x, out, scale, rounding);
    return out;
}
template <detail::TensorLike X>
detail::result_t<X> ternary_ste(const X& x, float scale, Rounding rounding = Rounding::half_away_from_zero) {
    return detail::named_ste("lowbit::ternary_ste", x, scale, -1.0f, 1.0f, rounding);
}

/// int8 STE: codes in [-127, 127] (scale typically absmax / 127).
inline void int8_ste(std::span<const float> x, std::span<float> out, float scale,
                     Rounding rounding = Rounding::half_away_from_zero) {
    detail::named_ste("lowbit::int8_ste", x, out, scale, -127.0f, 127.0f, rounding);
}
inline std::vector<float> int8_ste(std::span<const float> x, float scale,
                                   Rounding rounding = Rounding::half_away_from_zero) {
    std::vector<float> out(x.size());
    int8_ste(x, out, scale, rounding);
    return out;
}
template <detail::TensorLike X>
detail::result_t<X> int8_ste(const X& x, float scale, Rounding rounding = Rounding::half_away_from_zero) {
    return detail::named_ste("lowbit::int8_ste", x, scale, -127.0f, 127.0f, rounding);
}

LOWBIT_END_NAMESPACE
