# Flags for lowbit's own executables (tests, benchmark, examples). Never applied to lowbit::lowbit.
#
# lowbit_project_target(<target>) turns on warnings as errors, and optionally -march=native
# (LOWBIT_NATIVE), -march=<LOWBIT_MARCH> instead (e.g. haswell: the AVX2 kernels on an AVX-512
# machine; the avx2 preset), or the scalar-only kernels (LOWBIT_FORCE_SCALAR). Eigen and xsimd arrive
# through imported targets, so their headers are system headers and their warnings are not ours.

set(LOWBIT_MARCH "" CACHE STRING
    "If set, lowbit's own executables get -march=<LOWBIT_MARCH> instead of LOWBIT_NATIVE's -march=native (never the exported target)")
function(lowbit_project_target target)
  target_link_libraries(${target} PRIVATE lowbit::lowbit)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 /WX)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
    # GCC 12 reports its own AVX-512 intrinsic headers as "may be used uninitialized" once they are
    # inlined into Eigen (GCC bug 105593, fixed in GCC 13); the warning is about GCC's code, not ours.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
    endif()
  endif()
  if(LOWBIT_MARCH)
    target_compile_options(${target} PRIVATE -march=${LOWBIT_MARCH})
  elseif(LOWBIT_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  if(LOWBIT_FORCE_SCALAR)
    target_compile_definitions(${target} PRIVATE LOWBIT_FORCE_SCALAR)
  endif()
endfunction()

# lowbit_shared_kernels(<target>): the target's sources only declare each format's kernels (matmul and
# row quantizer; LOWBIT_EXTERN_KERNELS) and link one copy of them, compiled from src/kernel_instances.cpp
# (include/lowbit/detail/dispatch/format_instances.hpp): each format's kernels are compiled once per
# build, not once per translation unit that multiplies or quantizes (many minutes of CI time). The file
# is compiled once per shard (LOWBIT_INSTANCE_SHARDS object libraries, each the formats at positions
# shard, shard + shards, ... of the list), so a parallel build spreads them over the cores. The object
# libraries get the same flags as the targets (lowbit_project_target). LOWBIT_SHARED_KERNELS=OFF
# compiles them in each unit instead, which pays for a narrow build that multiplies in a few units (the
# xsimd13 and tsan presets).
option(LOWBIT_SHARED_KERNELS "Compile the matmul kernels and row quantizers once for lowbit's tests, examples and benchmark" ON)
set(LOWBIT_INSTANCE_SHARDS 6 CACHE STRING "Object files the shared kernels are spread over")
function(lowbit_shared_kernels target)
  if(NOT LOWBIT_SHARED_KERNELS)
    return()
  endif()
  math(EXPR last_shard "${LOWBIT_INSTANCE_SHARDS} - 1")
  foreach(shard RANGE ${last_shard})
    set(library lowbit-kernel-instances-${shard})
    if(NOT TARGET ${library})
      add_library(${library} OBJECT "${PROJECT_SOURCE_DIR}/src/kernel_instances.cpp")
      lowbit_project_target(${library})
      target_compile_definitions(${library} PRIVATE LOWBIT_EXTERN_KERNELS LOWBIT_INSTANCE_SHARD=${shard}
                                                    LOWBIT_INSTANCE_SHARDS=${LOWBIT_INSTANCE_SHARDS})
    endif()
    target_link_libraries(${target} PRIVATE ${library})
  endforeach()
  target_compile_definitions(${target} PRIVATE LOWBIT_EXTERN_KERNELS)
endfunction()
