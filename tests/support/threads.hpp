// Thread-count control for tests: sets lowbit's thread count and restores the default (0) when the
// scope ends, whatever the test did in between.
#pragma once

#include <lowbit/parallel.hpp>

namespace lowbit::test {

struct ThreadCountGuard {
    ThreadCountGuard() = default;
    explicit ThreadCountGuard(int threads) { lowbit::set_num_threads(threads); }
    ThreadCountGuard(const ThreadCountGuard&) = delete;
    ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;
    ~ThreadCountGuard() { lowbit::set_num_threads(0); }
};

}  // namespace lowbit::test
