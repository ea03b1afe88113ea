# Cross-compiling lowbit's tests for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu; the test
# programs run under qemu-aarch64 (Debian's qemu-user), with the aarch64 C and C++ runtimes of the cross
# toolchain. Used by the aarch64 preset. Header-only dependencies (Eigen, xsimd, nlohmann-json) come from
# the host; the compiled ones the tests link (Catch2, zlib) are the aarch64 builds that
# tools/install-deps --aarch64 unpacks into build/deps/aarch64 (the preset points at them).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
