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

#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#if !defined(XSIMD_VERSION_MAJOR) || (XSIMD_VERSION_MAJOR < 8) || \
    (XSIMD_VERSION_MAJOR == 8 && XSIMD_VERSION_MINOR < 1)
#error "lowbit needs xsimd 8.1 or newer"
#endif

// Code compiled for different instruction sets can meet in one program (a library built with AVX2
// linked into an SSE2 application). The inline namespace below gives each instruction set its own
// symbols, so the linker never merges an AVX2 kernel into an SSE2 caller.
#if defined(LOWBIT_FORCE_SCALAR)
#define LOWBIT_ARCH_NAMESPACE arch_scalar
#elif defined(__AVX512BW__)
#define LOWBIT_ARCH_NAMESPACE arch_avx512bw
#elif defined(__AVX512F__)
#define LOWBIT_ARCH_NAMESPACE arch_avx512f
#elif defined(__AVX2__) && defined(__FMA__)
#define LOWBIT_ARCH_NAMESPACE arch_avx2_fma
#elif defined(__AVX2__)
#define LOWBIT_ARCH_NAMESPACE arch_avx2
#elif defined(__AVX__)
#define LOWBIT_ARCH_NAMESPACE arch_avx
#elif defined(__SSE4_1__)
#define LOWBIT_ARCH_NAMESPACE arch_sse4_1
#elif defined(__ARM_NEON)
#define LOWBIT_ARCH_NAMESPACE arch_neon
#else
#define LOWBIT_ARCH_NAMESPACE arch_baseline
#endif

namespace lowbit::detail::simd {

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
template <class T, class Arch>
inline T reduce_add(const xsimd::batch<T, Arch>& values) noexcept {
#if XSIMD_VERSION_MAJOR >= 9
    return xsimd::reduce_add(values);
#else
    return xsimd::hadd(values);
#endif
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

}  // namespace lowbit::detail::simd
