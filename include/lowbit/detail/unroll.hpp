// Compile-time unrolling for kernels: static_for and LOWBIT_ALWAYS_INLINE.
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

LOWBIT_BEGIN_NAMESPACE
namespace detail {

template <class Body, int... I>
LOWBIT_ALWAYS_INLINE inline void static_for_each(Body& body, std::integer_sequence<int, I...>) {
    (body(std::integral_constant<int, I>{}), ...);
}

/// Calls body(std::integral_constant<int, I>{}) for I = 0 .. Count-1 (compile-time unrolled loop).
template <int Count, class Body>
LOWBIT_ALWAYS_INLINE inline void static_for(Body&& body) {
    static_for_each(body, std::make_integer_sequence<int, Count>{});
}

}  // namespace detail
LOWBIT_END_NAMESPACE
