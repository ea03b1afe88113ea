// What a downstream project compiles: the public header, without any lowbit build flag.
#include <cstdio>

#include <lowbit/lowbit.hpp>

int main() {
    std::printf("lowbit %d.%d.%d, %d threads\n", LOWBIT_VERSION_MAJOR, LOWBIT_VERSION_MINOR,
                LOWBIT_VERSION_PATCH, lowbit::num_threads());
    return lowbit::num_threads() >= 1 ? 0 : 1;
}
