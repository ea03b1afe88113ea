// The MLX affine formats the typed (TEMPLATE_LIST_TEST_CASE) tests of unit/ run over: every supported
// format, or, where LOWBIT_TEST_SAMPLED_FORMATS is defined (CMake option of the same name; the sanitize
// preset, where each instantiation of a heavy test costs ten seconds or more to compile), six that still
// cover every bit width and every group size, the common 4-bit g64 among them.
#pragma once

#include <tuple>

#include <lowbit/lowbit.hpp>

namespace lowbit::test {

#if defined(LOWBIT_TEST_SAMPLED_FORMATS)
using TypedTestFormats = std::tuple<MlxAffine<64, 4>, MlxAffine<32, 2>, MlxAffine<128, 3>, MlxAffine<32, 5>,
                                    MlxAffine<128, 6>, MlxAffine<64, 8>>;
#else
using TypedTestFormats = MlxAffineFormats;
#endif

}  // namespace lowbit::test
