// xsimd kernels of the element-wise fake-quant passes; each equals its scalar reference in
// fake_quant/reference.hpp bit for bit (NaN: any NaN), for every length and alignment.
//
// Invariants:
// * Rounding: half_away_from_zero is trunc(v + copysign(0.5 - 2^-25, v)), which equals std::round for
//   every float: below 2^23 the sum rounds across an integer exactly when the fraction is >= 0.5 (a
//   0.5 fraction lands half-way between 1 - 2^-24 and 1 and ties to the even 1); from 2^23 on every float
//   is an integer and the sum rounds back to v. (xsimd::round is also RHAZ but costs twice the
//   instructions.) half_to_even is xsimd::nearbyint via simd::nearbyint (std::nearbyint in the default FP mode).
// * Quotient::divide_checked forms x / s (docs/numerics.md N2) without a division in almost every lane:
//   m = x * fl(1/s) is within 4u|x/s| of fl(x/s) (u = 2^-24: u from fl(1/s), u from the product, u from
//   fl(x/s)), so both round to the same integer unless a half-integer lies within 2^-22 |m| of m. Lanes
//   that close to a tie (checked with the wider margin 2^-21 |m|), in a batch, send the whole batch
//   through the true division. |m| >= 2^20 is exempt: any code that large is clamped to the same range
//   end either way (|qmin|, |qmax|, |z| <= 2^16). Used only when fl(1/s) is a normal float (else the error
//   bound fails); the caller checks. Whether it is used at all: choose_quotient.
// * Tails and the alignment head of streaming passes go through one padded batch, so every element
//   sees the vector code (never a scalar fallback with different rounding).
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <limits>

#include "../simd.hpp"
#include "../unroll.hpp"
#include "params.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

template <class Arch>
using float_batch = xsimd::batch<float, Arch>;

/// How the kernels form v from x.
enum class Quotient {
    divide,          ///< x / s, a division in every lane
    divide_checked,  ///< x / s, through x * fl(1/s) with the near-tie check above (bit-identical)
    multiply,        ///< x * fl(1/s), PyTorch's quotient
};

template <class Arch>
inline float_batch<Arch> round_half_away(const float_batch<Arch>& values) noexcept {
    return simd::trunc(values + xsimd::copysign(float_batch<Arch>(0x1.fffffep-2f), values));
}

template <Rounding R, class Arch>
inline float_batch<Arch> round_rule(const float_batch<Arch>& values) noexcept {
    static_assert(R != Rounding::stochastic, "lowbit: the SIMD kernels take the deterministic rounding rules only");
    if constexpr (R == Rounding::half_away_from_zero) return round_half_away<Arch>(values);
    else return simd::nearbyint(values);
}

/// The fake-quant pass of FakeQuantParams on one batch (and the rounded code the mask uses).
/// The clamp is max(low, v) then min(high, .): x86 max/min return their second operand when the lanes
/// are equal or either is NaN, which is the reference's clamp_code rule (NaN passes, ties keep v); on
/// NEON NaN propagates too and a differing zero sign vanishes in the final + 0.
template <class Arch, Rounding R, Quotient Q>
struct ForwardOp {
    using batch = float_batch<Arch>;
    batch scale, inv_scale, clamp_low, clamp_high, code_min, code_max;
    bool outer_clamp;

    explicit ForwardOp(const FakeQuantParams& params) noexcept
        : scale(params.scale), inv_scale(params.inv_scale), clamp_low(params.clamp_low),
          clamp_high(params.clamp_high), code_min(params.code_min), code_max(params.code_max),
          outer_clamp(params.outer_clamp) {}

    batch clamp(const batch& v) const noexcept { return simd::min(clamp_high, simd::max(clamp_low, v)); }

    /// R(clamp(v)).
    batch rounded_clamped(const batch& x) const noexcept {
        if constexpr (Q == Quotient::multiply) {
            return round_rule<R, Arch>(clamp(x * inv_scale));
        } else if constexpr (Q == Quotient::divide) {
            return round_rule<R, Arch>(clamp(simd::div(x, scale)));
        } else {
            // Clamped values are integers or inside the code range (|.| <= 2^17), so no size exemption.
            const batch clamped = clamp(x * inv_scale);
            const batch code = round_rule<R, Arch>(clamped);
            const auto near_tie =
                (batch(0.5f) - xsimd::abs(clamped - code)) <= xsimd::abs(clamped) * batch(0x1.0p-21f);
            if (xsimd::any(near_tie)) return round_rule<R, Arch>(clamp(simd::div(x, scale)));
            return code;
        }
    }

    /// R(v), unclamped (the PyTorch mask).
    batch rounded(const batch& x) const noexcept {
        if constexpr (Q == Quotient::multiply) {
            return round_rule<R, Arch>(x * inv_scale);
        } else if constexpr (Q == Quotient::divide) {
            return round_rule<R, Arch>(simd::div(x, scale));
        } else {
            const batch product = x * inv_scale;
            const batch code = round_rule<R, Arch>(product);
            const batch magnitude = xsimd::abs(product);
            const auto near_tie = ((batch(0.5f) - xsimd::abs(product - code)) <= magnitude * batch(0x1.0p-21f)) &
                                  (magnitude < batch(0x1.0p20f));
            if (xsimd::any(near_tie)) return round_rule<R, Arch>(simd::div(x, scale));
            return code;
        }
    }

