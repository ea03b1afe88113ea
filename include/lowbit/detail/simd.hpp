// The one place lowbit talks to xsimd directly: version differences and the choice of architecture.
//
// Kernels are templates on an xsimd architecture `Arch` (as xsimd's own dispatch does) and are
// instantiated with `simd::arch`, the best instruction set the *including* translation unit was
// compiled for. lowbit adds no -m/-march flag: a consumer built for plain x86-64 gets SSE2 kernels,
// one built with -march=native gets AVX2 or AVX-512 ones. `simd::enabled` is false when the target
// has no SIMD unit xsimd knows, or when LOWBIT_FORCE_SCALAR is defined; public entry points then run
// the scalar reference of each kernel instead.
//
// Supported xsimd: 8.1 (Debian 12) to 13.x (Debian 13).
#pragma once

#include "config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>


#if !defined(XSIMD_VERSION_MAJOR) || (XSIMD_VERSION_MAJOR < 8) || \
    (XSIMD_VERSION_MAJOR == 8 && XSIMD_VERSION_MINOR < 1)
#error "lowbit needs xsimd 8.1 or newer"
#endif

// Instruction-set code, one file per instruction set (each compiles to nothing on other targets):
// a new instruction set is a new file here and one include line.
#include "arch/generic.hpp"
#include "arch/x86_sse2.hpp"
#include "arch/x86_avx.hpp"
#include "arch/x86_avx2.hpp"
#include "arch/x86_avx512.hpp"
#include "arch/arm_neon64.hpp"

// Every symbol of this file, like the rest of lowbit, is in the version-and-instruction-set-tagged
// namespace of config.hpp, so code built for different targets links safely.

