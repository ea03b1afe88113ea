// Thread count for lowbit's kernels.
#pragma once

#include "detail/config.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

namespace lowbit::process_state {
/// The count set_num_threads stored; 0 means "not set": use every hardware thread. Data shared by every
/// translation unit whatever its instruction set, so it sits outside the tagged namespace (config.hpp).
inline std::atomic<int> requested_threads{0};
}  // namespace lowbit::process_state

LOWBIT_BEGIN_NAMESPACE

/// Hardware threads of this machine (1 when the system cannot tell), read once per process: the query
/// costs about 7 us (glibc reads /sys/devices/system/cpu/online: three system calls), and every kernel
/// call asks through num_threads().
inline int hardware_threads() noexcept {
    static const int hardware = [] {
        const unsigned count = std::thread::hardware_concurrency();
        return count == 0 ? 1 : static_cast<int>(std::min(count, 1u << 16));
    }();
    return hardware;
}

/// The most threads lowbit ever runs one call on: 4 x hardware_threads(). The worker pool never grows
/// past it, whatever set_num_threads was given (more threads than this only oversubscribe the cores).
inline int max_threads() noexcept { return 4 * hardware_threads(); }

/// Largest number of threads one lowbit call may use: the set_num_threads count capped at
/// max_threads(), or hardware_threads() by default. With LOWBIT_NO_THREADS defined, lowbit never
/// starts a thread and this always returns 1.
inline int num_threads() noexcept {
#if defined(LOWBIT_NO_THREADS)
    return 1;
#else
    const int requested = process_state::requested_threads.load(std::memory_order_relaxed);
    if (requested > 0) return std::min(requested, max_threads());
    return hardware_threads();
#endif
}

/// Sets the thread count used by every later lowbit call in the program (0 restores the default);
/// counts above max_threads() are used as max_threads(). Throws std::invalid_argument for a negative
/// count.
inline void set_num_threads(int threads) {
    if (threads < 0) {
        throw std::invalid_argument("lowbit::set_num_threads: thread count must be >= 0, got " +
                                    std::to_string(threads));
    }
    process_state::requested_threads.store(threads, std::memory_order_relaxed);
}

LOWBIT_END_NAMESPACE
