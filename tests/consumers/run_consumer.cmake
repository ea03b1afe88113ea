# cmake -P driver for one consumer project: (for find_package) install lowbit into a fresh prefix,
# then configure, build and run the consumer. Any failing step fails the test with its output.
cmake_minimum_required(VERSION 3.25)

function(run_step description)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${CONSUMER}: ${description} failed (${result}):\n${output}")
  endif()
  message(STATUS "${CONSUMER}: ${description}: ok")
endfunction()

file(REMOVE_RECURSE "${CONSUMER_WORK_DIR}")
file(MAKE_DIRECTORY "${CONSUMER_WORK_DIR}")
set(prefix_path "${CONSUMER_PREFIX_PATH}")

if(CONSUMER STREQUAL "find_package")
  set(install_prefix "${CONSUMER_WORK_DIR}/prefix")
  run_step("install lowbit into ${install_prefix}"
    ${CMAKE_COMMAND} --install "${LOWBIT_BINARY_DIR}" --prefix "${install_prefix}")
  foreach(expected include/lowbit/lowbit.hpp include/lowbit/version.hpp
                   share/cmake/lowbit/lowbitConfig.cmake share/cmake/lowbit/lowbitConfigVersion.cmake
                   share/pkgconfig/lowbit.pc share/pkgconfig/lowbit-io.pc)
    if(NOT EXISTS "${install_prefix}/${expected}")
      message(FATAL_ERROR "find_package: the install is missing ${expected}")
    endif()
  endforeach()
  # The pkg-config file points at the installed headers.
  find_program(PKG_CONFIG_EXECUTABLE pkg-config)
  if(PKG_CONFIG_EXECUTABLE)
    set(ENV{PKG_CONFIG_PATH} "${install_prefix}/share/pkgconfig")
    execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags lowbit
                    RESULT_VARIABLE result OUTPUT_VARIABLE cflags ERROR_VARIABLE cflags)
    string(REGEX MATCH "-I([^ \n]+)" include_flag "${cflags}")
    file(REAL_PATH "${CMAKE_MATCH_1}" include_dir)
    if(NOT result EQUAL 0 OR NOT EXISTS "${include_dir}/lowbit/lowbit.hpp")
      message(FATAL_ERROR "find_package: pkg-config --cflags lowbit gave (${result}): ${cflags}")
    endif()
    message(STATUS "find_package: pkg-config --cflags lowbit: ${cflags}")
    # lowbit-io adds nlohmann-json: checked where the system has its pkg-config file.
    execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --exists nlohmann_json RESULT_VARIABLE json_status)
    if(json_status EQUAL 0)
      execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags lowbit-io
                      RESULT_VARIABLE result OUTPUT_VARIABLE io_cflags ERROR_VARIABLE io_cflags)
      string(FIND "${io_cflags}" "${include_flag}" lowbit_flag_at)
      if(NOT result EQUAL 0 OR lowbit_flag_at EQUAL -1)
        message(FATAL_ERROR "find_package: pkg-config --cflags lowbit-io gave (${result}): ${io_cflags}")
      endif()
      message(STATUS "find_package: pkg-config --cflags lowbit-io: ${io_cflags}")
    endif()
  endif()
  list(PREPEND prefix_path "${install_prefix}")
  set(extra_args "")
else()
  set(extra_args "-DLOWBIT_SOURCE_DIR=${LOWBIT_SOURCE_DIR}")
endif()

string(REPLACE ";" "\\;" prefix_path_arg "${prefix_path}")
run_step("configure"
  ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${CONSUMER_WORK_DIR}/build"
  -DCMAKE_CXX_COMPILER=${CONSUMER_CXX_COMPILER} -DCMAKE_BUILD_TYPE=${CONSUMER_BUILD_TYPE}
  "-DCMAKE_PREFIX_PATH=${prefix_path_arg}" ${extra_args})
run_step("build" ${CMAKE_COMMAND} --build "${CONSUMER_WORK_DIR}/build")
run_step("run" "${CONSUMER_WORK_DIR}/build/consumer")
if(CONSUMER STREQUAL "find_package")  # the installed lowbit::io export; add_subdirectory has the alias
  run_step("run the checkpoint IO consumer" "${CONSUMER_WORK_DIR}/build/consumer_io")
  if(EXISTS "${LOWBIT_BINARY_DIR}/lowbit_kernels")
    run_step("run the consumer linked to lowbit::kernels" "${CONSUMER_WORK_DIR}/build/consumer_kernels")
  endif()
  if(EXISTS "${LOWBIT_BINARY_DIR}/liblowbit_io_compiled.a")
    run_step("run the IO consumer linked to lowbit::io_compiled" "${CONSUMER_WORK_DIR}/build/consumer_io_compiled")
  endif()
endif()