LOWBIT_BEGIN_NAMESPACE
namespace detail::simd {

/// The architecture kernels are instantiated with in this translation unit.
using arch = xsimd::default_arch;

#if defined(LOWBIT_FORCE_SCALAR)
inline constexpr bool enabled = false;
#else
/// True when `arch` is a real SIMD instruction set that was enabled at compile time.
inline constexpr bool enabled = arch::supported() && arch::available();
#endif

template <class T, class Arch = arch>
using batch = xsimd::batch<T, Arch>;

/// Number of T lanes in one register of `Arch`.
template <class T, class Arch = arch>
inline constexpr std::size_t width = xsimd::batch<T, Arch>::size;

/// Sum of all lanes.
template <class T, class Arch>
inline T reduce_add(const xsimd::batch<T, Arch>& values) noexcept {
    return arch_ops::reduce_add(values, Arch{});
}

/// Largest lane (NaN lanes give an unspecified lane, and which of +0 / -0 when both are there; callers
/// filter NaN first).
template <class T, class Arch>
inline T reduce_max(const xsimd::batch<T, Arch>& values) noexcept {
    return arch_ops::reduce_max(values, Arch{});
}

/// Smallest lane (same caveats as reduce_max).
template <class T, class Arch>
inline T reduce_min(const xsimd::batch<T, Arch>& values) noexcept {
    return arch_ops::reduce_min(values, Arch{});
}

/// Lane r of the result: reduce_min of rows[r], for the `width<float, Arch>` rows from `rows` (same caveats;
/// on AVX-512 a tree of lane permutes over all rows instead of one reduction per row).
template <class Arch>
inline xsimd::batch<float, Arch> reduce_min_each(const xsimd::batch<float, Arch>* rows) noexcept {
    return arch_ops::reduce_min_each(rows, Arch{});
}

/// Lane r of the result: reduce_add of rows[r], bit for bit (the same folds by halves; as
/// reduce_min_each).
template <class Arch>
inline xsimd::batch<float, Arch> reduce_add_each(const xsimd::batch<float, Arch>* rows) noexcept {
    return arch_ops::reduce_add_each(rows, Arch{});
}

/// Lane r of the result: reduce_max of rows[r] (as reduce_min_each).
template <class Arch>
inline xsimd::batch<float, Arch> reduce_max_each(const xsimd::batch<float, Arch>* rows) noexcept {
    return arch_ops::reduce_max_each(rows, Arch{});
}

/// Reinterprets the bits of a batch as another element type of the same width
/// (xsimd 8 takes the target batch type, xsimd 9+ the target element type).
template <class To, class From, class Arch>
inline xsimd::batch<To, Arch> bit_cast(const xsimd::batch<From, Arch>& values) noexcept {
#if XSIMD_VERSION_MAJOR >= 9
    return xsimd::bitwise_cast<To>(values);
#else
    return xsimd::bitwise_cast<xsimd::batch<To, Arch>>(values);
#endif
}

/// numerator / denominator, lane by lane, correctly rounded (IEEE division) on every instruction set:
/// kernels divide float batches through this, never through operator/ (which xsimd implements by a
/// refined reciprocal estimate on NEON; arch/arm_neon64.hpp).
template <class Arch>
inline xsimd::batch<float, Arch> div(const xsimd::batch<float, Arch>& numerator,
                                     const xsimd::batch<float, Arch>& denominator) noexcept {
    return arch_ops::div(numerator, denominator, Arch{});
}

/// values >> Bits (logical), lane by lane: through this rather than operator>> in kernels, because
/// xsimd 13's AVX-512 shift trips GCC 12's -Wuninitialized once inlined (arch/x86_avx512.hpp).
template <int Bits, class Arch>
inline xsimd::batch<std::uint32_t, Arch> shift_right(const xsimd::batch<std::uint32_t, Arch>& values) noexcept {
    return arch_ops::shift_right<Bits>(values, Arch{});
}

/// values >> Bits (arithmetic: the sign bit shifted in), lane by lane, for the same reason.
template <int Bits, class Arch>
inline xsimd::batch<std::int32_t, Arch> shift_right(const xsimd::batch<std::int32_t, Arch>& values) noexcept {
    return arch_ops::shift_right<Bits>(values, Arch{});
}

/// values << Bits, lane by lane, for the same reason.
template <int Bits, class Arch>
inline xsimd::batch<std::uint32_t, Arch> shift_left(const xsimd::batch<std::uint32_t, Arch>& values) noexcept {
    return arch_ops::shift_left<Bits>(values, Arch{});
}

/// Rounds toward zero / to nearest even (std::nearbyint in the default FP mode), lane by lane.
template <class Arch>
inline xsimd::batch<float, Arch> trunc(const xsimd::batch<float, Arch>& values) noexcept {
    return arch_ops::trunc(values, Arch{});
}
template <class Arch>
inline xsimd::batch<float, Arch> nearbyint(const xsimd::batch<float, Arch>& values) noexcept {
    return arch_ops::nearbyint(values, Arch{});
}

/// nearbyint(values) as int32 lanes (ties to even whatever the FP environment's mode; one instruction on
/// AVX-512). Lanes outside the int32 range give unspecified values.
template <class Arch>
inline xsimd::batch<std::int32_t, Arch> nearbyint_to_int(const xsimd::batch<float, Arch>& values) noexcept {
    return arch_ops::nearbyint_to_int(values, Arch{});
}

/// values - nearbyint(values), lane by lane: the signed distance to the nearest integer (ties to even),
/// exact, in [-0.5, 0.5] (one instruction on AVX-512DQ). Lanes must be finite.
template <class Arch>
inline xsimd::batch<float, Arch> round_residual(const xsimd::batch<float, Arch>& values) noexcept {
    return arch_ops::round_residual(values, Arch{});
}

/// max(|first|, |second|), lane by lane (one instruction on AVX-512DQ). Lanes must not be NaN.
template <class Arch>
inline xsimd::batch<float, Arch> max_magnitude(const xsimd::batch<float, Arch>& first,
                                               const xsimd::batch<float, Arch>& second) noexcept {
    return arch_ops::max_magnitude(first, second, Arch{});
}

/// Whether the instruction set this translation unit targets has a fused multiply-add (x86 FMA3 or
/// AVX-512, AArch64). Without one (plain x86-64: SSE2), simd::fma is a multiply and an add.
#if defined(__FMA__) || defined(__AVX512F__) || defined(__ARM_FEATURE_FMA)
inline constexpr bool fused_multiply_add = true;
#else
inline constexpr bool fused_multiply_add = false;
#endif

/// a * b + c, rounded once where fused_multiply_add (else twice); always the fused instruction where
/// the target has one, whatever the compiler and xsimd version would do.
template <class Arch>
inline xsimd::batch<float, Arch> fma(const xsimd::batch<float, Arch>& a, const xsimd::batch<float, Arch>& b,
                                     const xsimd::batch<float, Arch>& c) noexcept {
    return arch_ops::fma(a, b, c, Arch{});
}

/// A batch whose lanes hold values[0 .. Groups) in order, each over size / Groups consecutive lanes
/// (the scales of the Groups groups one qgemv chunk spans); Groups divides the batch size. Reads
/// exactly Groups floats.
template <int Groups, class Arch>
inline xsimd::batch<float, Arch> spread_groups(const float* values) noexcept {
    static_assert(Groups >= 1 && xsimd::batch<float, Arch>::size % Groups == 0,
                  "spread_groups: Groups must divide the lane count");
    return arch_ops::spread_groups<Groups, Arch>(values, Arch{});
}

/// Lane i of the result is lane index[i] of values (every index below the batch size).
template <class Arch>
inline xsimd::batch<float, Arch> permute_lanes(const xsimd::batch<float, Arch>& values,
                                               const xsimd::batch<std::uint32_t, Arch>& index) noexcept {
    return arch_ops::permute_lanes(values, index, Arch{});
}

/// spread_groups for byte scales: lane i holds bytes[i * Groups / size], zero-extended (Groups divides
/// the batch size). Reads exactly Groups bytes.
template <int Groups, class Arch>
inline xsimd::batch<std::uint32_t, Arch> spread_byte_groups(const std::uint8_t* bytes) noexcept {
    static_assert(Groups >= 1 && xsimd::batch<std::uint32_t, Arch>::size % Groups == 0,
                  "spread_byte_groups: Groups must divide the lane count");
    return arch_ops::spread_byte_groups<Groups, Arch>(bytes, Arch{});
}

/// Lane-wise max / min with x86 semantics kept explicit: the result is `second` wherever the lanes
/// compare equal or either is NaN (maxps/minps; lowbit's clamps rely on it).
template <class Arch>
inline xsimd::batch<float, Arch> max(const xsimd::batch<float, Arch>& first,
                                     const xsimd::batch<float, Arch>& second) noexcept {
    return arch_ops::max(first, second, Arch{});
}
template <class Arch>
inline xsimd::batch<float, Arch> min(const xsimd::batch<float, Arch>& first,
                                     const xsimd::batch<float, Arch>& second) noexcept {
    return arch_ops::min(first, second, Arch{});
}

/// Transposes a square of words in place: afterwards rows[c] lane r holds what rows[r] lane c held
/// (qgemm's panel packing turns rows of q's codes into columns with it).
template <class Arch>
inline void transpose_words(std::array<xsimd::batch<std::uint32_t, Arch>, xsimd::batch<std::uint32_t, Arch>::size>& rows) noexcept {
    arch_ops::transpose_words<Arch>(rows, Arch{});
}

/// Stores a batch to `aligned_address` (Arch::alignment()-aligned) with a non-temporal (streaming)
/// store where the instruction set has one (x86: movntps), else an aligned store. Call stream_fence()
/// after the last streaming store of a pass, before other threads read the data.
template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values) noexcept {
    arch_ops::store_stream(aligned_address, values, Arch{});
}

