// The matmul shapes every matmul case uses, so lowbit's rows and the Eigen baseline rows line up.
#pragma once

#include <string>
#include <vector>

namespace lowbit::bench {

/// out[M, N] = x[M, K] * w[N, K]^T. N x K are the weight shapes of a 7B-class model's attention
/// projection (4096 x 4096) and MLP up projection (11008 x 4096).
struct MatmulShape {
    int m, n, k;
    std::string label() const {
        return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
    }
    double flops() const { return 2.0 * m * n * k; }
    /// Bytes of x, w and out in fp32.
    double float_bytes() const { return 4.0 * (double(m) * k + double(n) * k + double(m) * n); }
    /// Cases over 10 GFLOP are left out of --quick (it should stay near two minutes on 2 cores).
    bool slow() const { return flops() > 1e10; }
};

inline const char* const eigen_matmul_name = "matmul eigen fp32";

inline std::vector<MatmulShape> matmul_shapes() {
    std::vector<MatmulShape> shapes;
    for (int n : {4096, 11008})
        for (int m : {1, 8, 32, 128, 512}) shapes.push_back({m, n, 4096});
    return shapes;
}

}  // namespace lowbit::bench
