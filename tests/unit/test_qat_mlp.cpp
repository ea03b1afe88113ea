// Quantization-aware training end to end: a two-layer MLP on a small synthetic task (XOR of four
// Gaussian blobs, not linearly separable) trained in float, and trained with FakeQuantize on both
// weight matrices (4-bit symmetric, calibrated on the current weights every step) and on the hidden
// activations (8-bit asymmetric, moving-average observer), gradients through backward_clamped (the
// clamped STE). The quantized model must come within lowbit::test::qat_accuracy_gap of the float
// model's test accuracy; the same training with the gradient blocked at round (what an autograd that
// treats round as a constant gives) must not reach the float floor.
#include <cmath>
#include <random>

#include <catch2/catch_test_macros.hpp>

#include <lowbit/lowbit.hpp>

#include "support/random.hpp"
#include "support/tolerance.hpp"

namespace {

struct Data {
    Eigen::MatrixXf x;        // [2, N]
    Eigen::VectorXi label;    // [N], 0 or 1
};

Data make_xor(std::mt19937_64& rng, int n) {
    std::normal_distribution<float> noise(0.0f, 0.45f);
    std::uniform_int_distribution<int> quadrant(0, 3);
    Data data{Eigen::MatrixXf(2, n), Eigen::VectorXi(n)};
    for (int i = 0; i < n; ++i) {
        const int q = quadrant(rng);
        const float cx = (q & 1) ? 1.0f : -1.0f;
        const float cy = (q & 2) ? 1.0f : -1.0f;
        data.x(0, i) = cx + noise(rng);
        data.x(1, i) = cy + noise(rng);
        data.label(i) = cx * cy > 0 ? 1 : 0;
    }
    return data;
}

enum class Mode { float32, qat, blocked_gradient };

struct Mlp {
    static constexpr int hidden = 16;
    Eigen::MatrixXf w1, w2;
    Eigen::VectorXf b1, b2;
    lowbit::FakeQuantize<4> w1_quantizer, w2_quantizer;
    lowbit::FakeQuantize<8, false> activation_quantizer{[] {
        lowbit::FakeQuantConfig config;
        config.observer = lowbit::Observer::moving_average;
        config.averaging_constant = 0.1f;
        return config;
    }()};

    explicit Mlp(std::mt19937_64& rng) {
        std::normal_distribution<float> init(0.0f, 1.0f);
        w1 = Eigen::MatrixXf::NullaryExpr(hidden, 2, [&] { return init(rng) * 0.7f; });
        w2 = Eigen::MatrixXf::NullaryExpr(2, hidden, [&] { return init(rng) * 0.05f; });
        b1 = Eigen::VectorXf::Zero(hidden);
        b2 = Eigen::VectorXf::Zero(2);
    }

    /// Logits [2, N]; keeps what backward needs.
    Eigen::MatrixXf forward(const Eigen::MatrixXf& x, Mode mode, bool training) {
        quantized = mode != Mode::float32;
        if (quantized) {
            w1_quantizer.calibrate(w1);
            w2_quantizer.calibrate(w2);
        }
        w1_used = quantized ? w1_quantizer.forward(w1) : w1;
        w2_used = quantized ? w2_quantizer.forward(w2) : w2;
        input = x;
        pre = (w1_used * x).colwise() + b1;
        h = pre.cwiseMax(0.0f);
        if (quantized) {
            if (training || !activation_quantizer.is_initialized()) activation_quantizer.observe(h);
            h_used = activation_quantizer.forward(h);
        } else {
            h_used = h;
        }
        return (w2_used * h_used).colwise() + b2;
    }

    void step(const Eigen::MatrixXf& logits, const Eigen::VectorXi& label, Mode mode, float rate) {
        const auto n = static_cast<float>(logits.cols());
        Eigen::MatrixXf grad = logits;  // softmax cross-entropy gradient
        for (Eigen::Index i = 0; i < logits.cols(); ++i) {
            const Eigen::VectorXf e = (logits.col(i).array() - logits.col(i).maxCoeff()).exp();
            grad.col(i) = e / e.sum();
            grad(label(i), i) -= 1.0f;
        }
        grad /= n;
        Eigen::MatrixXf grad_w2 = grad * h_used.transpose();
        const Eigen::VectorXf grad_b2 = grad.rowwise().sum();
        Eigen::MatrixXf grad_h = w2_used.transpose() * grad;
        if (mode == Mode::qat) {
            grad_h = activation_quantizer.backward_clamped(grad_h, h);
        } else if (mode == Mode::blocked_gradient) {
            grad_h.setZero();
        }
        const Eigen::MatrixXf grad_pre = grad_h.cwiseProduct((pre.array() > 0.0f).cast<float>().matrix());
        Eigen::MatrixXf grad_w1 = grad_pre * input.transpose();
        const Eigen::VectorXf grad_b1 = grad_pre.rowwise().sum();
        if (mode == Mode::qat) {
            grad_w1 = w1_quantizer.backward_clamped(grad_w1, w1);
            grad_w2 = w2_quantizer.backward_clamped(grad_w2, w2);
        } else if (mode == Mode::blocked_gradient) {
            grad_w1.setZero();
            grad_w2.setZero();
        }
        w1 -= rate * grad_w1;
        w2 -= rate * grad_w2;
        b1 -= rate * grad_b1;
        b2 -= rate * grad_b2;
    }

    double accuracy(const Data& data, Mode mode) {
        const Eigen::MatrixXf logits = forward(data.x, mode, false);
        int correct = 0;
        for (Eigen::Index i = 0; i < logits.cols(); ++i) {
            const int predicted = logits(1, i) > logits(0, i) ? 1 : 0;
            correct += predicted == data.label(i) ? 1 : 0;
        }
        return static_cast<double>(correct) / static_cast<double>(logits.cols());
    }

    bool quantized = false;
    Eigen::MatrixXf w1_used, w2_used, input, pre, h, h_used;
};

double train(Mode mode, const Data& train_set, const Data& test_set, std::uint64_t seed) {
    std::mt19937_64 init(seed);
    Mlp model(init);
    for (int epoch = 0; epoch < 400; ++epoch) {
        const Eigen::MatrixXf logits = model.forward(train_set.x, mode, true);
        model.step(logits, train_set.label, mode, 0.5f);
    }
    return model.accuracy(test_set, mode == Mode::float32 ? Mode::float32 : Mode::qat);
}

}  // namespace

TEST_CASE("QAT: a two-layer MLP trained with FakeQuantize reaches the float model's accuracy", "[qat][mlp]") {
    auto rng = lowbit::test::make_rng(501);
    const Data train_set = make_xor(rng, 400);
    const Data test_set = make_xor(rng, 400);
    const std::uint64_t seed = rng();
    const double float_accuracy = train(Mode::float32, train_set, test_set, seed);
    const double qat_accuracy = train(Mode::qat, train_set, test_set, seed);
    const double blocked_accuracy = train(Mode::blocked_gradient, train_set, test_set, seed);
    UNSCOPED_INFO("float " << float_accuracy << ", QAT " << qat_accuracy << ", blocked gradient " << blocked_accuracy);
    CHECK(float_accuracy >= lowbit::test::qat_float_accuracy_floor);
    CHECK(qat_accuracy >= float_accuracy - lowbit::test::qat_accuracy_gap);
    CHECK(blocked_accuracy < lowbit::test::qat_float_accuracy_floor);
}
