// Replayable randomness for tests: every generator is seeded from Catch2's --rng-seed (which Catch2
// prints at the start of the run) mixed with a per-use salt, so two tests never share a stream and a
// failure replays with the printed seed. Never std::random_device.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

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

}  // namespace lowbit::test
