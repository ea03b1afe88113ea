// RowFault: what a format's row quantizer (FormatKernels<Format>::quantize_row) found in one row. The
// quantizer itself stays silent; its caller (quantize) names the element or the group in its error.
#pragma once

#include "config.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// What quantizing one row found.
enum class RowFault {
    none,                ///< every value and every group's levels finite
    non_finite_value,    ///< a value is NaN or infinite: the outputs are unspecified
    group_out_of_range,  ///< a group's parameters fall outside what the format stores (MLX affine: its
                         ///< levels overflow float, group_levels_finite; mxfp4: its scale is below
                         ///< E8M0's range): the outputs are complete
};

}  // namespace detail
LOWBIT_END_NAMESPACE
