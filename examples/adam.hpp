// Adam (Kingma and Ba, 2015) for the examples' training loops: one update of a parameter matrix from its
// gradient, with the moments kept by the caller.
#pragma once

#include <cmath>

#include <Eigen/Core>

namespace examples {

/// One Adam update of `param` (a matrix, or a map of one) with gradient `grad` and moments m, v (all the
/// same shape; step counts from 1), beta1 0.9, beta2 0.999, epsilon 1e-8.
template <class Param, class Moment, class Grad>
void adam_update(Param&& param, Moment& m, Moment& v, const Grad& grad, float learning_rate, int step) {
    constexpr float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
    const float correction1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    const float correction2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    const float step_size = learning_rate * std::sqrt(correction2) / correction1;
    m = beta1 * m + (1 - beta1) * grad;
    v = beta2 * v + (1 - beta2) * grad.cwiseAbs2();
    param.array() -= step_size * m.array() / (v.array().sqrt() + epsilon);
}

}  // namespace examples
