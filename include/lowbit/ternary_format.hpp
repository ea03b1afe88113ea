// TernaryFormat: the two packed layouts of TernaryLinear's weights (docs/numerics.md N14; the layouts
// are drawn in detail/ternary/packing.hpp).
#pragma once

#include "detail/config.hpp"

LOWBIT_BEGIN_NAMESPACE

/// The two packed ternary formats of TernaryLinear.
enum class TernaryFormat {
    i2,   ///< 2 bits per weight, 4 per byte
    tq1,  ///< 5 weights per byte (base 3), 1.6 bits per weight
};

LOWBIT_END_NAMESPACE
