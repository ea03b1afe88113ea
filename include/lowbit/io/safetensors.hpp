// SafetensorsFile: a safetensors checkpoint mapped read-only, its tensors handed out as byte spans and
// converted to float on request (docs/numerics.md N12.1).
//
//   byte 0        8                      8 + N                                         file end
//   | N (u64 LE) | JSON header (N bytes) | data section ........................................ |
//                 {"__metadata__": {"format": "mlx"},         (optional; string values only, or null)
//                  "w": {"dtype": "F16", "shape": [2, 3],
//                        "data_offsets": [0, 12]}, ...}       (relative to the data section)
//
// Elements are little-endian, row-major (last dimension fastest). The header is parsed with
// nlohmann-json (Debian's nlohmann-json3-dev): a complete, tested JSON parser, so no hand-written one.
//
// Opening maps the file and parses only the header. Before anything is handed out, every tensor is
// checked: a known dtype, a shape whose byte size does not overflow and equals end - begin of its
// data_offsets, offsets inside the data section and not overlapping another tensor's. A header length
// beyond the file, JSON that does not parse or is not an object of such entries, and a non-string
// metadata value are errors too. Gaps between tensors are allowed. Errors are std::invalid_argument
// "lowbit::SafetensorsFile: <file>: tensor '<name>': <fault>"; a file that cannot be opened or mapped
// is std::runtime_error.
#pragma once

#include "../detail/config.hpp"
#include "../errors.hpp"
#include "../matrix_types.hpp"
#include "detail/bytes.hpp"
#include "detail/compiled.hpp"
#include "detail/float16.hpp"
#include "dtype.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json_fwd.hpp>

LOWBIT_BEGIN_NAMESPACE

namespace io_detail {

inline std::string shape_text(std::span<const std::uint64_t> shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

/// Converts `count` little-endian F32, F16 or BF16 elements at `bytes` to float (one pass).
inline void convert_to_float(Dtype dtype, const std::byte* bytes, std::size_t count, float* out) {
    switch (dtype) {
        case Dtype::f32:
            if (count > 0) std::memcpy(out, bytes, count * sizeof(float));
            break;
        case Dtype::f16:
            for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_float(load_le<std::uint16_t>(bytes + 2 * i));
            break;
        case Dtype::bf16:
            for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_float(load_le<std::uint16_t>(bytes + 2 * i));
            break;
        default:
            break;  // callers check is_float_dtype first
    }
}

}  // namespace io_detail

/// One tensor of a SafetensorsFile: a view into the file's bytes, valid while the file object (or a
/// copy of it) lives.
struct SafetensorsTensor {
    std::string_view name;
    Dtype dtype = Dtype::f32;
    std::vector<std::uint64_t> shape;  ///< outermost first; [] for a scalar
    std::span<const std::byte> bytes;  ///< element_count() * dtype_size(dtype) bytes, row-major, little-endian

    std::uint64_t element_count() const noexcept { return bytes.size() / dtype_size(dtype); }

    /// The elements as a span of T without a copy (F16 and BF16 as their std::uint16_t bit patterns).
    /// Throws std::invalid_argument unless dtype is dtype_of<T> and the bytes are aligned for T (lowbit's writer and Python's safetensors align every
    /// tensor; a file from another writer may not be: use to_vector<T>() then).
    template <class T>
    std::span<const T> span() const {
        check_type<T>("span");
        if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(T) != 0)
            throw std::invalid_argument("lowbit::SafetensorsTensor::span: tensor " + io_detail::quoted(name) +
                                        " is not aligned to " + std::to_string(alignof(T)) +
                                        " bytes in the file; use to_vector() for a copy");
        // The mapped bytes hold T's object representation (implicit object creation, P0593).
        return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
    }

    /// A copy of the elements as T (any alignment; F16 and BF16 as std::uint16_t bit patterns). Throws
    /// std::invalid_argument unless dtype is dtype_of<T>.
    template <class T>
    std::vector<T> to_vector() const {
        check_type<T>("to_vector");
        std::vector<T> values(bytes.size() / sizeof(T));
        if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
        return values;
    }

    /// The elements of an F32, F16 or BF16 tensor as float (exact). Throws std::invalid_argument otherwise.
    std::vector<float> to_floats() const {
        if (!is_float_dtype(dtype))
            throw std::invalid_argument("lowbit::SafetensorsTensor::to_floats: tensor " + io_detail::quoted(name) +
                                        " is " + std::string(dtype_name(dtype)) + ", not F32, F16 or BF16");
        std::vector<float> values(static_cast<std::size_t>(element_count()));
        io_detail::convert_to_float(dtype, bytes.data(), values.size(), values.data());
        return values;
    }

private:
    template <class T>
    void check_type(const char* function) const {
        const bool half_bits = std::is_same_v<T, std::uint16_t> && (dtype == Dtype::f16 || dtype == Dtype::bf16);
        if (dtype != dtype_of<T> && !half_bits)
            throw std::invalid_argument(std::string("lowbit::SafetensorsTensor::") + function + ": tensor " +
                                        io_detail::quoted(name) + " is " + std::string(dtype_name(dtype)) +
                                        ", not " + std::string(dtype_name(dtype_of<T>)));
    }
};

