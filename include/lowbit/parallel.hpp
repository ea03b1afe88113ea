// Thread count for lowbit's kernels.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

namespace lowbit {

namespace detail {
/// 0 means "not set": use every hardware thread.
inline std::atomic<int> requested_threads{0};
}  // namespace detail

/// Largest number of threads one lowbit call may use. Defaults to std::thread::hardware_concurrency().
/// With LOWBIT_NO_THREADS defined, lowbit never starts a thread and this always returns 1.
inline int num_threads() noexcept {
#if defined(LOWBIT_NO_THREADS)
    return 1;
#else
    const int requested = detail::requested_threads.load(std::memory_order_relaxed);
    if (requested > 0) return requested;
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware == 0 ? 1 : static_cast<int>(hardware);
#endif
}

/// Sets the thread count used by every later lowbit call in the program (0 restores the default).
/// Throws std::invalid_argument for a negative count.
inline void set_num_threads(int threads) {
    if (threads < 0) {
        throw std::invalid_argument("lowbit::set_num_threads: thread count must be >= 0, got " +
                                    std::to_string(threads));
    }
    detail::requested_threads.store(threads, std::memory_order_relaxed);
}

}  // namespace lowbit
