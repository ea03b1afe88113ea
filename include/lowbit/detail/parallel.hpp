// The one place that splits work across threads.
//
// parallel_for(count, grain, body) calls body(begin, end) on disjoint ranges covering [0, count).
// Ranges are contiguous and at least `grain` long (except the last), so a caller picks the grain that
// makes one range worth a thread (for a GEMV, enough output rows to stream a few hundred KiB of
// weights). Work that fits in one grain runs on the calling thread. Threads are started per call and
// joined before return: no pool, no state kept between calls. Exceptions thrown by `body` on a worker
// are rethrown on the caller (the first one).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "../parallel.hpp"

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

    std::exception_ptr first_error;
    std::mutex error_mutex;
    auto run = [&](std::size_t r) {
        try {
            body(range_begin(r), range_begin(r + 1));
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!first_error) first_error = std::current_exception();
        }
    };
    std::vector<std::thread> workers;
    workers.reserve(ranges - 1);
    for (std::size_t r = 1; r < ranges; ++r) workers.emplace_back(run, r);
    run(0);
    for (auto& worker : workers) worker.join();
    if (first_error) std::rethrow_exception(first_error);
#endif
}

}  // namespace lowbit::detail
