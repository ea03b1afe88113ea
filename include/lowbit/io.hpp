// lowbit's checkpoint IO (opt-in: needs nlohmann-json, CMake target lowbit::io; <lowbit/lowbit.hpp>
// does not include it).
//
//   SafetensorsFile / SafetensorsWriter   safetensors read (mmap) and write       io/safetensors*.hpp
//   read_mlx_config, save_mlx_config,     MLX config.json's quantization section   io/mlx_config.hpp
//     MlxQuantization, mlx_quantization     (global format, per-layer overrides)
//   load_mlx_linear, load_linear,         MLX quantized checkpoints as             io/mlx_checkpoint.hpp
//     save_mlx_linear, save_linear          AnyQuantizedLinear / Linear
//   GgufFile                              GGUF import: metadata, F32/F16/BF16/     io/gguf.hpp
//                                           Q4_0/Q4_1/Q8_0 tensors
//   save_ternary_linear,                  a deployed BitNet layer (TernaryLinear)  io/ternary_checkpoint.hpp
//     load_ternary_linear                   as packed I2 / TQ1 codes
#pragma once

#include "any_quantized_linear.hpp"
#include "io/dtype.hpp"
#include "io/gguf.hpp"
#include "io/mlx_checkpoint.hpp"
#include "io/mlx_config.hpp"
#include "io/safetensors.hpp"
#include "io/safetensors_writer.hpp"
#include "io/ternary_checkpoint.hpp"
