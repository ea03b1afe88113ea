# Finds lowbit's dependencies and stops at configure time, naming the missing piece, when one is absent
# or too old. Shared by the build (CMakeLists.txt) and, in spirit, by lowbitConfig.cmake.in.
include(GNUInstallDirs)

if(NOT "cxx_std_20" IN_LIST CMAKE_CXX_COMPILE_FEATURES)
  message(FATAL_ERROR
    "lowbit needs a C++20 compiler; ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} "
    "(${CMAKE_CXX_COMPILER}) does not support C++20. Use GCC 12 or newer, or Clang 14 or newer.")
endif()
if((CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12)
   OR (CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14))
  message(FATAL_ERROR
    "lowbit needs GCC 12+ or Clang 14+ for its C++20 features; found ${CMAKE_CXX_COMPILER_ID} "
    "${CMAKE_CXX_COMPILER_VERSION}.")
endif()

find_package(Eigen3 3.4 QUIET NO_MODULE)
if(NOT Eigen3_FOUND)
  message(FATAL_ERROR
    "lowbit needs Eigen 3.4 (CMake package Eigen3, e.g. Debian's libeigen3-dev); "
    "found: [${Eigen3_CONSIDERED_VERSIONS}]. Set Eigen3_DIR or CMAKE_PREFIX_PATH.")
endif()

include(lowbitFindXsimd)
if(lowbit_xsimd_error)
  message(FATAL_ERROR "${lowbit_xsimd_error}")
endif()

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

message(STATUS "lowbit ${PROJECT_VERSION}: Eigen ${Eigen3_VERSION} (${Eigen3_DIR}), xsimd ${xsimd_VERSION} (${xsimd_DIR})")

# nlohmann-json is needed only by the checkpoint IO (<lowbit/io.hpp>, target lowbit::io), so lowbit::lowbit
# never requires it; lowbit's own tests, examples and benchmark use the IO and do.
find_package(nlohmann_json 3 QUIET)
if(NOT nlohmann_json_FOUND AND (LOWBIT_BUILD_TESTS OR LOWBIT_BUILD_EXAMPLES OR LOWBIT_BUILD_BENCHMARKS))
  message(FATAL_ERROR
    "lowbit's tests, examples and benchmark need nlohmann-json 3 (CMake package nlohmann_json, e.g. "
    "Debian's nlohmann-json3-dev) for the checkpoint IO. Install it, set nlohmann_json_DIR, or turn off "
    "LOWBIT_BUILD_TESTS, LOWBIT_BUILD_EXAMPLES and LOWBIT_BUILD_BENCHMARKS.")
endif()
