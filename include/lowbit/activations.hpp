// Activations: how quantized_matmul / QuantizedLinear::forward treat the float input x
// (docs/numerics.md N10 and N11).
#pragma once

#include "detail/config.hpp"

LOWBIT_BEGIN_NAMESPACE

/// f32 (the default): x stays float, N10. int8 (opt-in): x is quantized per row and weight group to
/// symmetric int8 codes and multiplied with the weight codes in int32, N11; faster, less accurate.
enum class Activations { f32, int8 };

LOWBIT_END_NAMESPACE
