// What allocate_bits (ptq/bit_allocation.hpp) takes and returns: CalibratedLayer, LayerChoice and
// BitAllocation, plain data. Apart from the algorithm so that io/mlx_config.hpp, which writes a
// BitAllocation's choices as MLX's per-layer overrides, need not compile the quantizers.
#pragma once

#include "../detail/config.hpp"

#include <string>
#include <vector>

#include "../any_quantized_linear.hpp"
#include "../matrix_types.hpp"
#include "../quantized_linear.hpp"

LOWBIT_BEGIN_NAMESPACE

/// One layer to allocate: its name (the checkpoint prefix), float layer and calibration inputs
/// [samples, in] (what the layer sees).
struct CalibratedLayer {
    std::string name;
    Linear linear;
    RowMatrixXf inputs;
};

/// The format chosen for one layer.
struct LayerChoice {
    std::string name;
    int bits = 4;
    int group_size = 64;
    double bits_per_weight = 0;  ///< bits + 2 * scale_bits / group_size
    double output_error = 0;     ///< ||X W^T - X W_hat^T||^2 / samples with this format
};

/// allocate_bits' result.
struct BitAllocation {
    std::vector<AnyQuantizedLinear> layers;  ///< in the order given
    std::vector<LayerChoice> choices;        ///< same order
    double bits_per_weight = 0;              ///< the achieved average, <= the target
    double output_error = 0;                 ///< sum of the layers' output errors
};

LOWBIT_END_NAMESPACE
