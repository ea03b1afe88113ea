#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <lowbit/detail/parallel.hpp>
#include <lowbit/lowbit.hpp>

namespace {
struct ThreadCountGuard {
    ~ThreadCountGuard() { lowbit::set_num_threads(0); }
};
}  // namespace

TEST_CASE("parallel_for covers every index exactly once", "[parallel]") {
    ThreadCountGuard guard;
    const int threads = GENERATE(1, 2, 3, 8);
    lowbit::set_num_threads(threads);
    REQUIRE(lowbit::num_threads() == threads);
    for (std::size_t count : {0u, 1u, 2u, 5u, 7u, 64u, 1000u, 1001u}) {
        for (std::size_t grain : {0u, 1u, 3u, 16u, 5000u}) {
            std::vector<std::atomic<int>> visits(count);
            std::atomic<int> ranges{0};
            lowbit::detail::parallel_for(count, grain, [&](std::size_t begin, std::size_t end) {
                REQUIRE(begin < end);
                ++ranges;
                for (std::size_t i = begin; i < end; ++i) ++visits[i];
            });
            INFO("threads " << threads << ", count " << count << ", grain " << grain);
            for (std::size_t i = 0; i < count; ++i) REQUIRE(visits[i] == 1);
            CHECK(ranges <= threads);
        }
    }
}

TEST_CASE("parallel_for rethrows a worker's exception on the caller", "[parallel]") {
    ThreadCountGuard guard;
    lowbit::set_num_threads(4);
    auto throw_on_last_range = [](std::size_t, std::size_t end) {
        if (end == 100) throw std::runtime_error("from the last range");
    };
    CHECK_THROWS_AS(lowbit::detail::parallel_for(100, 1, throw_on_last_range), std::runtime_error);
}

TEST_CASE("set_num_threads rejects a negative count and 0 restores the default", "[parallel]") {
    ThreadCountGuard guard;
    CHECK_THROWS_AS(lowbit::set_num_threads(-1), std::invalid_argument);
    lowbit::set_num_threads(3);
    CHECK(lowbit::num_threads() == 3);
    lowbit::set_num_threads(0);
    CHECK(lowbit::num_threads() >= 1);
}
