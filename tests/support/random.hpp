// Replayable randomness for tests: every generator is seeded from Catch2's --rng-seed (which Catch2
// prints at the start of the run) mixed with a per-use salt, so two tests never share a stream and a
// failure replays with the printed seed. Never std::random_device.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <Eigen/Core>

#include <catch2/catch_get_random_seed.hpp>
#include <catch2/catch_message.hpp>

namespace lowbit::test {

/// A generator for one test or one section; `salt` tells streams apart (use a different one per use).
inline std::mt19937_64 make_rng(std::uint64_t salt) {
    const std::uint64_t seed = Catch::getSeed();
    UNSCOPED_INFO("rng seed " << seed << ", salt " << salt);
    std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                           static_cast<std::uint32_t>(salt), static_cast<std::uint32_t>(salt >> 32)};
    return std::mt19937_64(sequence);
}

/// `count` floats uniform in [low, high).
inline std::vector<float> uniform_floats(std::mt19937_64& rng, std::size_t count, float low, float high) {
    std::uniform_real_distribution<float> distribution(low, high);
    std::vector<float> values(count);
    for (auto& value : values) value = distribution(rng);
    return values;
}

/// A weight matrix [rows, cols] uniform in [-1, 1) plus a random offset in [-1.5, 1.5) on two rows of
/// every three, so single-sign groups (positive and negative MLX scales) occur.
inline Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> random_weights(std::mt19937_64& rng,
                                                                                          Eigen::Index rows,
                                                                                          Eigen::Index cols) {
    std::uniform_real_distribution<float> offset(-1.5f, 1.5f), value(-1.0f, 1.0f);
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> w(rows, cols);
    for (Eigen::Index r = 0; r < rows; ++r) {
        const float shift = r % 3 == 0 ? 0.0f : offset(rng);
        for (Eigen::Index c = 0; c < cols; ++c) w(r, c) = value(rng) + shift;
    }
    return w;
}

}  // namespace lowbit::test
