// The exceptions lowbit throws, so that a caller can tell a bad file, a bad argument and a numerical
// failure apart (docs/numerics.md N15):
//   std::invalid_argument    a bad argument: a shape or size, an option out of range, a refused value;
//   lowbit::format_error     a malformed file: safetensors, GGUF, an MLX config.json or checkpoint layer;
//   lowbit::numerical_error  a computation that cannot finish in float on its input (GPTQ's H not
//                            positive definite at any damping tried, its error feedback overflowing);
//   std::runtime_error       a file the operating system cannot open, stat or map.
// Both lowbit types derive from std::invalid_argument, which they were thrown as before they existed,
// so `catch (const std::invalid_argument&)` still catches them; catch them first to tell them apart.
#pragma once

#include <stdexcept>

#include "detail/config.hpp"

LOWBIT_BEGIN_NAMESPACE

/// A file whose bytes or JSON do not follow its format; the message names the file, the tensor or key,
/// and the fault.
class format_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

/// A computation that cannot finish in float on valid-shaped input; the message names the function, the
/// row or column, and the value that failed.
class numerical_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

LOWBIT_END_NAMESPACE
