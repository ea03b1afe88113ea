// Post-training quantization beyond MLX's round-to-nearest (docs/numerics.md N13). Every
// method returns an ordinary MLX-format QuantizedMatrix (same packing, w = s * q + b, loadable by MLX);
// only the choice of codes, scales and biases differs. quantize (quantized_matrix.hpp) stays the
// bit-exact default. Opt-in: <lowbit/lowbit.hpp> does not include it (it is a preparation step that a
// program calls in one place, and its Eigen factorizations take seconds to parse in every translation unit).
//
//   ptq::quantize ptq/quantize.hpp       any of the methods below, chosen at run time (PtqOptions)
//   clip_search  ptq/clip_search.hpp     per-group range search, squared error (optionally per-channel weighted)
//   hqq          ptq/hqq.hpp             half-quadratic bias optimisation, lp error (p < 1), no data
//   gptq         ptq/gptq.hpp            output error on calibration inputs, Cholesky error feedback
//   allocate_bits ptq/bit_allocation.hpp (bits, group size) per layer for a target bits per weight
//   distill_scales_biases ptq/distill_scales_biases.hpp  group scales and biases fitted to float outputs, codes kept
//
// Options for all of them: ptq/options.hpp.
#pragma once

#include "ptq/bit_allocation.hpp"
#include "ptq/clip_search.hpp"
#include "ptq/distill_scales_biases.hpp"
#include "ptq/gptq.hpp"
#include "ptq/hqq.hpp"
#include "ptq/options.hpp"
#include "ptq/quantize.hpp"
