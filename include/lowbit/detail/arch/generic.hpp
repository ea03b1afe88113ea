// simd:: operations for any xsimd architecture: plain xsimd calls (with the xsimd 8 / 9+ spelling
// differences). The x86_*.hpp files beside this one overload them for the instruction sets where
// lowbit needs a specific instruction; overload resolution on the architecture tag (xsimd's
// architectures derive from `generic`, AVX-512 ones from avx512f) picks the most specific one.
#pragma once

#include "../config.hpp"

#include <cstddef>

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

template <class Arch>
inline xsimd::batch<float, Arch> trunc(const xsimd::batch<float, Arch>& values, const xsimd::generic&) noexcept {
    return xsimd::trunc(values);
}

template <class Arch>
inline xsimd::batch<float, Arch> nearbyint(const xsimd::batch<float, Arch>& values, const xsimd::generic&) noexcept {
    return xsimd::nearbyint(values);
}

template <class Arch>
inline xsimd::batch<float, Arch> fma(const xsimd::batch<float, Arch>& a, const xsimd::batch<float, Arch>& b,
                                     const xsimd::batch<float, Arch>& c, const xsimd::generic&) noexcept {
    return xsimd::fma(a, b, c);
}

/// Two broadcasts and a select, through memory.
template <class Arch>
inline xsimd::batch<float, Arch> broadcast_halves(const float* pair, const xsimd::generic&) noexcept {
    using fbatch = xsimd::batch<float, Arch>;
    alignas(64) float lanes[fbatch::size];
    for (std::size_t i = 0; i < fbatch::size; ++i) lanes[i] = pair[i < fbatch::size / 2 ? 0 : 1];
    return fbatch::load_aligned(lanes);
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

/// No streaming store: an aligned store.
template <class Arch>
inline void store_stream(float* aligned_address, const xsimd::batch<float, Arch>& values, const xsimd::generic&) noexcept {
    values.store_aligned(aligned_address);
}

}  // namespace detail::simd::arch_ops
LOWBIT_END_NAMESPACE
