// simd:: operations for any xsimd architecture: plain xsimd calls (with the xsimd 8 / 9+ spelling
// differences). The x86_*.hpp files beside this one overload them for the instruction sets where
// lowbit needs a specific instruction; overload resolution on the architecture tag (xsimd's
// architectures derive from `generic`, AVX-512 ones from avx512f) picks the most specific one.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd::arch_ops {

template <class T, class Arch>
inline T reduce_add(const xsimd::batch<T, Arch>& values, const xsimd::generic&) noexcept {
#if XSIMD_VERSION_MAJOR >= 9
    return xsimd::reduce_add(values);
#else
    return xsimd::hadd(values);
#endif
}

template <class T, class Arch>
inline T reduce_max(const xsimd::batch<T, Arch>& values, const xsimd::generic&) noexcept {
#if XSIMD_VERSION_MAJOR >= 9
    return xsimd::reduce_max(values);
#else
    alignas(Arch::alignment()) T lanes[xsimd::batch<T, Arch>::size];
    values.store_aligned(lanes);
    T largest = lanes[0];
    for (std::size_t i = 1; i < xsimd::batch<T, Arch>::size; ++i) largest = lanes[i] > largest ? lanes[i] : largest;
    return largest;
#endif
}

template <class T, class Arch>
inline T reduce_min(const xsimd::batch<T, Arch>& values, const xsimd::generic&) noexcept {
#if XSIMD_VERSION_MAJOR >= 9
    return xsimd::reduce_min(values);
#else
    alignas(Arch::alignment()) T lanes[xsimd::batch<T, Arch>::size];
    values.store_aligned(lanes);
    T smallest = lanes[0];
    for (std::size_t i = 1; i < xsimd::batch<T, Arch>::size; ++i) smallest = lanes[i] < smallest ? lanes[i] : smallest;
    return smallest;
#endif
}

template <int Bits, class Arch>
inline xsimd::batch<std::uint32_t, Arch> shift_right(const xsimd::batch<std::uint32_t, Arch>& values,
                                                     const xsimd::generic&) noexcept {
    return values >> Bits;
}

template <int Bits, class Arch>
inline xsimd::batch<std::int32_t, Arch> shift_right(const xsimd::batch<std::int32_t, Arch>& values,
                                                    const xsimd::generic&) noexcept {
    return values >> Bits;
}

template <int Bits, class Arch>
inline xsimd::batch<std::uint32_t, Arch> shift_left(const xsimd::batch<std::uint32_t, Arch>& values,
                                                    const xsimd::generic&) noexcept {
    return values << Bits;
}

template <class Arch>
inline xsimd::batch<float, Arch> trunc(const xsimd::batch<float, Arch>& values, const xsimd::generic&) noexcept {
    return xsimd::trunc(values);
}

template <class Arch>
inline xsimd::batch<float, Arch> nearbyint(const xsimd::batch<float, Arch>& values, const xsimd::generic&) noexcept {
    return xsimd::nearbyint(values);
}

template <class Arch>
inline xsimd::batch<float, Arch> div(const xsimd::batch<float, Arch>& numerator,
                                     const xsimd::batch<float, Arch>& denominator, const xsimd::generic&) noexcept {
    return numerator / denominator;
}

template <class Arch>
inline xsimd::batch<float, Arch> fma(const xsimd::batch<float, Arch>& a, const xsimd::batch<float, Arch>& b,
                                     const xsimd::batch<float, Arch>& c, const xsimd::generic&) noexcept {
    return xsimd::fma(a, b, c);
}

/// Through memory.
template <int Groups, class Arch>
inline xsimd::batch<float, Arch> spread_groups(const float* values, const xsimd::generic&) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    alignas(64) float lanes[fbatch::size];
    for (std::size_t i = 0; i < fbatch::size; ++i) lanes[i] = values[i * Groups / fbatch::size];
    return fbatch::load_aligned(lanes);
}

/// Through memory.
template <class Arch>
inline xsimd::batch<float, Arch> permute_lanes(const xsimd::batch<float, Arch>& values,
                                               const xsimd::batch<std::uint32_t, Arch>& index,
                                               const xsimd::generic&) noexcept {
    constexpr std::size_t size = xsimd::batch<float, Arch>::size;
    alignas(64) float in[size], out[size];
    alignas(64) std::uint32_t lanes[size];
    values.store_aligned(in);
    index.store_aligned(lanes);
    for (std::size_t i = 0; i < size; ++i) out[i] = in[lanes[i]];
    return xsimd::batch<float, Arch>::load_aligned(out);
}

/// Through memory.
template <int Groups, class Arch>
inline xsimd::batch<std::uint32_t, Arch> spread_byte_groups(const std::uint8_t* bytes, const xsimd::generic&) noexcept {
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    alignas(64) std::uint32_t lanes[ubatch::size];
    for (std::size_t i = 0; i < ubatch::size; ++i) lanes[i] = bytes[i * Groups / ubatch::size];
    return ubatch::load_aligned(lanes);
}

