// Choosing the next token from a row of logits: greedy (the first largest logit, as llama.cpp's greedy
// sampler), or top-p (nucleus) sampling at a temperature with a seeded std::mt19937_64.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace llm {

/// The index of the first largest logit.
inline std::int32_t greedy(const Eigen::Ref<const Eigen::RowVectorXf>& logits) {
    Eigen::Index best = 0;
    for (Eigen::Index i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[best]) best = i;
    return static_cast<std::int32_t>(best);
}

/// Samples from softmax(logits / temperature) restricted to the smallest set of most likely tokens
/// whose probabilities sum to at least top_p. temperature <= 0 is greedy. Throws std::invalid_argument
/// for top_p outside (0, 1].
class Sampler {
public:
    Sampler(float temperature, float top_p, std::uint64_t seed)
        : temperature_(temperature), top_p_(top_p), random_(seed) {
        if (!(top_p > 0.0f && top_p <= 1.0f))
            throw std::invalid_argument("llm::Sampler: top_p must be in (0, 1], got " + std::to_string(top_p));
    }

    std::int32_t operator()(const Eigen::Ref<const Eigen::RowVectorXf>& logits) {
        if (temperature_ <= 0.0f) return greedy(logits);
        const float max = logits.maxCoeff();
        std::vector<std::int32_t> order(static_cast<std::size_t>(logits.size()));
        std::iota(order.begin(), order.end(), 0);
        std::vector<double> probability(order.size());
        double sum = 0;
        for (std::size_t i = 0; i < order.size(); ++i) {
            probability[i] = std::exp(static_cast<double>(logits[static_cast<Eigen::Index>(i)] - max) / temperature_);
            sum += probability[i];
        }
        // Most likely first, ties by the lower id. Only as many tokens are sorted as the nucleus needs:
        // the first 64, then twice as many until their mass reaches top_p (the same order a full sort
        // gives, since the order is total).
        const auto more_likely = [&](std::int32_t a, std::int32_t b) {
            const double pa = probability[static_cast<std::size_t>(a)], pb = probability[static_cast<std::size_t>(b)];
            return pa > pb || (pa == pb && a < b);
        };
        std::size_t kept = 0, sorted = 0;
        double mass = 0;
        while (mass < top_p_ * sum && kept < order.size()) {
            if (kept == sorted) {
                sorted = std::min(order.size(), std::max<std::size_t>(64, 2 * sorted));
                std::partial_sort(order.begin() + static_cast<std::ptrdiff_t>(kept),
                                  order.begin() + static_cast<std::ptrdiff_t>(sorted), order.end(), more_likely);
            }
            mass += probability[static_cast<std::size_t>(order[kept++])];
        }
        std::uniform_real_distribution<double> uniform(0.0, mass);
        double pick = uniform(random_);
        for (std::size_t i = 0; i < kept; ++i) {
            pick -= probability[static_cast<std::size_t>(order[i])];
            if (pick <= 0) return order[i];
        }
        return order[kept - 1];
    }

private:
    float temperature_;
    float top_p_;
    std::mt19937_64 random_;
};

}  // namespace llm
