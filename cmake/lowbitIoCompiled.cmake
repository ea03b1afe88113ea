# lowbit::io_compiled: the compiled half of the checkpoint IO, as lowbit::kernels is of the kernels.
#
# A unit that includes <lowbit/io.hpp> header-only parses nlohmann-json and compiles the safetensors
# header parser, the MLX config reader and writer and the run-time format dispatch of load_mlx_linear
# over every format. A program that links lowbit::io_compiled compiles them once (src/io_instances.cpp),
# and its units get LOWBIT_EXTERN_IO, which leaves only the declarations (io/detail/compiled.hpp).
# Units that call the JSON-typed functions (MlxQuantization::to_json and from_json, save_mlx_config with
# a base object) include <nlohmann/json.hpp> themselves. It links lowbit::io and lowbit::kernels
# (whose instruction set it is compiled for and carries), so one target gives both compiled halves.
#
# Built where lowbit::kernels and lowbit::io are (LOWBIT_KERNELS, nlohmann-json found), installed with
# them (find_package(lowbit COMPONENTS io_compiled)); lowbit_link_io(<target>) links lowbit's own IO
# users to it, or to the header-only lowbit::io where it is not built.
if(TARGET lowbit_kernels AND TARGET lowbit_io)
  add_library(lowbit_io_compiled STATIC "${PROJECT_SOURCE_DIR}/src/io_instances.cpp")
  add_library(lowbit::io_compiled ALIAS lowbit_io_compiled)
  set_target_properties(lowbit_io_compiled PROPERTIES EXPORT_NAME io_compiled POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(lowbit_io_compiled PUBLIC lowbit_io lowbit_kernels)
  target_compile_definitions(lowbit_io_compiled INTERFACE LOWBIT_EXTERN_IO)
  if(COMMAND lowbit_project_target)
    lowbit_project_target(lowbit_io_compiled)  # lowbit's own warnings as errors
  endif()
endif()

# lowbit_link_io(<target>): links lowbit::io_compiled where it is built, else the header-only lowbit::io.
function(lowbit_link_io target)
  if(TARGET lowbit_io_compiled)
    target_link_libraries(${target} PRIVATE lowbit::io_compiled)
  else()
    target_link_libraries(${target} PRIVATE lowbit::io)
  endif()
endfunction()
