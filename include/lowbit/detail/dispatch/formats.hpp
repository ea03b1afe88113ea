// dispatch/: every format's quantizer and matmul dispatch, in one place, then the extern declarations of
// their compiled entries (format_instances.hpp). The public headers include this file, so a new format
// adds its dispatch header here (one line) beside its entry in formats/formats.hpp.
#pragma once

#include "e2m1.hpp"
#include "mlx_affine.hpp"
#include "mlx_affine_quantize.hpp"
#include "mxfp8.hpp"

#include "format_instances.hpp"
