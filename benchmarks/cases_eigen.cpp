// Eigen fp32 matrix products, the baseline every quantized matmul row is compared with:
// out[M, N] = x[M, K] * w[N, K]^T with row-major w (the QuantizedLinear layout), M = 1 being a GEMV.
#include <memory>
#include <string>

#include <Eigen/Core>
#include <lowbit/matrix_types.hpp>

#include "harness.hpp"
#include "shapes.hpp"

namespace lowbit::bench {

void add_eigen_cases(Registry& registry) {
    for (int threads : registry.options().thread_counts()) {
        for (const MatmulShape& shape : matmul_shapes()) {
            Case c;
            c.name = eigen_matmul_name;
            c.shape = shape.label();
            c.threads = threads;
            c.flops = shape.flops();
            c.bytes = shape.float_bytes();
            c.slow = shape.slow();
            c.bandwidth_of = shape.m == 1 ? "bandwidth read dram" : "";
            c.prepare = [shape]() -> Runner {
                using RowMatrix = lowbit::RowMatrixXf;
                auto w = std::make_shared<RowMatrix>(RowMatrix::Random(shape.n, shape.k));
                auto x = std::make_shared<RowMatrix>(RowMatrix::Random(shape.m, shape.k));
                auto out = std::make_shared<RowMatrix>(shape.m, shape.n);
                return [w, x, out] {
                    out->noalias() = *x * w->transpose();
                    keep(out->data());
                };
            };
            registry.add(std::move(c));
        }
    }
}

}  // namespace lowbit::bench
