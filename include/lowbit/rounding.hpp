// Rounding: the one enum every fake-quant and STE path takes, and the scalar rounding and clamping
// contract every kernel reproduces bit for bit (one place; kernels and references call or mirror it).
#pragma once

#include "detail/config.hpp"

#include <cmath>
#include <cstdint>

LOWBIT_BEGIN_NAMESPACE

/// How a real-valued code v = x / scale becomes an integer code.
enum class Rounding {
    half_away_from_zero,  ///< std::round: 0.5 -> 1, -0.5 -> -1, 2.5 -> 3 (lowbit's default, the seeds')
    half_to_even,         ///< std::nearbyint in the default FP mode: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 (PyTorch, MLX CPU)
    stochastic,           ///< floor(v + u), u uniform in [0, 1) from a seeded generator: unbiased on average
};

/// The seeded source of u for Rounding::stochastic. Counter-based: the u drawn for element i of a call
/// depends only on (seed, position() + i), never on thread count or vector width, so a run repeats
/// for a given seed. Each call that rounds n values stochastically advances the position by n. The
/// caller owns the stream (pass the same object to every step of a training loop).
class UniformStream {
public:
    explicit UniformStream(std::uint64_t seed = 0) noexcept : seed_(seed) {}

    /// u in [0, 1) with 24 random bits (every value a float represents exactly: k * 2^-24).
    float uniform(std::uint64_t index) const noexcept {
        // SplitMix64 finaliser of (seed, position + index): a bijective mix, good enough for rounding noise.
        std::uint64_t bits = seed_ * 0x9E3779B97F4A7C15ull + position_ + index + 0x632BE59BD9B4E019ull;
        bits = (bits ^ (bits >> 30)) * 0xBF58476D1CE4E5B9ull;
        bits = (bits ^ (bits >> 27)) * 0x94D049BB133111EBull;
        bits ^= bits >> 31;
        return static_cast<float>(bits >> 40) * 0x1.0p-24f;
    }
    void advance(std::uint64_t count) noexcept { position_ += count; }
    std::uint64_t seed() const noexcept { return seed_; }
    std::uint64_t position() const noexcept { return position_; }

private:
    std::uint64_t seed_;
    std::uint64_t position_ = 0;
};

namespace detail {

/// Round half away from zero (C round). NaN stays NaN, +-Inf stay +-Inf, -0.3 -> -0.
inline float round_half_away_from_zero(float value) noexcept { return std::round(value); }

/// Round half to even. Uses rint in the default rounding mode, which lowbit never changes.
inline float round_half_to_even(float value) noexcept { return std::nearbyint(value); }

/// Stochastic rounding floor(value + u), u in [0, 1). The sum is formed in double, where it is exact,
/// so the result is unbiased: E[result] = value. |value| >= 2^23 is already an integer and comes back
/// unchanged; NaN and +-Inf come back unchanged.
inline float round_stochastic(float value, float uniform) noexcept {
    if (!(std::fabs(value) < 0x1.0p23f)) return value;
    return static_cast<float>(std::floor(static_cast<double>(value) + static_cast<double>(uniform)));
}

/// The deterministic rounding rules by enum (Rounding::stochastic has no deterministic meaning; callers
/// that need one, such as the zero point of a stochastic quantizer, use half_away_from_zero).
inline float round_deterministic(Rounding rounding, float value) noexcept {
    return rounding == Rounding::half_to_even ? round_half_to_even(value) : round_half_away_from_zero(value);
}

/// clamp(value, low, high) with the kernels' NaN rule: NaN passes through (then becomes NaN output),
/// +-Inf saturate to the ends. Written as two selects, which the SIMD kernels reproduce lane by lane.
inline float clamp_code(float value, float low, float high) noexcept {
    return value < low ? low : (value > high ? high : value);
}

}  // namespace detail
LOWBIT_END_NAMESPACE
