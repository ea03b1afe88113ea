// The one place that splits work across threads.
//
// parallel_for(count, grain, body) calls body(begin, end) on disjoint contiguous ranges covering
// [0, count). There are min(num_threads(), ceil(count / grain)) ranges of nearly equal length (they
// differ by at most one), so a range is never longer than needed and, when there is more than one, more
// than grain / 2 long: a caller picks the grain that makes about one range worth a thread (for a GEMV,
// enough output rows to stream a few hundred KiB of weights). A range's start is NOT a multiple of
// grain: a body that needs a slot per range uses parallel_reduce, which numbers the ranges. Work that
// fits in one grain runs on the calling thread; larger work runs on the calling thread and the workers
// of ThreadPool (thread_pool.hpp), started once and kept. A call made while the pool is busy (from
// another thread, or from inside a body) runs its ranges on the calling thread, in order. The split
// depends only on count, grain and num_threads(), never on timing, so results are the same from run to
// run. Exceptions thrown by `body` are rethrown on the caller (the first one).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "../../parallel.hpp"
#if !defined(LOWBIT_NO_THREADS)
#include "thread_pool.hpp"
#endif

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// How many ranges parallel_for(count, grain, ...) splits into.
inline std::size_t parallel_range_count(std::size_t count, std::size_t grain) {
    if (count == 0) return 0;
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t max_ranges = (count + grain - 1) / grain;
#if defined(LOWBIT_NO_THREADS)
    return max_ranges == 0 ? 0 : 1;
#else
    return std::min<std::size_t>(static_cast<std::size_t>(num_threads()), max_ranges);
#endif
}

/// Calls body(range, begin, end) for range in [0, parallel_range_count(count, grain)), the ranges
/// drawn above, on up to that many threads.
template <class Body>
void parallel_for_ranges(std::size_t count, std::size_t grain, Body&& body) {
    const std::size_t ranges = parallel_range_count(count, grain);
    if (ranges == 0) return;
    if (ranges == 1) {
        body(std::size_t{0}, std::size_t{0}, count);
        return;
    }
#if defined(LOWBIT_NO_THREADS)
    body(std::size_t{0}, std::size_t{0}, count);
#else
    const std::size_t base = count / ranges;
    const std::size_t extra = count % ranges;
    auto range_begin = [&](std::size_t r) { return r * base + std::min(r, extra); };
    auto run_range = [&](std::size_t r) { body(r, range_begin(r), range_begin(r + 1)); };
    if (!ThreadPool::instance().try_run(ranges, run_range)) {
        for (std::size_t r = 0; r < ranges; ++r) run_range(r);
    }
#endif
}

template <class Body>
void parallel_for(std::size_t count, std::size_t grain, Body&& body) {
    parallel_for_ranges(count, grain, [&](std::size_t, std::size_t begin, std::size_t end) { body(begin, end); });
}

/// map(begin, end) -> T on every range, then the partial results folded in range order:
/// combine(combine(identity, part 0), part 1)... Deterministic for a given count, grain and thread count.
template <class T, class Map, class Combine>
T parallel_reduce(std::size_t count, std::size_t grain, T identity, Map&& map, Combine&& combine) {
    std::vector<T> partial(parallel_range_count(count, grain), identity);
    parallel_for_ranges(count, grain,
                        [&](std::size_t range, std::size_t begin, std::size_t end) { partial[range] = map(begin, end); });
    T total = identity;
    for (const T& part : partial) total = combine(total, part);
    return total;
}

}  // namespace detail
LOWBIT_END_NAMESPACE
