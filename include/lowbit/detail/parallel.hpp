// The one place that splits work across threads.
//
// parallel_for(count, grain, body) calls body(begin, end) on disjoint ranges covering [0, count).
// Ranges are contiguous and at least `grain` long (except the last), so a caller picks the grain that
// makes one range worth a thread (for a GEMV, enough output rows to stream a few hundred KiB of
// weights). Work that fits in one grain runs on the calling thread; larger work runs on the calling
// thread and the workers of ThreadPool (thread_pool.hpp), started once and kept. A call made while the
// pool is busy (from another thread, or from inside a body) runs its ranges on the calling thread, in
// order. The split depends only on count, grain and num_threads(), never on timing. Exceptions thrown
// by `body` are rethrown on the caller (the first one).
#pragma once

#include <algorithm>
#include <cstddef>

#include "../parallel.hpp"
#if !defined(LOWBIT_NO_THREADS)
#include "thread_pool.hpp"
#endif

namespace lowbit::detail {

template <class Body>
void parallel_for(std::size_t count, std::size_t grain, Body&& body) {
    if (count == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t max_ranges = (count + grain - 1) / grain;
    const std::size_t ranges = std::min<std::size_t>(static_cast<std::size_t>(num_threads()), max_ranges);
    if (ranges <= 1) {
        body(std::size_t{0}, count);
        return;
    }
#if defined(LOWBIT_NO_THREADS)
    body(std::size_t{0}, count);
#else
    // Split [0, count) into `ranges` nearly equal contiguous pieces.
    const std::size_t base = count / ranges;
    const std::size_t extra = count % ranges;
    auto range_begin = [&](std::size_t r) { return r * base + std::min(r, extra); };

    auto run_range = [&](std::size_t r) { body(range_begin(r), range_begin(r + 1)); };
    if (!ThreadPool::instance().try_run(ranges, run_range)) {
        for (std::size_t r = 0; r < ranges; ++r) run_range(r);
    }
#endif
}

}  // namespace lowbit::detail