    batch operator()(const batch& x) const noexcept {
        batch code = rounded_clamped(x);
        if (outer_clamp) code = simd::min(code_max, simd::max(code_min, code));
        return (code + batch(0.0f)) * scale;
    }
};

/// backward_clamped with the raw-input band: g where low <= x <= high, else +0.
template <class Arch>
struct BandMaskOp {
    using batch = float_batch<Arch>;
    batch low, high;
    explicit BandMaskOp(const GradientMaskParams& mask) noexcept : low(mask.low), high(mask.high) {}
    batch operator()(const batch& grad, const batch& x) const noexcept {
        return xsimd::select((x >= low) & (x <= high), grad, batch(0.0f));
    }
};

/// backward_clamped on the rounded, unclamped code (PyTorch): g where qmin <= R(v) + z <= qmax.
template <class Arch, Rounding R, Quotient Q>
struct CodeMaskOp {
    using batch = float_batch<Arch>;
    ForwardOp<Arch, R, Q> forward;
    explicit CodeMaskOp(const GradientMaskParams& mask) noexcept : forward(mask.code) {}
    batch operator()(const batch& grad, const batch& x) const noexcept {
        const batch code = forward.rounded(x);
        return xsimd::select((code >= forward.clamp_low) & (code <= forward.clamp_high), grad, batch(0.0f));
    }
};

/// Batches per iteration of transform's loop: four independent chains (division, rounding, clamp and
/// scale each) let the core overlap them (benchmarks/README.md).
inline constexpr std::size_t transform_unroll = 4;

/// out[i] = op(inputs[0][i], inputs[1][i], ...) for i < count (one input for forward passes, grad and x
/// for masks). With Stream, full batches are written with non-temporal stores (the output never comes
/// back through the caches); the caller fences. An input may be `out` itself.
template <class Arch, bool Stream, class Op, class... Inputs>
inline void transform(const Op& op, float* out, std::size_t count, const Inputs*... inputs) noexcept {
    using batch = float_batch<Arch>;
    constexpr std::size_t lanes = batch::size;
    constexpr std::size_t input_count = sizeof...(Inputs);
    auto partial = [&](std::size_t begin, std::size_t length) {
        const std::array<const float*, input_count> sources{inputs...};
        alignas(Arch::alignment()) float buffers[input_count][lanes] = {};
        for (std::size_t n = 0; n < input_count; ++n)
            std::memcpy(buffers[n], sources[n] + begin, length * sizeof(float));
        const batch result = [&]<std::size_t... I>(std::index_sequence<I...>) {
            return op(batch::load_aligned(buffers[I])...);
        }(std::make_index_sequence<input_count>{});
        result.store_aligned(buffers[0]);
        std::memcpy(out + begin, buffers[0], length * sizeof(float));
    };
    auto store = [out](std::size_t at, const batch& result) LOWBIT_ALWAYS_INLINE {
        if constexpr (Stream) simd::store_stream(out + at, result);
        else result.store_unaligned(out + at);
    };
    std::size_t i = 0;
    if constexpr (Stream) {
        const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(out) % Arch::alignment();
        const std::size_t head = misaligned == 0 ? 0 : (Arch::alignment() - misaligned) / sizeof(float);
        if (head != 0 && head < count) {
            partial(0, head);
            i = head;
        }
    }
    // transform_unroll batches per iteration, each an independent chain, then one at a time.
    for (; i + transform_unroll * lanes <= count; i += transform_unroll * lanes) {
        std::array<batch, transform_unroll> results;
        static_for<transform_unroll>([&](auto u) LOWBIT_ALWAYS_INLINE {
            results[u] = op(batch::load_unaligned(inputs + i + decltype(u)::value * lanes)...);
        });
        static_for<transform_unroll>([&](auto u) LOWBIT_ALWAYS_INLINE {
            store(i + decltype(u)::value * lanes, results[u]);
        });
    }
    for (; i + lanes <= count; i += lanes) store(i, op(batch::load_unaligned(inputs + i)...));
    if (i < count) partial(i, count - i);
}

/// The quotient the kernels use for `params`: PyTorch's multiply, or the division. The division is a
/// real vdivps unless LOWBIT_DIVIDE_VIA_RECIPROCAL is defined: where this was measured, a vector
/// division cost less than the near-tie check's extra instructions, so plain division is faster;
/// cores with slow division may prefer the checked reciprocal (figures: benchmarks/README.md). Both
/// are bit-identical and both are tested.
inline Quotient choose_quotient(const FakeQuantParams& params) noexcept {
    if (params.multiply_by_reciprocal) return Quotient::multiply;
#if defined(LOWBIT_DIVIDE_VIA_RECIPROCAL)
    const float magnitude = params.inv_scale < 0 ? -params.inv_scale : params.inv_scale;
    const bool normal = magnitude >= std::numeric_limits<float>::min() && magnitude <= std::numeric_limits<float>::max();
    return normal ? Quotient::divide_checked : Quotient::divide;
#else
    return Quotient::divide;
#endif
}

