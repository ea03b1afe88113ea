// The sweep of test_quantized_matmul.cpp (quantized_matmul_sweep.hpp) over the formats it leaves to this
// unit: the affine formats of 5 to 8 bits and the floating-point formats of lowbit::test::TestedFormats.
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>

#include "kernels/quantized_matmul_sweep.hpp"
#include "support/formats.hpp"

TEMPLATE_LIST_TEST_CASE("quantized matmul paths agree with x * dequantize(q)^T, wide and floating-point formats",
                        "[quantized_matmul]", lowbit::test::TestedWideFormats) {
    lowbit::test::quantized_matmul::sweep<TestType>();
}
