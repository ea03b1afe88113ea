// The namespace every lowbit symbol lives in, and the build settings that name it.
//
// Everything lowbit defines is inside `lowbit::<abi>`, an inline namespace (so users write
// `lowbit::quantize`) whose name carries the library version, the instruction set the including
// translation unit was compiled for and whether threads are compiled in, e.g. `lowbit::v0_1_avx512bw`.
// Header-only code is emitted as weak symbols in every translation unit that uses it, and the linker
// keeps one copy: without the tag, a unit built for plain x86-64 linked with one built with -mavx2 could
// call the AVX2 copy of a function and die with SIGILL on a CPU without AVX2. With the tag, the two
// units share no lowbit function (tests/abi checks this with nm).
//
// State that must be one per process whatever the units were built for (the thread count set by
// set_num_threads) is data, not code, and lives in `lowbit::process_state`, outside the tag. Each
// instruction set's code keeps its own worker pool (detail/threading/thread_pool.hpp).
//
// Use LOWBIT_BEGIN_NAMESPACE / LOWBIT_END_NAMESPACE around every lowbit declaration; never open
// `namespace lowbit {` directly, or the declaration falls outside the tag.
#pragma once

#include "../version.hpp"

#if defined(LOWBIT_FORCE_SCALAR)
#define LOWBIT_ARCH_TAG scalar
#elif defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define LOWBIT_ARCH_TAG avx512vnni
#elif defined(__AVX512BW__)
#define LOWBIT_ARCH_TAG avx512bw
#elif defined(__AVX512F__)
#define LOWBIT_ARCH_TAG avx512f
#elif defined(__AVX2__) && defined(__FMA__)
#define LOWBIT_ARCH_TAG avx2_fma
#elif defined(__AVX2__)
#define LOWBIT_ARCH_TAG avx2
#elif defined(__AVX__)
#define LOWBIT_ARCH_TAG avx
#elif defined(__SSE4_1__)
#define LOWBIT_ARCH_TAG sse4_1
#elif defined(__ARM_NEON)
#define LOWBIT_ARCH_TAG neon
#else
#define LOWBIT_ARCH_TAG baseline
#endif

#if defined(LOWBIT_NO_THREADS)
#define LOWBIT_THREADS_TAG _nothreads
#else
#define LOWBIT_THREADS_TAG
#endif

#define LOWBIT_DETAIL_ABI_PASTE(major, minor, arch, threads) v##major##_##minor##_##arch##threads
#define LOWBIT_DETAIL_ABI_NAME(major, minor, arch, threads) LOWBIT_DETAIL_ABI_PASTE(major, minor, arch, threads)
/// The inline namespace of this translation unit, e.g. v0_1_avx2_fma.
#define LOWBIT_ABI_NAMESPACE \
    LOWBIT_DETAIL_ABI_NAME(LOWBIT_VERSION_MAJOR, LOWBIT_VERSION_MINOR, LOWBIT_ARCH_TAG, LOWBIT_THREADS_TAG)

#define LOWBIT_BEGIN_NAMESPACE \
    namespace lowbit {         \
    inline namespace LOWBIT_ABI_NAMESPACE {
#define LOWBIT_END_NAMESPACE \
    }                        \
    }
