// Helpers of the property tests: the iteration count, random choices, values from the edges of float
// (non-finite, the extremes, denormals, signed zeros) sprinkled into ordinary data, and the check that
// a call either returns or throws std::invalid_argument naming its function.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include <catch2/catch_message.hpp>
#include <catch2/catch_test_macros.hpp>

#include <lowbit/matrix_types.hpp>

#include "support/random.hpp"

namespace lowbit::test {

/// LOWBIT_PROPERTY_ITERATIONS, or the default when unset or not a positive number.
inline int iterations() {
    static const int count = [] {
        const char* text = std::getenv("LOWBIT_PROPERTY_ITERATIONS");
        if (text == nullptr) return 25;
        const long value = std::strtol(text, nullptr, 10);
        return value > 0 && value < 100000000 ? static_cast<int>(value) : 25;
    }();
    return count;
}

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

inline int uniform_int(std::mt19937_64& rng, int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
}
inline bool coin(std::mt19937_64& rng, double p = 0.5) {
    return std::bernoulli_distribution(p)(rng);
}

/// A value from the edges of float: non-finite, the extremes, denormals, signed zeros.
inline float hostile_value(std::mt19937_64& rng, bool finite_only) {
    static const float finite_values[] = {
        FLT_MAX, -FLT_MAX, FLT_TRUE_MIN, -FLT_TRUE_MIN,      FLT_MIN,        -FLT_MIN, 0.0f,  -0.0f,
        1e30f,   -1e30f,   1e-30f,       0x1.0p-126f * 3.0f, FLT_MAX / 2.0f, 0.5f,     -0.5f, 2.5f};
    static const float nonfinite_values[] = {nan_value, inf, -inf};
    constexpr int finite_count = static_cast<int>(sizeof finite_values / sizeof finite_values[0]);
    if (!finite_only && coin(rng, 0.3)) return nonfinite_values[uniform_int(rng, 0, 2)];
    return finite_values[uniform_int(rng, 0, finite_count - 1)];
}

/// n floats: uniform with a random magnitude, each replaced by a hostile value with a random rate
/// (often 0, so plain data is well covered too).
inline std::vector<float> sprinkled(std::mt19937_64& rng, std::size_t n, bool finite_only) {
    const float magnitude = std::pow(10.0f, static_cast<float>(uniform_int(rng, -6, 6)));
    const double rates[] = {0.0, 0.0, 0.02, 0.2, 1.0};
    const double rate = rates[uniform_int(rng, 0, 4)];
    std::vector<float> values = uniform_floats(rng, n, -magnitude, magnitude);
    for (float& value : values)
        if (rate > 0.0 && coin(rng, rate)) value = hostile_value(rng, finite_only);
    return values;
}

inline bool all_finite(std::span<const float> values) {
    return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

/// Runs fn; true when it returned, false when it threw std::invalid_argument (or a derived type).
/// Any other exception fails the test with its message.
template <class Fn>
bool returns_or_rejects(Fn&& fn, std::string* message = nullptr) {
    try {
        fn();
        return true;
    } catch (const std::invalid_argument& error) {
        if (message != nullptr) *message = error.what();
        INFO("rejected: " << error.what());
        CHECK(std::string(error.what()).rfind("lowbit::", 0) == 0);  // every message names its function
        return false;
    } catch (const std::exception& error) {
        FAIL("an exception not derived from std::invalid_argument: " << error.what());
    } catch (...) {
        FAIL("a non-standard exception");
    }
    return false;
}

/// A random row-major matrix with sprinkles.
inline RowMatrixXf sprinkled_matrix(std::mt19937_64& rng, Eigen::Index rows, Eigen::Index cols, bool finite_only) {
    const std::vector<float> values = sprinkled(rng, static_cast<std::size_t>(rows * cols), finite_only);
    return Eigen::Map<const RowMatrixXf>(values.data(), rows, cols);
}

}  // namespace lowbit::test