/// Stores each lane, which must lie in [0, 255], as one byte: bytes[i] = values[i] (a narrowing store;
/// lanes outside the range give unspecified bytes).
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes) noexcept {
    arch_ops::store_bytes(values, bytes, Arch{});
}

/// The signed form: each lane, which must lie in [-128, 127], as one int8.
template <class Arch>
inline void store_bytes(const xsimd::batch<std::int32_t, Arch>& values, std::int8_t* bytes) noexcept {
    arch_ops::store_bytes(values, bytes, Arch{});
}

/// Stores the lanes, each in [0, 15], two to a byte: byte i = lane 2i | lane 2i+1 << 4 (the MLX 4-bit
/// stream order on a little-endian host); width / 2 bytes. Lanes outside the range give unspecified bytes.
template <class Arch>
inline void store_nibbles(const xsimd::batch<std::int32_t, Arch>& values, std::uint8_t* bytes) noexcept {
    arch_ops::store_nibbles(values, bytes, Arch{});
}

/// Orders earlier streaming stores before later stores (sfence on x86; nothing elsewhere).
inline void stream_fence() noexcept {
#if defined(__SSE2__) || defined(_M_X64)
    _mm_sfence();
#endif
}

}  // namespace detail::simd
LOWBIT_END_NAMESPACE
