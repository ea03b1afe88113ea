// Dtype: the element types of checkpoint tensors, named as safetensors names them ("F16", "U32", ...).
#pragma once

#include "../detail/config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

LOWBIT_BEGIN_NAMESPACE

/// Element type of a stored tensor. Every one has a whole number of bytes per element.
enum class Dtype : std::uint8_t {
    boolean,  ///< "BOOL", one byte
    u8, i8, u16, i16, u32, i32, u64, i64,
    f16,      ///< IEEE binary16
    bf16,     ///< bfloat16 (the top half of an f32)
    f32, f64,
    f8_e4m3, f8_e5m2, f8_e8m0,  ///< 8-bit floats (listed and sized; lowbit does not convert them)
};

namespace io_detail {

struct DtypeInfo {
    Dtype dtype;
    std::string_view name;
    std::size_t size;
};

inline constexpr std::array<DtypeInfo, 16> dtype_table{{
    {Dtype::boolean, "BOOL", 1}, {Dtype::u8, "U8", 1},     {Dtype::i8, "I8", 1},     {Dtype::u16, "U16", 2},
    {Dtype::i16, "I16", 2},      {Dtype::u32, "U32", 4},   {Dtype::i32, "I32", 4},   {Dtype::u64, "U64", 8},
    {Dtype::i64, "I64", 8},      {Dtype::f16, "F16", 2},   {Dtype::bf16, "BF16", 2}, {Dtype::f32, "F32", 4},
    {Dtype::f64, "F64", 8},      {Dtype::f8_e4m3, "F8_E4M3", 1}, {Dtype::f8_e5m2, "F8_E5M2", 1},
    {Dtype::f8_e8m0, "F8_E8M0", 1},
}};

}  // namespace io_detail

/// The safetensors name of `dtype` ("F32", "BF16", ...).
constexpr std::string_view dtype_name(Dtype dtype) noexcept {
    return io_detail::dtype_table[static_cast<std::size_t>(dtype)].name;
}

/// Bytes per element.
constexpr std::size_t dtype_size(Dtype dtype) noexcept {
    return io_detail::dtype_table[static_cast<std::size_t>(dtype)].size;
}

/// The Dtype named `name` exactly (case-sensitive, as safetensors), or nullopt.
constexpr std::optional<Dtype> dtype_from_name(std::string_view name) noexcept {
    for (const auto& info : io_detail::dtype_table)
        if (info.name == name) return info.dtype;
    return std::nullopt;
}

/// True for the float types lowbit converts to and from float: F32, F16, BF16.
constexpr bool is_float_dtype(Dtype dtype) noexcept {
    return dtype == Dtype::f32 || dtype == Dtype::f16 || dtype == Dtype::bf16;
}

/// The Dtype stored as the C++ type T (std::uint8_t -> U8, float -> F32, ...).
template <class T>
inline constexpr Dtype dtype_of = [] {
    if constexpr (std::is_same_v<T, std::uint8_t>) return Dtype::u8;
    else if constexpr (std::is_same_v<T, std::int8_t>) return Dtype::i8;
    else if constexpr (std::is_same_v<T, std::uint16_t>) return Dtype::u16;
    else if constexpr (std::is_same_v<T, std::int16_t>) return Dtype::i16;
    else if constexpr (std::is_same_v<T, std::uint32_t>) return Dtype::u32;
    else if constexpr (std::is_same_v<T, std::int32_t>) return Dtype::i32;
    else if constexpr (std::is_same_v<T, std::uint64_t>) return Dtype::u64;
    else if constexpr (std::is_same_v<T, std::int64_t>) return Dtype::i64;
    else if constexpr (std::is_same_v<T, float>) return Dtype::f32;
    else if constexpr (std::is_same_v<T, double>) return Dtype::f64;
    else static_assert(sizeof(T) == 0, "lowbit::dtype_of: no Dtype stores this C++ type");
}();

LOWBIT_END_NAMESPACE
