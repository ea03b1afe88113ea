// simd:: operations specific to SSE2 (and the SSE family built on it): the streaming store, the
// float min / max reductions and the int32-to-byte narrowing store.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::sse2&) noexcept {
    _mm_stream_ps(aligned_address, values);
}

/// The four lanes of a register folded by halves with `combine` (_mm_max_ps or _mm_min_ps).
template <class Combine>
inline float fold_four(__m128 four, Combine combine) noexcept {
    four = combine(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(combine(four, _mm_shuffle_ps(four, four, 1)));
}

template <class Arch>
inline float reduce_max(const xsimd::batch<float, Arch>& values, const xsimd::sse2&) noexcept {
    return fold_four(values, [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

template <class Arch>
inline float reduce_min(const xsimd::batch<float, Arch>& values, const xsimd::sse2&) noexcept {
    return fold_four(values, [](__m128 a, __m128 b) { return _mm_min_ps(a, b); });
}

/// The Count (1, 2, 4, 8 or 16) bytes at `bytes` in the low bytes of a register, the rest zero; reads
/// exactly Count bytes.
template <int Count>
inline __m128i load_low_bytes(const std::uint8_t* bytes) noexcept {
    static_assert(Count == 1 || Count == 2 || Count == 4 || Count == 8 || Count == 16,
                  "load_low_bytes: 1, 2, 4, 8 or 16 bytes");
    if constexpr (Count == 16) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
    } else if constexpr (Count == 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes, Count);
        return _mm_cvtsi64_si128(static_cast<long long>(word));
    } else {
        std::uint32_t word = 0;
        std::memcpy(&word, bytes, Count);
        return _mm_cvtsi32_si128(static_cast<int>(word));
    }
}

/// The pshufb index that puts byte i * Groups / Lanes in byte i < Lanes (the rest zero): each of
/// Groups bytes repeated over Lanes / Groups consecutive bytes.
template <int Groups, int Lanes>
inline __m128i spread_byte_index() noexcept {
    alignas(16) static constexpr std::array<std::uint8_t, 16> index = [] {
        std::array<std::uint8_t, 16> bytes{};
        for (int i = 0; i < 16; ++i)
            bytes[static_cast<std::size_t>(i)] = i < Lanes ? static_cast<std::uint8_t>(i * Groups / Lanes) : 0x80u;
        return bytes;
    }();
    return _mm_load_si128(reinterpret_cast<const __m128i*>(index.data()));
}

/// Two saturating packs (int32 -> int16 -> uint8); exact for lanes in [0, 255].
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes, const xsimd::sse2&) noexcept {
    const __m128i halves = _mm_packs_epi32(values, values);
    const std::int32_t four = _mm_cvtsi128_si32(_mm_packus_epi16(halves, halves));
    std::memcpy(bytes, &four, sizeof four);
}

/// Two signed saturating packs (int32 -> int16 -> int8); exact for lanes in [-128, 127].
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::int8_t* bytes, const xsimd::sse2&) noexcept {
    const __m128i halves = _mm_packs_epi32(values, values);
    const std::int32_t four = _mm_cvtsi128_si32(_mm_packs_epi16(halves, halves));
    std::memcpy(bytes, &four, sizeof four);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
#endif
