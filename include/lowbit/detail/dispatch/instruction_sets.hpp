// dispatch/: the instruction sets every format's kernel dispatch is instantiated with, this build's
// widest (simd.hpp, arch/int8.hpp), or void where the kernels run as their scalar references.
#pragma once

#include "../config.hpp"

#include <type_traits>

#include "../arch/int8.hpp"
#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// The float instruction set (an xsimd architecture): simd::arch, or void when SIMD is off.
using dispatch_arch = std::conditional_t<simd::enabled, simd::arch, void>;

/// The integer instruction set of the int8-activation kernels (void when SIMD is off or the target has
/// neither AVX-512 VNNI+BW nor AVX2+FMA).
using dispatch_int8_ops = std::conditional_t<simd::enabled && simd::int8::available, simd::int8::best, void>;

}  // namespace detail
LOWBIT_END_NAMESPACE
