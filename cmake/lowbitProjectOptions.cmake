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
    # GCC 12 reports its own AVX-512 intrinsic headers as "(may be) used uninitialized" once they are
    # inlined into Eigen (GCC bug 105593, fixed in GCC 13; at -O2 as "is used uninitialized"); the
    # warning is about GCC's code, not ours. The Clang presets keep both warnings on for lowbit's code.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
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
