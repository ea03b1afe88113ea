// lowbit::io_compiled (cmake/lowbitIoCompiled.cmake): the checkpoint-IO functions with costly bodies
// (JSON parsing and writing, the run-time format dispatch of load_mlx_linear and save_mlx_linear)
// compiled once, as ordinary functions, for every program that links the target. Its users compile
// with LOWBIT_EXTERN_IO and see only their declarations (include/lowbit/io/detail/compiled.hpp).
// Header-only use needs none of this.
#define LOWBIT_IO_COMPILING
#include <lowbit/io.hpp>
