// The weight panels of the int8-activation GEMM (docs/numerics.md N11; layout in int8_panels.hpp),
// built once per layer instead of once per call: QuantizedLinear and TernaryLinear hold an
// Int8PanelCache and their dispatch fills it on the layer's first int8 forward (MLX affine: the formats
// whose words the microkernel reads as they are, 2, 4 and 8 bits; ternary: always). MLX affine's
// panels are its codes, scales and biases again in another order: as many bytes as the matrix's three
// arrays (plus at most one panel of zero rows). Declared here without intrinsics, so that every build
// (scalar included) has the type.
#pragma once

#include "../config.hpp"

#include <cstdint>
#include <mutex>
#include <vector>

#include <Eigen/Core>

#include "../simd.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail {

/// Every weight panel of one QuantizedMatrix, for a microkernel of `columns` (NR) weight rows per panel:
/// panel p at p * panel_units 32-bit units of `units`, one record per weight group (its code words, then
/// its scales and biases: int8_panels.hpp). columns == 0: not built (format or instruction set
/// without panels).
struct Int8WeightPanels {
    int columns = 0;
    Eigen::Index panels = 0, panel_units = 0;
    std::vector<std::uint32_t, xsimd::aligned_allocator<std::uint32_t, 64>> units;
};

/// A layer's panels, built at most once (std::call_once: concurrent first forwards are safe) and
/// shared by copies of the layer (its weights never change). A translation unit whose microkernel
/// has another NR (a mixed instruction-set program) finds columns != its NR and packs per call.
struct Int8PanelCache {
    std::once_flag built;
    Int8WeightPanels panels;
};

}  // namespace detail
LOWBIT_END_NAMESPACE
