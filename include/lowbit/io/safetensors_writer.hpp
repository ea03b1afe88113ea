// SafetensorsWriter: collects named tensors and string metadata, then writes one safetensors file that
// SafetensorsFile, Python's safetensors and mlx.core.load read (layout in safetensors.hpp).
//
// Tensors are laid out as Python's safetensors lays them out: sorted by element size (largest first),
// then by name, back to back, after a JSON header padded with spaces so the data section starts at a
// multiple of 8 bytes. Every tensor is then aligned for its dtype, so SafetensorsTensor::span works on
// the files written here. Floats written as F16 or BF16 are rounded to nearest even (as MLX's cast);
// floats that came from F16 / BF16 come back bit for bit.
#pragma once

#include "../detail/config.hpp"
#include "detail/compiled.hpp"
#include "detail/float16.hpp"
#include "dtype.hpp"
#include "safetensors.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

/// Builds a safetensors file in memory; write() or to_bytes() emits it. Tensors are copied when added.
class SafetensorsWriter {
public:
    /// Adds raw little-endian bytes of `dtype` with `shape`. Throws std::invalid_argument for an empty,
    /// duplicate or reserved ("__metadata__") name, or a byte count that disagrees with shape and dtype.
    void add(std::string name, Dtype dtype, std::vector<std::uint64_t> shape, std::span<const std::byte> bytes) {
        std::uint64_t size = dtype_size(dtype);
        for (const auto dimension : shape)
            if (!io_detail::multiply(size, dimension, size))
                throw std::invalid_argument("lowbit::SafetensorsWriter::add: tensor " + io_detail::quoted(name) +
                                            ": shape " + io_detail::shape_text(shape) + " overflows");
        if (size != bytes.size())
            throw std::invalid_argument("lowbit::SafetensorsWriter::add: tensor " + io_detail::quoted(name) +
                                        ": shape " + io_detail::shape_text(shape) + " of " +
                                        std::string(dtype_name(dtype)) + " needs " + std::to_string(size) +
                                        " bytes, got " + std::to_string(bytes.size()));
        check_name(name);
        tensors_.push_back({std::move(name), dtype, std::move(shape), {bytes.begin(), bytes.end()}});
    }

    /// Adds a contiguous range of numbers (std::vector, std::span, std::array...) with `shape`.
    /// Floats may be stored as F32, F16 or BF16 (rounded to nearest even); any other element type is
    /// stored as dtype_of<T> (U8, I8, U32, I32, I64...) and `dtype` must be that one.
    template <std::ranges::contiguous_range Range>
    void add(std::string name, const Range& values, std::vector<std::uint64_t> shape,
             Dtype dtype = dtype_of<std::ranges::range_value_t<Range>>) {
        using T = std::ranges::range_value_t<Range>;
        const std::span<const T> elements(std::ranges::data(values), std::ranges::size(values));
        const std::vector<std::byte> bytes = encode(elements.data(), elements.size(), dtype, name);
        add(std::move(name), dtype, std::move(shape), bytes);
    }

    /// Adds an Eigen matrix [rows, cols] (any storage order; a compile-time column vector becomes a 1-D
    /// tensor [rows]) in row-major order. Float scalars may be stored as F32, F16 or BF16; other scalars
    /// (std::uint32_t codes, ...) as dtype_of<Scalar>.
    template <class Derived>
    void add(std::string name, const Eigen::MatrixBase<Derived>& matrix,
             Dtype dtype = dtype_of<typename Derived::Scalar>) {
        using T = typename Derived::Scalar;
        using Row = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        const Row row_major = matrix;  // the row-major element order
        std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(matrix.rows())};
        if constexpr (Derived::ColsAtCompileTime != 1) shape.push_back(static_cast<std::uint64_t>(matrix.cols()));
        const std::vector<std::byte> bytes =
            encode(row_major.data(), static_cast<std::size_t>(row_major.size()), dtype, name);
        add(std::move(name), dtype, std::move(shape), bytes);
    }

    /// Sets one `__metadata__` entry (replacing an earlier value of `key`).
    void set_metadata(const std::string& key, std::string value) { metadata_[key] = std::move(value); }
    /// Replaces the whole `__metadata__` map.
    void set_metadata(std::map<std::string, std::string> metadata) { metadata_ = std::move(metadata); }

    bool contains(std::string_view name) const {
        return std::any_of(tensors_.begin(), tensors_.end(), [&](const Tensor& t) { return t.name == name; });
    }
    std::size_t size() const noexcept { return tensors_.size(); }

    /// The whole file as bytes. Throws std::invalid_argument when a tensor name or metadata string is
    /// not valid UTF-8 (JSON needs it).
    std::vector<std::byte> to_bytes() const;

    /// Writes the file to `path` (replacing it). Throws std::runtime_error naming the path on an I/O
    /// error, std::invalid_argument as to_bytes.
    void write(const std::filesystem::path& path) const;

private:
    struct Tensor {
        std::string name;
        Dtype dtype;
        std::vector<std::uint64_t> shape;
        std::vector<std::byte> bytes;
    };

    void check_name(const std::string& name) const {
        if (name.empty() || name == "__metadata__")
            throw std::invalid_argument("lowbit::SafetensorsWriter::add: tensor name " + io_detail::quoted(name) +
                                        " is empty or reserved");
        if (contains(name))
            throw std::invalid_argument("lowbit::SafetensorsWriter::add: tensor " + io_detail::quoted(name) +
                                        " was already added");
    }

    /// `count` elements of T as little-endian bytes of `dtype` (float to F32/F16/BF16, else T's own dtype).
    template <class T>
    static std::vector<std::byte> encode(const T* values, std::size_t count, Dtype dtype,
                                         const std::string& name) {
        std::vector<std::byte> bytes;
        if constexpr (std::is_same_v<T, float>) {
            if (!is_float_dtype(dtype))
                throw std::invalid_argument("lowbit::SafetensorsWriter::add: tensor " + io_detail::quoted(name) +
                                            ": floats are written as F32, F16 or BF16, not " +
                                            std::string(dtype_name(dtype)));
            if (dtype != Dtype::f32) {
                bytes.resize(count * 2);
                for (std::size_t i = 0; i < count; ++i) {
                    const std::uint16_t half =
                        dtype == Dtype::f16 ? io_detail::float_to_f16(values[i]) : io_detail::float_to_bf16(values[i]);
                    std::memcpy(bytes.data() + 2 * i, &half, 2);
                }
                return bytes;
            }
        } else if (dtype != dtype_of<T>) {
            throw std::invalid_argument("lowbit::SafetensorsWriter::add: tensor " + io_detail::quoted(name) + ": " +
                                        std::string(dtype_name(dtype_of<T>)) + " values cannot be written as " +
                                        std::string(dtype_name(dtype)));
        }
        bytes.resize(count * sizeof(T));
        if (count > 0) std::memcpy(bytes.data(), values, count * sizeof(T));
        return bytes;
    }

    std::vector<Tensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

LOWBIT_END_NAMESPACE

#if !defined(LOWBIT_EXTERN_IO)
#include "impl/safetensors_writer.hpp"
#endif
