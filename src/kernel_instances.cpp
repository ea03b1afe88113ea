// lowbit::kernels (cmake/lowbitKernels.cmake): the kernels of every format in LOWBIT_FORMAT_LIST and the
// element-wise fake-quant kernels, compiled once for every program that links the target (its users
// compile with LOWBIT_EXTERN_KERNELS: include/lowbit/detail/dispatch/format_instances.hpp). The build
// compiles this file LOWBIT_INSTANCE_SHARDS times, with LOWBIT_INSTANCE_SHARD = 0, 1, ...; each compiles
// the formats whose position in the list leaves that remainder, so a parallel build spreads them over
// the cores. The other formats get FormatKernels<Format, false>, which is empty. Header-only use needs
// none of this.
#include <lowbit/detail/dispatch/fake_quant.hpp>
#include <lowbit/quantized_linear.hpp>

#if !defined(LOWBIT_INSTANCE_SHARD) || !defined(LOWBIT_INSTANCE_SHARDS)
#error "src/kernel_instances.cpp is compiled with LOWBIT_INSTANCE_SHARD and LOWBIT_INSTANCE_SHARDS defined"
#endif

#define LOWBIT_INSTANTIATE_IN_THIS_SHARD(...)        \
    template struct ::lowbit::detail::FormatKernels< \
        __VA_ARGS__, ::lowbit::detail::format_index_v<__VA_ARGS__> % LOWBIT_INSTANCE_SHARDS == LOWBIT_INSTANCE_SHARD>;
LOWBIT_FORMAT_LIST(LOWBIT_INSTANTIATE_IN_THIS_SHARD)

// The element-wise fake-quant kernels (detail/dispatch/fake_quant.hpp), in the first shard.
#if LOWBIT_INSTANCE_SHARD == 0
template struct ::lowbit::detail::FakeQuantKernels<::lowbit::detail::simd::arch>;
#endif