template <class Arch>
inline xsimd::batch<float, Arch> max(const xsimd::batch<float, Arch>& first, const xsimd::batch<float, Arch>& second,
                                     const xsimd::generic&) noexcept {
    return xsimd::max(first, second);
}

template <class Arch>
inline xsimd::batch<float, Arch> min(const xsimd::batch<float, Arch>& first, const xsimd::batch<float, Arch>& second,
                                     const xsimd::generic&) noexcept {
    return xsimd::min(first, second);
}

template <class Arch>
inline xsimd::batch<std::int32_t, Arch> nearbyint_to_int(const xsimd::batch<float, Arch>& values,
                                                         const xsimd::generic&) noexcept {
    return xsimd::batch_cast<std::int32_t>(xsimd::nearbyint(values));
}

template <class Arch>
inline xsimd::batch<float, Arch> round_residual(const xsimd::batch<float, Arch>& values,
                                                const xsimd::generic&) noexcept {
    return values - xsimd::nearbyint(values);
}

template <class Arch>
inline xsimd::batch<float, Arch> max_magnitude(const xsimd::batch<float, Arch>& first,
                                               const xsimd::batch<float, Arch>& second,
                                               const xsimd::generic&) noexcept {
    return xsimd::max(xsimd::abs(first), xsimd::abs(second));
}

/// No streaming store: an aligned store.
template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::generic&) noexcept {
    values.store_aligned(aligned_address);
}

/// Each lane (in [0, 255] for std::uint8_t, [-128, 127] for std::int8_t) as one byte, through memory.
template <class Arch, class Byte>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, Byte* bytes, const xsimd::generic&) noexcept {
    static_assert(std::is_same_v<Byte, std::uint8_t> || std::is_same_v<Byte, std::int8_t>,
                  "store_bytes: bytes are std::uint8_t or std::int8_t");
    constexpr std::size_t lanes = xsimd::batch<std::int32_t, Arch>::size;
    alignas(64) std::int32_t words[lanes];
    values.store_aligned(words);
    for (std::size_t i = 0; i < lanes; ++i) bytes[i] = static_cast<Byte>(words[i]);
}

/// Lane r: reduce(rows[r]) for the W rows, one row at a time through memory.
template <class Arch, class Reduce>
inline xsimd::batch<float, Arch> reduce_each_row(const xsimd::batch<float, Arch>* rows, Reduce reduce) noexcept {
    constexpr std::size_t lanes = xsimd::batch<float, Arch>::size;
    alignas(64) float each[lanes];
    for (std::size_t r = 0; r < lanes; ++r) each[r] = reduce(rows[r]);
    return xsimd::batch<float, Arch>::load_aligned(each);
}

/// Lane r: the sum / smallest / largest lane of rows[r].
template <class Arch>
inline xsimd::batch<float, Arch> reduce_add_each(const xsimd::batch<float, Arch>* rows,
                                                 const xsimd::generic&) noexcept {
    return reduce_each_row(rows, [](const xsimd::batch<float, Arch>& row) { return reduce_add(row, Arch{}); });
}

template <class Arch>
inline xsimd::batch<float, Arch> reduce_min_each(const xsimd::batch<float, Arch>* rows,
                                                 const xsimd::generic&) noexcept {
    return reduce_each_row(rows, [](const xsimd::batch<float, Arch>& row) { return reduce_min(row, Arch{}); });
}

template <class Arch>
inline xsimd::batch<float, Arch> reduce_max_each(const xsimd::batch<float, Arch>* rows,
                                                 const xsimd::generic&) noexcept {
    return reduce_each_row(rows, [](const xsimd::batch<float, Arch>& row) { return reduce_max(row, Arch{}); });
}

/// Lanes 2i and 2i + 1 (each in [0, 15]) as the low and high nibble of byte i, through memory.
template <class Arch>
inline void store_nibbles(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes,
                          const xsimd::generic&) noexcept {
    constexpr std::size_t lanes = xsimd::batch<std::int32_t, Arch>::size;
    alignas(64) std::int32_t codes[lanes];
    values.store_aligned(codes);
    for (std::size_t i = 0; i < lanes / 2; ++i)
        bytes[i] = static_cast<std::uint8_t>(codes[2 * i] | codes[2 * i + 1] << 4);
}

/// Transposes a square of words in place (rows[r] lane c <-> rows[c] lane r), through memory.
template <class Arch>
inline void transpose_words(std::array<xsimd::batch<std::uint32_t, Arch>, xsimd::batch<std::uint32_t, Arch>::size>& rows,
                            const xsimd::generic&) noexcept {
    constexpr std::size_t lanes = xsimd::batch<std::uint32_t, Arch>::size;
    alignas(64) std::uint32_t square[lanes * lanes];
    for (std::size_t r = 0; r < lanes; ++r) rows[r].store_aligned(square + r * lanes);
    alignas(64) std::uint32_t column[lanes];
    for (std::size_t c = 0; c < lanes; ++c) {
        for (std::size_t r = 0; r < lanes; ++r) column[r] = square[r * lanes + c];
        rows[c] = xsimd::batch<std::uint32_t, Arch>::load_aligned(column);
    }
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
