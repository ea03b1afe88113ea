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

#include <cstddef>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

#if !defined(XSIMD_VERSION_MAJOR) || (XSIMD_VERSION_MAJOR < 8) || \
    (XSIMD_VERSION_MAJOR == 8 && XSIMD_VERSION_MINOR < 1)
#error "lowbit needs xsimd 8.1 or newer"
#endif

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

/// Sum of all lanes (xsimd 8 spells it `hadd`, xsimd 9+ `reduce_add`).
/// On AVX-512 floats lowbit sums the halves itself: xsimd 13's reduce_add goes through
/// _mm512_extractf32x4_ps, whose `_mm_undefined_ps` source trips GCC 12's -Wuninitialized once inlined
/// into a kernel (GCC bug 105593, as for trunc below; _mm512_castps512_ps256 does the same); the masked
/// extracts take an explicit source.
template <class T, class Arch>
inline T reduce_add(const xsimd::batch<T, Arch>& values) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float> && std::is_base_of_v<xsimd::avx512f, Arch>) {
        const __m512d all = _mm512_castps_pd(values);
        const __m256d zero = _mm256_setzero_pd();
        const __m256 low = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(zero, static_cast<__mmask8>(0xF), all, 0));
        const __m256 high = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(zero, static_cast<__mmask8>(0xF), all, 1));
        const __m256 eight = _mm256_add_ps(low, high);
        __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
        four = _mm_add_ps(four, _mm_movehl_ps(four, four));
        return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
    } else
#endif
    {
#if XSIMD_VERSION_MAJOR >= 9
        return xsimd::reduce_add(values);
#else
        return xsimd::hadd(values);
#endif
    }
}

/// Largest lane (NaN lanes give an unspecified lane; callers filter NaN first).
template <class T, class Arch>
inline T reduce_max(const xsimd::batch<T, Arch>& values) noexcept {
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

/// Smallest lane (NaN lanes give an unspecified lane; callers filter NaN first).
template <class T, class Arch>
inline T reduce_min(const xsimd::batch<T, Arch>& values) noexcept {
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

/// xsimd::trunc and xsimd::nearbyint, except on AVX-512, where GCC 12 warns -Wuninitialized inside its
/// own _mm512_roundscale_ps (the `_mm512_undefined_ps` self-initialisation, GCC bug 105593, fixed in 13)
/// once xsimd's call is inlined into user code; the masked form with an explicit source is the same
/// instruction without the warning.
template <class Arch>
inline xsimd::batch<float, Arch> trunc(const xsimd::batch<float, Arch>& values) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        return _mm512_mask_roundscale_ps(values, static_cast<__mmask16>(0xFFFF), values,
                                         _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    } else
#endif
    {
        return xsimd::trunc(values);
    }
}

template <class Arch>
inline xsimd::batch<float, Arch> nearbyint(const xsimd::batch<float, Arch>& values) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        return _mm512_mask_roundscale_ps(values, static_cast<__mmask16>(0xFFFF), values,
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else
#endif
    {
        return xsimd::nearbyint(values);
    }
}

/// Whether the instruction set this translation unit targets has a fused multiply-add (x86 FMA3 or
/// AVX-512, AArch64). Without one (plain x86-64: SSE2), simd::fma is a multiply and an add.
#if defined(__FMA__) || defined(__AVX512F__) || defined(__ARM_FEATURE_FMA)
inline constexpr bool fused_multiply_add = true;
#else
inline constexpr bool fused_multiply_add = false;
#endif

/// a * b + c, rounded once where fused_multiply_add (else twice). xsimd 8.1 has no AVX-512 fma and falls
/// back to a separate multiply and add, which GCC happens to fuse but Clang does not (much slower, see
/// benchmarks/README.md, and a second rounding); the intrinsic makes every compiler and xsimd version
/// emit vfmadd.
template <class Arch>
inline xsimd::batch<float, Arch> fma(const xsimd::batch<float, Arch>& a, const xsimd::batch<float, Arch>& b,
                                     const xsimd::batch<float, Arch>& c) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        return _mm512_fmadd_ps(a, b, c);
    } else
#endif
    {
        return xsimd::fma(a, b, c);
    }
}

/// A batch whose first half of lanes holds pair[0] and second half pair[1] (the scales of the two groups
/// one qgemv chunk spans). AVX-512 and AVX2: one 64-bit broadcast and one lane permute; elsewhere two
/// broadcasts and a select.
template <class Arch>
inline xsimd::batch<float, Arch> broadcast_halves(const float* pair) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    double both;
    std::memcpy(&both, pair, sizeof both);
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        // The masked form, for the same GCC 12 warning as trunc above.
        const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        const __m512 pairs = _mm512_castpd_ps(_mm512_set1_pd(both));
        return _mm512_mask_permutexvar_ps(pairs, static_cast<__mmask16>(0xFFFF), halves, pairs);
    } else
#endif
#if defined(__AVX2__)
    if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
        const __m256i halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        return _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_set1_pd(both)), halves);
    } else
#endif
    {
        alignas(64) float lanes[fbatch::size];
        for (std::size_t i = 0; i < fbatch::size; ++i) lanes[i] = pair[i < fbatch::size / 2 ? 0 : 1];
        return fbatch::load_aligned(lanes);
    }
}

/// xsimd::max / xsimd::min with x86 semantics kept explicit: the result is `second` wherever the lanes
/// compare equal or either is NaN (maxps/minps; lowbit's clamps rely on it). On AVX-512 the masked form
/// avoids the same GCC 12 warning as trunc above.
template <class Arch>
inline xsimd::batch<float, Arch> max(const xsimd::batch<float, Arch>& first,
                                     const xsimd::batch<float, Arch>& second) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        return _mm512_mask_max_ps(first, static_cast<__mmask16>(0xFFFF), first, second);
    } else
#endif
    {
        return xsimd::max(first, second);
    }
}

template <class Arch>
inline xsimd::batch<float, Arch> min(const xsimd::batch<float, Arch>& first,
                                     const xsimd::batch<float, Arch>& second) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        return _mm512_mask_min_ps(first, static_cast<__mmask16>(0xFFFF), first, second);
    } else
#endif
    {
        return xsimd::min(first, second);
    }
}

/// Stores a batch to `aligned_address` (Arch::alignment()-aligned) with a non-temporal (streaming)
/// store where the instruction set has one (x86 SSE2 / AVX / AVX-512: movntps), else an aligned store.
/// Neither xsimd 8.1 nor 13 exposes streaming stores, hence the intrinsics here. Call stream_fence()
/// after the last streaming store of a pass, before other threads read the data.
template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values) noexcept {
#if defined(__AVX512F__)
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
        _mm512_stream_ps(aligned_address, values);
        return;
    } else
#endif
#if defined(__AVX__)
    if constexpr (std::is_base_of_v<xsimd::avx, Arch>) {
        _mm256_stream_ps(aligned_address, values);
        return;
    } else
#endif
#if defined(__SSE2__) || defined(_M_X64)
    if constexpr (std::is_base_of_v<xsimd::sse2, Arch>) {
        _mm_stream_ps(aligned_address, values);
        return;
    } else
#endif
    {
        values.store_aligned(aligned_address);
    }
}

/// Orders earlier streaming stores before later stores (sfence on x86; nothing elsewhere).
inline void stream_fence() noexcept {
#if defined(__SSE2__) || defined(_M_X64)
    _mm_sfence();
#endif
}

}  // namespace detail::simd
LOWBIT_END_NAMESPACE
