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
#include <nlohmann/json.hpp>

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

    void parse() {
        const std::span<const std::byte> bytes = source_->bytes();
        if (bytes.size() < 8)
            throw file_error("truncated: " + std::to_string(bytes.size()) + " bytes, the 8-byte header length is missing");
        const auto header_size = io_detail::load_le<std::uint64_t>(bytes.data());
        if (header_size > bytes.size() - 8)
            throw file_error("header length " + std::to_string(header_size) + " is beyond the file (" +
                             std::to_string(bytes.size() - 8) + " bytes follow the length)");
        const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
        data_ = bytes.subspan(8 + static_cast<std::size_t>(header_size));

        nlohmann::json header;
        try {
            header = nlohmann::json::parse(header_begin, header_begin + header_size);
        } catch (const nlohmann::json::exception& e) {
            throw file_error(std::string("the JSON header does not parse: ") + e.what());
        }
        if (!header.is_object()) throw file_error("the JSON header is not an object");

        entries_.reserve(header.size());
        for (const auto& [key, value] : header.items()) {
            if (key == "__metadata__") {
                parse_metadata(value);
                continue;
            }
            entries_.push_back(parse_entry(key, value));
        }
        std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });

        // No two tensors may share a byte (zero-byte tensors share none).
        std::vector<const Entry*> by_offset;
        by_offset.reserve(entries_.size());
        for (const auto& entry : entries_)
            if (entry.end > entry.begin) by_offset.push_back(&entry);
        std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
        for (std::size_t i = 1; i < by_offset.size(); ++i)
            if (by_offset[i]->begin < by_offset[i - 1]->end)
                throw error(by_offset[i]->name, "data_offsets [" + std::to_string(by_offset[i]->begin) + ", " +
                                                    std::to_string(by_offset[i]->end) + "] overlap tensor " +
                                                    io_detail::quoted(by_offset[i - 1]->name) + "'s [" +
                                                    std::to_string(by_offset[i - 1]->begin) + ", " +
                                                    std::to_string(by_offset[i - 1]->end) + "]");
    }

    void parse_metadata(const nlohmann::json& value) {
        if (value.is_null()) return;  // mlx.core.save_safetensors without metadata writes null
        if (!value.is_object()) throw file_error("__metadata__ is not an object");
        for (const auto& [key, item] : value.items()) {
            if (!item.is_string())
                throw file_error("__metadata__ value of " + io_detail::quoted(key) + " is not a string");
            metadata_.emplace(key, item.get<std::string>());
        }
    }

    Entry parse_entry(const std::string& name, const nlohmann::json& value) const {
        if (!value.is_object()) throw error(name, "the header entry is not an object");
        const auto dtype_it = value.find("dtype");
        const auto shape_it = value.find("shape");
        const auto offsets_it = value.find("data_offsets");
        if (dtype_it == value.end() || !dtype_it->is_string()) throw error(name, "no \"dtype\" string");
        if (shape_it == value.end() || !shape_it->is_array()) throw error(name, "no \"shape\" array");
        if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2)
            throw error(name, "no \"data_offsets\" array of two numbers");

        const auto& dtype_text = dtype_it->get_ref<const std::string&>();
        const auto dtype = dtype_from_name(dtype_text);
        if (!dtype) throw error(name, "unknown dtype " + io_detail::quoted(dtype_text));

        Entry entry{name, *dtype, {}, 0, 0};
        std::uint64_t size = dtype_size(*dtype);
        for (const auto& dimension : *shape_it) {
            if (!dimension.is_number_unsigned()) throw error(name, "a shape entry is not a non-negative integer");
            entry.shape.push_back(dimension.get<std::uint64_t>());
            if (entry.shape.back() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                throw error(name, "shape entry " + std::to_string(entry.shape.back()) + " is beyond 2^63 - 1");
            if (!io_detail::multiply(size, entry.shape.back(), size))
                throw error(name, "the byte size of shape " + io_detail::shape_text(entry.shape) + "... of " +
                                      dtype_text + " overflows 64 bits");
        }
        for (const auto& offset : *offsets_it)
            if (!offset.is_number_unsigned()) throw error(name, "a data_offsets entry is not a non-negative integer");
        entry.begin = (*offsets_it)[0].get<std::uint64_t>();
        entry.end = (*offsets_it)[1].get<std::uint64_t>();
        const std::string offsets = "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
        if (entry.begin > entry.end) throw error(name, offsets + " run backwards");
        if (entry.end > data_.size())
            throw error(name, offsets + " are outside the data section (" + std::to_string(data_.size()) + " bytes)");
        if (entry.end - entry.begin != size)
            throw error(name, "shape " + io_detail::shape_text(entry.shape) + " of " + dtype_text + " needs " +
                                  std::to_string(size) + " bytes but " + offsets + " hold " +
                                  std::to_string(entry.end - entry.begin));
        return entry;
    }

    std::shared_ptr<const io_detail::ByteSource> source_;
    std::string label_;
    std::span<const std::byte> data_;
    std::vector<Entry> entries_;  // sorted by name
    std::map<std::string, std::string> metadata_;
};

LOWBIT_END_NAMESPACE
