// lowbit for quantization-aware training only: FakeQuantize and observers, the STE functions, the
// BitNet b1.58 quantizers, BitLinear, GroupFakeQuantize (with QuantizedMatrix, the format it trains
// for), and the thread count; no inference kernels but TernaryLinear's (BitLinear::deploy returns one).
// The QAT functions take Eigen::Tensor inputs too, once the caller includes Eigen's Tensor module.
// <lowbit/lowbit.hpp> includes this and everything else.
#pragma once

#include "version.hpp"
#include "parallel.hpp"
#include "rounding.hpp"
#include "matrix_types.hpp"
#include "fake_quant_config.hpp"
#include "fake_quantize.hpp"
#include "per_channel_fake_quantize.hpp"
#include "ste.hpp"
#include "bitnet.hpp"
#include "group_fake_quantize.hpp"
#include "bit_linear.hpp"
