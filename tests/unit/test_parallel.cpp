#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <lowbit/detail/threading/parallel.hpp>

#include "support/threads.hpp"
#include <lowbit/lowbit.hpp>

namespace {
}  // namespace

TEST_CASE("parallel_for covers every index exactly once", "[parallel][threads]") {
    lowbit::test::ThreadCountGuard guard;
    const int threads = GENERATE(1, 2, 3, 8);
    lowbit::set_num_threads(threads);
    REQUIRE(lowbit::num_threads() == threads);
    for (std::size_t count : {0u, 1u, 2u, 5u, 7u, 64u, 1000u, 1001u}) {
        for (std::size_t grain : {0u, 1u, 3u, 16u, 5000u}) {
            // Catch2 assertions are not thread-safe: bodies only count, the checks come after.
            std::vector<std::atomic<int>> visits(count);
            std::atomic<int> ranges{0}, empty_ranges{0};
            lowbit::detail::parallel_for(count, grain, [&](std::size_t begin, std::size_t end) {
                if (begin >= end) ++empty_ranges;
                ++ranges;
                for (std::size_t i = begin; i < end; ++i) ++visits[i];
            });
            INFO("threads " << threads << ", count " << count << ", grain " << grain);
            REQUIRE(empty_ranges == 0);
            for (std::size_t i = 0; i < count; ++i) REQUIRE(visits[i] == 1);
            CHECK(ranges <= threads);
        }
    }
}

TEST_CASE("parallel_for rethrows a worker's exception on the caller", "[parallel][threads]") {
    lowbit::test::ThreadCountGuard guard;
    lowbit::set_num_threads(4);
    auto throw_on_last_range = [](std::size_t, std::size_t end) {
        if (end == 100) throw std::runtime_error("from the last range");
    };
    CHECK_THROWS_AS(lowbit::detail::parallel_for(100, 1, throw_on_last_range), std::runtime_error);
}

TEST_CASE("set_num_threads rejects a negative count and 0 restores the default", "[parallel]") {
    lowbit::test::ThreadCountGuard guard;
    CHECK_THROWS_AS(lowbit::set_num_threads(-1), std::invalid_argument);
    lowbit::set_num_threads(3);
    CHECK(lowbit::num_threads() == 3);
    lowbit::set_num_threads(0);
    CHECK(lowbit::num_threads() >= 1);
}

#if !defined(LOWBIT_NO_THREADS)
namespace {
/// Runs parallel_for over `count` indices and reports whether each was visited exactly once.
bool covers_once(std::size_t count, std::size_t grain) {
    std::vector<std::atomic<int>> visits(count);
    lowbit::detail::parallel_for(count, grain, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) ++visits[i];
    });
    for (const auto& visit : visits)
        if (visit != 1) return false;
    return true;
}
}  // namespace

TEST_CASE("the thread pool runs back-to-back jobs, and jobs after its workers went to sleep", "[parallel][threads]") {
    lowbit::test::ThreadCountGuard guard;
    for (int threads : {2, 3, 4}) {
        lowbit::set_num_threads(threads);
        for (int call = 0; call < 300; ++call) {
            // Every 50th call waits past the workers' spin time, so they go to sleep and are woken.
            if (call % 50 == 49) std::this_thread::sleep_for(lowbit::detail::ThreadPool::spin_time * 4);
            INFO("threads " << threads << ", call " << call);
            REQUIRE(covers_once(1000 + static_cast<std::size_t>(call), 10));
        }
    }
}

TEST_CASE("parallel_for called from inside a body runs on the calling thread", "[parallel][threads]") {
    lowbit::test::ThreadCountGuard guard;
    lowbit::set_num_threads(4);
    std::vector<std::atomic<int>> visits(64 * 100);
    lowbit::detail::parallel_for(64, 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t row = begin; row < end; ++row) {
            lowbit::detail::parallel_for(100, 1, [&](std::size_t inner_begin, std::size_t inner_end) {
                for (std::size_t i = inner_begin; i < inner_end; ++i) ++visits[row * 100 + i];
            });
        }
    });
    for (const auto& visit : visits) REQUIRE(visit == 1);
}

TEST_CASE("parallel_for from several threads at once: each call completes its own work", "[parallel][threads]") {
    lowbit::test::ThreadCountGuard guard;
    lowbit::set_num_threads(3);
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (int caller = 0; caller < 4; ++caller) {
        callers.emplace_back([&failures, caller] {
            for (int call = 0; call < 200; ++call)
                if (!covers_once(500 + static_cast<std::size_t>(caller * 7 + call), 5)) ++failures;
        });
    }
    for (auto& thread : callers) thread.join();
    CHECK(failures == 0);
}

TEST_CASE("the thread pool stays usable after a body throws, on the caller's range or a worker's", "[parallel][threads]") {
    lowbit::test::ThreadCountGuard guard;
    lowbit::set_num_threads(4);
    for (std::size_t throwing_end : {25u, 100u}) {  // the first range (the caller's) and the last
        for (int round = 0; round < 20; ++round) {
            CHECK_THROWS_AS(lowbit::detail::parallel_for(100, 1,
                                                         [&](std::size_t, std::size_t end) {
                                                             if (end == throwing_end) throw std::runtime_error("x");
                                                         }),
                            std::runtime_error);
            REQUIRE(covers_once(100, 1));
        }
    }
}

#if defined(__unix__)
TEST_CASE("a fork()ed child gets its own thread pool", "[parallel]") {
    // qemu-user (the aarch64 preset runs the tests under it) cannot fork a process that has threads: the
    // child's emulator aborts. The preset says so through LOWBIT_TEST_EMULATOR.
    if (const char* emulator = std::getenv("LOWBIT_TEST_EMULATOR"); emulator != nullptr)
        SKIP("fork() with live threads is not emulated by " << emulator);
    lowbit::test::ThreadCountGuard guard;
    lowbit::set_num_threads(2);
    REQUIRE(covers_once(1000, 10));  // the parent's workers exist now
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The parent's workers do not exist here; the child must not wait for them.
        bool ok = true;
        for (int call = 0; call < 20; ++call) ok = ok && covers_once(1000, 10);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(covers_once(1000, 10));
}
#endif
#endif