/// A safetensors file, mapped read-only (layout and checks at the top of this file). Cheap to copy
/// (copies share the mapping).
class SafetensorsFile {
public:
    /// Maps `path` and parses its header. Throws std::runtime_error when the file cannot be opened or
    /// mapped, lowbit::format_error (naming the file, the tensor and the fault) when it is malformed.
    static SafetensorsFile open(const std::filesystem::path& path) {
        return SafetensorsFile(io_detail::ByteSource::map_file(path, "lowbit::SafetensorsFile"), path.string());
    }

    /// Parses a file already in memory; `bytes` must outlive the returned object and every tensor view.
    /// `label` names the bytes in error messages.
    static SafetensorsFile from_bytes(std::span<const std::byte> bytes, std::string label = "<memory>") {
        return SafetensorsFile(io_detail::ByteSource::borrow(bytes), std::move(label));
    }

    /// The file's path (or label).
    const std::string& path() const noexcept { return label_; }

    /// Tensor names, sorted.
    std::vector<std::string> names() const {
        std::vector<std::string> result;
        result.reserve(entries_.size());
        for (const auto& entry : entries_) result.push_back(entry.name);
        return result;
    }

    std::size_t size() const noexcept { return entries_.size(); }
    bool contains(std::string_view name) const { return find(name) != nullptr; }

    /// The tensor `name`. Throws std::invalid_argument naming the file when there is none.
    SafetensorsTensor tensor(std::string_view name) const {
        const Entry& entry = at(name, "tensor");
        return {entry.name, entry.dtype, entry.shape,
                data_.subspan(static_cast<std::size_t>(entry.begin), static_cast<std::size_t>(entry.end - entry.begin))};
    }

    /// The `__metadata__` map (empty when the file has none).
    const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

    /// A 2-D F32, F16 or BF16 tensor [rows, cols] as a float matrix (exact; one pass over its bytes).
    /// Throws std::invalid_argument for a missing tensor, another dtype or another rank.
    RowMatrixXf to_matrix(std::string_view name) const {
        const SafetensorsTensor t = tensor(name);
        if (!is_float_dtype(t.dtype) || t.shape.size() != 2)
            throw error(t.name, "to_matrix needs a 2-D F32, F16 or BF16 tensor, this one is " +
                                    std::string(dtype_name(t.dtype)) + " " + io_detail::shape_text(t.shape));
        RowMatrixXf matrix(static_cast<Eigen::Index>(t.shape[0]), static_cast<Eigen::Index>(t.shape[1]));
        io_detail::convert_to_float(t.dtype, t.bytes.data(), static_cast<std::size_t>(matrix.size()), matrix.data());
        return matrix;
    }

    /// Any F32, F16 or BF16 tensor's elements as float, row-major (exact).
    std::vector<float> to_vector(std::string_view name) const {
        const SafetensorsTensor t = tensor(name);
        if (!is_float_dtype(t.dtype))
            throw error(t.name, "to_vector needs an F32, F16 or BF16 tensor, this one is " +
                                    std::string(dtype_name(t.dtype)));
        return t.to_floats();
    }

private:
    struct Entry {
        std::string name;
        Dtype dtype;
        std::vector<std::uint64_t> shape;
        std::uint64_t begin;  // relative to the data section
        std::uint64_t end;
    };

    SafetensorsFile(std::shared_ptr<const io_detail::ByteSource> source, std::string label)
        : source_(std::move(source)), label_(std::move(label)) {
        parse();
    }

    format_error error(std::string_view tensor, const std::string& fault) const {
        return format_error("lowbit::SafetensorsFile: " + label_ + ": tensor " + io_detail::quoted(tensor) + ": " +
                            fault);
    }
    format_error file_error(const std::string& fault) const {
        return format_error("lowbit::SafetensorsFile: " + label_ + ": " + fault);
    }

    const Entry* find(std::string_view name) const {
        const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                         [](const Entry& entry, std::string_view key) { return entry.name < key; });
        return it != entries_.end() && it->name == name ? &*it : nullptr;
    }
    const Entry& at(std::string_view name, const char* function) const {
        if (const Entry* entry = find(name)) return *entry;
        throw error(name, std::string(function) + ": no such tensor (the file has " + std::to_string(entries_.size()) +
                              ")");
    }

    /// Parses and checks the header (impl/safetensors.hpp).
    void parse();
    void parse_metadata(const nlohmann::json& value);
    Entry parse_entry(const std::string& name, const nlohmann::json& value) const;

    std::shared_ptr<const io_detail::ByteSource> source_;
    std::string label_;
    std::span<const std::byte> data_;
    std::vector<Entry> entries_;  // sorted by name
    std::map<std::string, std::string> metadata_;
};

LOWBIT_END_NAMESPACE

#if !defined(LOWBIT_EXTERN_IO)
#include "impl/safetensors.hpp"
#endif
