#include <cstdio>

#include <lowbit/lowbit.hpp>

int main() {
    std::printf("lowbit %d.%d.%d\n", LOWBIT_VERSION_MAJOR, LOWBIT_VERSION_MINOR, LOWBIT_VERSION_PATCH);
    return 0;
}
