// Where the IO functions with costly bodies (JSON, run-time format dispatch) are defined.
//
//   header-only (default)   every unit that includes an IO header also includes its io/impl/ part,
//                           whose functions are `inline`
//   LOWBIT_EXTERN_IO        units see the declarations only: lowbit::io_compiled (cmake/lowbitIoCompiled.cmake)
//                           compiles the io/impl/ parts once, in src/io_instances.cpp
//   LOWBIT_IO_COMPILING     that source: LOWBIT_IO_FUNC is empty, so the definitions are ordinary
//                           functions, emitted there once
//
// A declaration in an IO header carries no `inline`; its definition in io/impl/ carries LOWBIT_IO_FUNC.
// One program uses one of the two ways (like LOWBIT_EXTERN_KERNELS), and the compiled target's units
// need the same instruction set as their users (the inline namespace names it: detail/config.hpp).
#pragma once

#if defined(LOWBIT_IO_COMPILING)
#if defined(LOWBIT_EXTERN_IO)
#error "src/io_instances.cpp defines the IO functions; compile it without LOWBIT_EXTERN_IO"
#endif
#define LOWBIT_IO_FUNC
#else
#define LOWBIT_IO_FUNC inline
#endif
