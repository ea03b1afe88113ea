#include <string>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/lowbit.hpp>

TEST_CASE("version macros agree with the CMake project version", "[version]") {
    const std::string from_header = std::to_string(LOWBIT_VERSION_MAJOR) + "." +
                                    std::to_string(LOWBIT_VERSION_MINOR) + "." +
                                    std::to_string(LOWBIT_VERSION_PATCH);
    CHECK(from_header == LOWBIT_TEST_PROJECT_VERSION);
    CHECK(LOWBIT_VERSION == LOWBIT_VERSION_MAJOR * 10000 + LOWBIT_VERSION_MINOR * 100 + LOWBIT_VERSION_PATCH);
}
