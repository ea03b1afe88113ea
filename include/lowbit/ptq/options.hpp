// Options of the post-training quantizers (ptq.hpp). One plain struct per method, every field with its
// default and meaning; each method checks its struct and throws std::invalid_argument naming a field
// that is out of range.
#pragma once

#include "../detail/config.hpp"

#include <vector>

LOWBIT_BEGIN_NAMESPACE

/// clip_search: per group, candidate ranges [lo, hi] shrunk from [min, max] on a grid; each candidate's
/// scale and bias follow MLX's rule for that range, and the candidate with the least (weighted) squared
/// error wins. Candidates: both ends moved together by k * max_shrink / grid of the range (k = 0..grid),
/// then the low end alone, then the high end alone, around the best so far (3 * grid + 1 in all).
struct ClipSearchOptions {
    int grid = 10;            ///< steps per search line, >= 1
    float max_shrink = 0.3f;  ///< largest fraction of the range one end may move in, in (0, 0.5]
    /// Rounds of a weighted least-squares refit of scale and bias to the chosen codes followed by
    /// re-coding, each kept only when it lowers the error (0: off).
    int refit_rounds = 2;
};

/// hqq: half-quadratic optimisation of each group's bias (HQQ's "zero") for the lp error
/// sum |w - w_hat|^p, p < 1, starting from MLX's RTN scale and bias. Each round: code with (s, b),
/// W_e = shrink_p(w - w_hat) = sign * max(|e| - |e|^(p-1) / beta, 0), b = mean(w - W_e - s q),
/// beta *= kappa; a group stops when its lp error rises and keeps its best round (RTN included).
struct HqqOptions {
    float p = 0.7f;        ///< the lp exponent, in (0, 1)
    int iterations = 20;   ///< rounds, >= 1
    float beta = 10.0f;    ///< initial penalty, > 0
    float kappa = 1.01f;   ///< penalty growth per round, >= 1
};

/// gptq: H = 2 X^T X / samples + damping * mean(diag H) * I; columns processed in order (no act-order:
/// MLX's format has no column permutation), blocks of block_size columns, error feedback through the
/// upper Cholesky factor of H^-1, each group's scale and bias chosen by MLX's rule on the error-updated
/// weights when the group is entered (or by clip search when clip_groups is set).
struct GptqOptions {
    float damping = 0.01f;   ///< relative damping of H's diagonal, >= 0
    int block_size = 128;    ///< columns per lazy-update block (rounded up to a multiple of the group size), >= 1
    /// When H (plus damping) is not positive definite: multiply the damping by 10 and retry, up to this
    /// many times, then throw. The damping used is reported in GptqReport.
    int damping_retries = 4;
    bool clip_groups = false;  ///< choose each group's range by clip_search (unweighted) instead of min-max
    ClipSearchOptions clip{};  ///< used when clip_groups
    /// Per output row, keep MLX's RTN row when its output error on the calibration inputs is lower
    /// (costs one [out, in] x [in, samples] product).
    bool keep_better_of_rtn = true;
};

/// distill_scales_biases (ptq/distill_scales_biases.hpp): each row's least-squares fit of its group scales
/// and biases is pulled toward their current values with weight ridge * trace(A^T A) / unknowns, which
/// only matters in directions the calibration inputs leave (nearly) undetermined.
struct ScaleBiasDistillOptions {
    double ridge = 1e-6;  ///< in [0, 1]
};

/// A post-training quantizer, chosen at run time (ptq::quantize, allocate_bits).
enum class PtqMethod { rtn, clip_search, hqq, gptq };

/// ptq::quantize (ptq/quantize.hpp): the method and each method's options (only the chosen method's
/// are read).
struct PtqOptions {
    PtqMethod method = PtqMethod::rtn;
    ClipSearchOptions clip{};
    HqqOptions hqq{};
    GptqOptions gptq{};
};

/// allocate_bits: chooses each layer's (bits, group size) from the candidates to minimise the summed
/// output error sum_l ||X_l W_l^T - X_l W_hat_l^T||^2 on the calibration inputs, under an average of
/// target_bits_per_weight bits per weight, counting codes plus one scale and one bias per group at
/// scale_bits each (16 for f16/bf16 checkpoints, 32 for f32). Every candidate is quantized as
/// ptq::quantize does with the PtqOptions part (method, clip, hqq, gptq).
struct BitAllocationOptions : PtqOptions {
    double target_bits_per_weight = 4.5;
    int scale_bits = 16;  ///< 16 or 32
    std::vector<int> bits{2, 3, 4, 5, 6, 8};    ///< candidate bit widths (subset of mlx_affine_bits)
    std::vector<int> group_sizes{32, 64, 128};  ///< candidate group sizes (subset of mlx_affine_group_sizes)
};

LOWBIT_END_NAMESPACE