/// Whether divide_checked is valid for params (fl(1/s) a normal float); the tests use it.
inline bool reciprocal_check_applies(const FakeQuantParams& params) noexcept {
    const float magnitude = params.inv_scale < 0 ? -params.inv_scale : params.inv_scale;
    return magnitude >= std::numeric_limits<float>::min() && magnitude <= std::numeric_limits<float>::max();
}

/// Calls body.template operator()<R, Q>() for the rounding and quotient of `params` (deterministic only).
template <class Body>
inline void with_rule(const FakeQuantParams& params, Quotient quotient, Body&& body) {
    auto with_quotient = [&](auto rounding) {
        constexpr Rounding R = decltype(rounding)::value;
        switch (quotient) {
            case Quotient::multiply: body.template operator()<R, Quotient::multiply>(); break;
            case Quotient::divide: body.template operator()<R, Quotient::divide>(); break;
            case Quotient::divide_checked: body.template operator()<R, Quotient::divide_checked>(); break;
        }
    };
    if (params.rounding == Rounding::half_to_even)
        with_quotient(std::integral_constant<Rounding, Rounding::half_to_even>{});
    else
        with_quotient(std::integral_constant<Rounding, Rounding::half_away_from_zero>{});
}

/// Forward pass over [0, count); deterministic rounding. `stream`: non-temporal stores (then fences).
template <class Arch>
inline void fake_quantize_forward(const FakeQuantParams& params, Quotient quotient, bool stream, const float* in,
                                  float* out, std::size_t count) {
    with_rule(params, quotient, [&]<Rounding R, Quotient Q>() {
        const ForwardOp<Arch, R, Q> op(params);
        if (stream) {
            transform<Arch, true>(op, out, count, in);
            simd::stream_fence();
        } else {
            transform<Arch, false>(op, out, count, in);
        }
    });
}

/// backward_clamped over [0, count).
template <class Arch>
inline void backward_clamped(const GradientMaskParams& mask, Quotient quotient, bool stream, const float* grad,
                             const float* input, float* out, std::size_t count) {
    auto run = [&](const auto& op) {
        if (stream) {
            transform<Arch, true>(op, out, count, grad, input);
            simd::stream_fence();
        } else {
            transform<Arch, false>(op, out, count, grad, input);
        }
    };
    if (!mask.on_rounded_code) {
        run(BandMaskOp<Arch>(mask));
        return;
    }
    with_rule(mask.code, quotient, [&]<Rounding R, Quotient Q>() { run(CodeMaskOp<Arch, R, Q>(mask)); });
}

/// Smallest and largest finite value of in[0, count): NaN and +-Inf skipped, zeros as +0.
template <class Arch>
inline FiniteRange finite_min_max(const float* in, std::size_t count) noexcept {
    using batch = float_batch<Arch>;
    constexpr std::size_t lanes = batch::size;
    constexpr float infinity = std::numeric_limits<float>::infinity();
    const batch largest(std::numeric_limits<float>::max());
    batch low(infinity), high(-infinity);
    auto fold = [&](const batch& x) {
        const auto finite = xsimd::abs(x) <= largest;  // false for NaN and +-Inf
        low = simd::min(low, xsimd::select(finite, x, batch(infinity)));
        high = simd::max(high, xsimd::select(finite, x, batch(-infinity)));
    };
    std::size_t i = 0;
    for (; i + lanes <= count; i += lanes) fold(batch::load_unaligned(in + i));
    if (i < count) {
        alignas(Arch::alignment()) float buffer[lanes];
        for (auto& value : buffer) value = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(buffer, in + i, (count - i) * sizeof(float));
        fold(batch::load_aligned(buffer));
    }
    // Horizontal reduction through memory, once per call (xsimd 13's AVX-512 reduce_min/max trips the
    // GCC 12 -Wuninitialized warning inside _mm512_permutexvar_ps; see simd::trunc).
    alignas(Arch::alignment()) float low_lanes[lanes];
    alignas(Arch::alignment()) float high_lanes[lanes];
    low.store_aligned(low_lanes);
    high.store_aligned(high_lanes);
    float min = low_lanes[0], max = high_lanes[0];
    for (std::size_t lane = 1; lane < lanes; ++lane) {
        min = low_lanes[lane] < min ? low_lanes[lane] : min;
        max = high_lanes[lane] > max ? high_lanes[lane] : max;
    }
    FiniteRange range;
    if (!(min <= max)) return range;
    range.min = min + 0.0f;
    range.max = max + 0.0f;
    range.found = true;
    return range;
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
