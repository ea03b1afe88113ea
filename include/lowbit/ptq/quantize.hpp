// ptq::quantize: one entry point for the post-training quantizers, the method chosen at run time by
// PtqOptions::method (ptq/options.hpp). allocate_bits and the examples quantize through it, so each
// method is reached one way: a new method is one case here and its own header.
#pragma once

#include "../detail/config.hpp"

#include <string>
#include <type_traits>

#include <Eigen/Core>

#include "../detail/ptq/calibration.hpp"
#include "../matrix_types.hpp"
#include "../quantized_matrix.hpp"
#include "clip_search.hpp"
#include "gptq.hpp"
#include "hqq.hpp"
#include "options.hpp"

LOWBIT_BEGIN_NAMESPACE

namespace detail::ptq {

/// A layer's calibration inputs as the methods read them, computed once for any number of quantizations
/// of that layer (allocate_bits tries every candidate format on the same inputs): clip search's channel
/// weights, or GPTQ's rescaled inputs and H. rtn and hqq read nothing; clip_search with an x without
/// rows is unweighted.
struct PreparedCalibration {
    ScaledCalibration scaled;         ///< gptq: x rescaled (detail/ptq/calibration.hpp)
    Eigen::VectorXf channel_weights;  ///< clip_search: mean square per input channel (empty: unweighted)
    Eigen::MatrixXf hessian;          ///< gptq: 2 X^T X / samples of the rescaled inputs

    /// Checks x against a layer of `in` inputs where `method` reads it (GPTQ needs rows) and prepares it.
    template <class Derived>
    PreparedCalibration(const char* function, const Eigen::MatrixBase<Derived>& x, Eigen::Index in, PtqMethod method) {
        if (method != PtqMethod::clip_search && method != PtqMethod::gptq) return;
        if (method == PtqMethod::gptq || x.rows() > 0) require_calibration(function, x, in, 1);
        if (x.rows() == 0) return;
        if (method == PtqMethod::clip_search) {
            channel_weights = channel_weights_from_calibration(x);
        } else {
            scaled = scaled_calibration(x);
            hessian = gptq_hessian(scaled.x);
        }
    }
};

/// Checks the options of the method `options` selects.
inline void check_ptq_options(const char* function, const PtqOptions& options) {
    switch (options.method) {
        case PtqMethod::clip_search:
            check_options(function, options.clip);
            break;
        case PtqMethod::hqq:
            check_options(function, options.hqq);
            break;
        case PtqMethod::gptq:
            check_options(function, options.gptq);
            break;
        case PtqMethod::rtn:
            break;
    }
}

/// weights [out, in] quantized by options.method on prepared calibration inputs (options checked).
template <int GroupSize, int Bits>
QuantizedMatrix<GroupSize, Bits> quantize_prepared(
    const char* function, const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>>& weights,
    const PreparedCalibration& calibration, const PtqOptions& options, GptqReport* report = nullptr) {
    switch (options.method) {
        case PtqMethod::clip_search:
            return clip_search<GroupSize, Bits>(weights, calibration.channel_weights, options.clip);
        case PtqMethod::hqq:
            return hqq<GroupSize, Bits>(weights, options.hqq);
        case PtqMethod::gptq:
            return gptq_with_hessian<GroupSize, Bits>(function, weights, calibration.hessian, calibration.scaled,
                                                      options.gptq, report);
        case PtqMethod::rtn:
            break;
    }
    return quantize_named<MlxAffine<GroupSize, Bits>>(function, weights);
}

}  // namespace detail::ptq

namespace ptq {

/// Quantizes w [out, in] (float, any dense expression) into MLX's format <GroupSize, Bits> with the
/// method options.method selects, with that method's options from `options`:
///   rtn          lowbit::quantize (MLX's round-to-nearest)
///   clip_search  lowbit::clip_search weighted by channel_weights_from_calibration(x) (unweighted when x
///                has no rows)
///   hqq          lowbit::hqq
///   gptq         lowbit::gptq on x (needs rows); `report`, when given, receives GptqReport
/// x [samples, in] are the calibration inputs, the inputs the layer sees (RowMatrixXf(0, in) for none),
/// read by clip_search and gptq only. The result is bit for bit what the method's own function
/// returns. Throws what that function throws, and for clip_search and gptq std::invalid_argument for x
/// of the wrong width or with a NaN/Inf (naming row and column).
template <int GroupSize = 64, int Bits = 4, class DerivedW, class DerivedX>
QuantizedMatrix<GroupSize, Bits> quantize(const Eigen::MatrixBase<DerivedW>& w, const Eigen::MatrixBase<DerivedX>& x,
                                          const PtqOptions& options = {}, GptqReport* report = nullptr) {
    static_assert(std::is_same_v<typename DerivedW::Scalar, float> && std::is_same_v<typename DerivedX::Scalar, float>,
                  "lowbit::ptq::quantize takes float matrices");
    constexpr const char* function = "lowbit::ptq::quantize";
    detail::ptq::check_ptq_options(function, options);
    const Eigen::Ref<const RowMatrixXf, 0, Eigen::OuterStride<>> weights(w.derived());
    const detail::ptq::PreparedCalibration calibration(function, x, weights.cols(), options.method);
    return detail::ptq::quantize_prepared<GroupSize, Bits>(function, weights, calibration, options, report);
}

/// ptq::quantize without calibration inputs: rtn, unweighted clip_search, or hqq (gptq throws).
template <int GroupSize = 64, int Bits = 4, class DerivedW>
QuantizedMatrix<GroupSize, Bits> quantize(const Eigen::MatrixBase<DerivedW>& w, const PtqOptions& options = {}) {
    return quantize<GroupSize, Bits>(w, RowMatrixXf(0, w.cols()), options);
}

}  // namespace ptq

LOWBIT_END_NAMESPACE
