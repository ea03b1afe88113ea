// Compile-time unrolling for kernels: static_for, LOWBIT_ALWAYS_INLINE and LOWBIT_NOINLINE.
#pragma once

#include "config.hpp"

#include <type_traits>
#include <utility>

/// Forces a call to be inlined: Clang 14's inliner otherwise gives up on the unrolled qgemv pass and
/// calls the code-step lambdas through the stack (much slower: benchmarks/README.md).
#if defined(__GNUC__) || defined(__clang__)
#define LOWBIT_ALWAYS_INLINE __attribute__((always_inline))
#else
#define LOWBIT_ALWAYS_INLINE
#endif

/// Keeps a microkernel out of its caller, so that the caller's live values do not crowd the kernel's
/// loop out of general registers (GCC 12 otherwise parks x row offsets in vector registers and moves
/// them back inside qgemm's k loop, on the ports the fmas need).
#if defined(__GNUC__) || defined(__clang__)
#define LOWBIT_NOINLINE __attribute__((noinline))
#else
#define LOWBIT_NOINLINE
#endif

LOWBIT_BEGIN_NAMESPACE
namespace detail {

template <class Body, int... I>
LOWBIT_ALWAYS_INLINE inline void static_for_each(Body& body, std::integer_sequence<int, I...>) {
    (body(std::integral_constant<int, I>{}), ...);
}

/// Calls body(std::integral_constant<int, I>{}) for I = 0 .. Count-1 (compile-time unrolled loop).
/// Every loop over an array a kernel keeps in vector registers (accumulators, code vectors) goes through
/// it: one runtime index into such an array can keep the whole array in memory at -O2, with a store
/// after every update (GCC 12 and Clang 14 both did so in the exact GEMM's microkernel, 2.2 to 2.5
/// times slower, until 2026-12-02: benchmarks/README.md). -O3 unrolled those loops; -O2 need not.
template <int Count, class Body>
LOWBIT_ALWAYS_INLINE inline void static_for(Body&& body) {
    static_for_each(body, std::make_integer_sequence<int, Count>{});
}

}  // namespace detail
LOWBIT_END_NAMESPACE
