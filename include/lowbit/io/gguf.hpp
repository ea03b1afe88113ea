// GgufFile: a GGUF file (llama.cpp / ggml, versions 2 and 3, little-endian) mapped read-only; its
// metadata, tensor infos, F32 / F16 / BF16 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 and k-quant (q2_K to q6_K)
// tensors as float matrices, and Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / q4_K / q5_K tensors as exact
// QuantizedMatrix<32, Bits>, q2_K / q3_K / q6_K as exact QuantizedMatrix<16, Bits> (docs/numerics.md N12;
// block layouts in gguf_blocks.hpp and gguf_kquants.hpp).
//
//   | "GGUF" | version u32 | tensor_count u64 | kv_count u64 |
//   | kv_count x  (key: string, value_type u32, value) |      string = | length u64 | bytes |
//   | tensor_count x (name: string, n_dims u32, ne[n_dims] u64, type u32, offset u64) |
//   | padding to `general.alignment` (u32 metadata, default 32) |
//   | data section: each tensor at its offset (a multiple of the alignment), relative to here |
//
//   value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string,
//                9 array (element type u32, count u64, elements), 10 u64, 11 i64, 12 f64
//
// Dimensions are listed innermost first: ne[0] is the row length (the fastest index), so a tensor
// with ne = [in, out] is a row-major matrix [out, in]; to_matrix returns [ne[1] * ne[2] * ..., ne[0]].
//
// Opening parses the header (metadata included) and checks it before anything is handed out: the
// magic, the version, every count and string length against the bytes left, value types, duplicate
// keys or names, at most 4 dimensions, a known tensor type, ne[0] a multiple of the type's block size,
// byte sizes that do not overflow, offsets aligned, inside the data section and not overlapping.
// Errors are std::invalid_argument "lowbit::GgufFile: <file>: ..." naming the tensor or key; a file that
// cannot be opened or mapped is std::runtime_error.
#pragma once

#include "../detail/config.hpp"
#include "../detail/mlx_affine/packing.hpp"
#include "../detail/threading/parallel.hpp"
#include "../errors.hpp"
#include "../matrix_types.hpp"
#include "../quantized_matrix.hpp"
#include "detail/bytes.hpp"
#include "gguf_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>

LOWBIT_BEGIN_NAMESPACE

/// The type of a GGUF metadata value (gguf.h `enum gguf_type`).
enum class GgufType : std::uint32_t {
    uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6, boolean = 7,
    string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

/// One GGUF metadata value: a number, bool, string, or an array of values of one type.
class GgufValue {
public:
    GgufType type() const noexcept { return type_; }
    /// The element type of an array (meaningless otherwise).
    GgufType element_type() const noexcept { return element_type_; }
    bool is_array() const noexcept { return type_ == GgufType::array; }
    bool is_string() const noexcept { return type_ == GgufType::string; }

    /// An unsigned or non-negative signed integer. Throws std::invalid_argument otherwise.
    std::uint64_t as_uint() const {
        if (const auto* u = std::get_if<std::uint64_t>(&scalar_)) return *u;
        if (const auto* i = std::get_if<std::int64_t>(&scalar_); i && *i >= 0) return static_cast<std::uint64_t>(*i);
        throw mismatch("a non-negative integer");
    }
    /// A signed integer, or an unsigned one up to 2^63 - 1.
    std::int64_t as_int() const {
        if (const auto* i = std::get_if<std::int64_t>(&scalar_)) return *i;
        if (const auto* u = std::get_if<std::uint64_t>(&scalar_);
            u && *u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return static_cast<std::int64_t>(*u);
        throw mismatch("an integer");
    }
    /// A float32 or float64 value.
    double as_double() const {
        if (const auto* d = std::get_if<double>(&scalar_)) return *d;
        throw mismatch("a float");
    }
    bool as_bool() const {
        if (const auto* b = std::get_if<bool>(&scalar_)) return *b;
        throw mismatch("a bool");
    }
    const std::string& as_string() const {
        if (const auto* s = std::get_if<std::string>(&scalar_)) return *s;
        throw mismatch("a string");
    }
    const std::vector<GgufValue>& as_array() const {
        if (is_array()) return elements_;
        throw mismatch("an array");
    }

    /// A short text for display: strings quoted, arrays as [a, b, ... (N)] with at most `max_elements`.
    std::string to_string(std::size_t max_elements = 6) const {
        if (is_array()) {
            std::string text = "[";
            for (std::size_t i = 0; i < elements_.size() && i < max_elements; ++i)
                text += (i ? ", " : "") + elements_[i].to_string(max_elements);
            if (elements_.size() > max_elements) text += ", ... (" + std::to_string(elements_.size()) + " elements)";
            return text + "]";
        }
        return std::visit(
            [](const auto& value) -> std::string {
                using T = std::decay_t<decltype(value)>;
                if constexpr (std::is_same_v<T, std::string>) return io_detail::quoted(value);
                else if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
                else if constexpr (std::is_same_v<T, double>) {
                    char buffer[32];
                    std::snprintf(buffer, sizeof buffer, "%.9g", value);
                    return buffer;
                } else return std::to_string(value);
            },
            scalar_);
    }

private:
    friend class GgufFile;
    std::invalid_argument mismatch(const char* wanted) const {
        return std::invalid_argument("lowbit::GgufValue: the value " + to_string(3) + " (type " +
                                     std::to_string(static_cast<std::uint32_t>(type_)) + ") is not " + wanted);
    }

    GgufType type_ = GgufType::uint8;
    GgufType element_type_ = GgufType::uint8;
    std::variant<std::uint64_t, std::int64_t, double, bool, std::string> scalar_;
    std::vector<GgufValue> elements_;
};

/// One tensor's entry in the GGUF header.
struct GgufTensorInfo {
    std::string name;
    std::vector<std::uint64_t> dims;  ///< ne[0], ne[1], ...: innermost (row length) first
    GgmlType type = GgmlType::f32;
    std::uint64_t offset = 0;  ///< relative to the data section
    std::uint64_t size = 0;    ///< bytes

    std::uint64_t element_count() const noexcept {
        std::uint64_t count = 1;
        for (const auto d : dims) count *= d;  // checked when the file was opened
        return count;
    }
    std::uint64_t row_length() const noexcept { return dims.empty() ? 1 : dims[0]; }
    std::uint64_t row_count() const noexcept { return row_length() == 0 ? 0 : element_count() / row_length(); }
};

/// A GGUF file, mapped read-only (layout and checks at the top of this file). Copies share the mapping.
class GgufFile {
public:
    /// Maps `path` and parses its header. Throws std::runtime_error when it cannot be opened or mapped,
    /// lowbit::format_error (naming the file, the tensor or key, and the fault) when it is malformed.
    static GgufFile open(const std::filesystem::path& path) {
        return GgufFile(io_detail::ByteSource::map_file(path, "lowbit::GgufFile"), path.string());
    }
    /// Parses a file already in memory; `bytes` must outlive the returned object.
    static GgufFile from_bytes(std::span<const std::byte> bytes, std::string label = "<memory>") {
        return GgufFile(io_detail::ByteSource::borrow(bytes), std::move(label));
    }

    const std::string& path() const noexcept { return label_; }
    std::uint32_t version() const noexcept { return version_; }
    std::uint64_t alignment() const noexcept { return alignment_; }

    /// Metadata by key (sorted).
    const std::map<std::string, GgufValue, std::less<>>& metadata() const noexcept { return metadata_; }

    /// Tensor names in file order.
    std::vector<std::string> tensor_names() const {
        std::vector<std::string> names;
        names.reserve(tensors_.size());
        for (const auto& tensor : tensors_) names.push_back(tensor.name);
        return names;
    }
    bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }
    const std::vector<GgufTensorInfo>& tensor_infos() const noexcept { return tensors_; }
    const GgufTensorInfo& tensor_info(std::string_view name) const { return tensors_[find(name)]; }
    GgmlType tensor_type(std::string_view name) const { return tensor_info(name).type; }

    /// The tensor's bytes as stored (valid while this object or a copy lives).
    std::span<const std::byte> tensor_bytes(std::string_view name) const {
        const auto& info = tensor_info(name);
        return data_.subspan(static_cast<std::size_t>(info.offset), static_cast<std::size_t>(info.size));
    }

    /// An F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, q2_K, q3_K, q4_K, q5_K or q6_K tensor as a float matrix [ne[1]
    /// * ne[2] *
    /// ..., ne[0]], every value equal to ggml's own dequantization bit for bit. One pass over the bytes (threads:
    /// lowbit::num_threads()). Throws std::invalid_argument naming the tensor and its type for another type.
    RowMatrixXf to_matrix(std::string_view name) const {
        const auto& info = convertible_tensor(name);
        const auto rows = static_cast<Eigen::Index>(info.row_count());
        RowMatrixXf matrix(rows, static_cast<Eigen::Index>(info.row_length()));
        detail::parallel_for(static_cast<std::size_t>(rows), detail::rows_per_range(matrix.cols()),
                             [&](std::size_t begin, std::size_t end) {
                                 for (std::size_t r = begin; r < end; ++r)
                                     dequantize_row_into(info, r,
                                                         matrix.data() + r * static_cast<std::size_t>(matrix.cols()));
                             });
        return matrix;
    }

    /// The rows `row_ids` of to_matrix(name), in their order (ggml's get_rows: an embedding lookup that
    /// converts only the rows it reads). Throws as to_matrix, and std::out_of_range naming the tensor for
    /// a row outside [0, rows).
    template <class RowIds>
    RowMatrixXf to_matrix_rows(std::string_view name, const RowIds& row_ids) const {
        const auto& info = convertible_tensor(name);
        RowMatrixXf matrix(static_cast<Eigen::Index>(std::size(row_ids)), static_cast<Eigen::Index>(info.row_length()));
        Eigen::Index out = 0;
        for (const auto id : row_ids) {
            if (std::cmp_less(id, 0) || std::cmp_greater_equal(id, info.row_count()))
                throw std::out_of_range("lowbit::GgufFile: " + label_ + ": tensor " + io_detail::quoted(info.name) +
                                        ": row " + std::to_string(id) + " outside [0, " +
                                        std::to_string(info.row_count()) + ")");
            dequantize_row_into(info, static_cast<std::size_t>(id), matrix.row(out++).data());
        }
        return matrix;
    }

    /// The tensor as the QuantizedMatrix (lowbit affine) whose dequantize() equals to_matrix(name) value
    /// for value (N12.3's mapping; see gguf_blocks.hpp for the one exception, the sign of some zeros):
    ///   - groups of 32 (a block, or a k-quant sub-block): Q4_0, Q4_1, q4_K at Bits in {4, 5, 6, 8};
    ///     Q5_0, Q5_1, q5_K at Bits in {5, 6, 8}; Q8_0 at Bits = 8;
    ///   - groups of 16 (a k-quant sub-block): q2_K at Bits in {2, 4, 6}; q3_K at Bits in {4, 6} (its
    ///     3-bit codes widened); q6_K at Bits = 6.
    /// Throws std::invalid_argument for another type, a GroupSize other than the type's, a Bits that
    /// cannot hold the codes, or a Q4_0 / Q5_0 / Q8_0 / q3_K / q6_K block whose scale d is Inf or NaN
    /// (naming the block).
    template <int GroupSize, int Bits>
    QuantizedMatrix<GroupSize, Bits> to_quantized(std::string_view name) const {
        static_assert(GroupSize == 32 || GroupSize == 16,
                      "lowbit::GgufFile::to_quantized: ggml's blocks and k-quant sub-blocks are groups of 32 or 16");
        const auto& info = tensor_info(name);
        const bool q4 = info.type == GgmlType::q4_0 || info.type == GgmlType::q4_1 || info.type == GgmlType::q4_k;
        const bool q5 = info.type == GgmlType::q5_0 || info.type == GgmlType::q5_1 || info.type == GgmlType::q5_k;
        const bool q16 = info.type == GgmlType::q2_k || info.type == GgmlType::q3_k || info.type == GgmlType::q6_k;
        const bool kquant32 = info.type == GgmlType::q4_k || info.type == GgmlType::q5_k;
        const bool signed_kquant = info.type == GgmlType::q3_k || info.type == GgmlType::q6_k;
        if (!q4 && !q5 && !q16 && info.type != GgmlType::q8_0)
            throw tensor_error(info.name, "type " + std::string(ggml_type_name(info.type)) +
                                              " has no exact QuantizedMatrix form (supported: q4_0, q4_1, q5_0, q5_1, "
                                              "q8_0, q2_K, q3_K, q4_K, q5_K, q6_K)");
        const int group_size = q16 ? 16 : 32;
        if (GroupSize != group_size)
            throw tensor_error(info.name, std::string(ggml_type_name(info.type)) +
                                              " needs GroupSize = " + std::to_string(group_size) +
                                              ", got GroupSize = " + std::to_string(GroupSize));
        const int code_bits = info.type == GgmlType::q2_k   ? 2
                              : info.type == GgmlType::q3_k ? 3
                              : info.type == GgmlType::q6_k ? 6
                              : q4                          ? 4
                              : q5                          ? 5
                                                            : 8;
        if (Bits < code_bits || (code_bits == 8 && Bits != 8))
            throw tensor_error(info.name, std::string(ggml_type_name(info.type)) + " codes need " +
                                              (code_bits == 8 ? "Bits = 8" : "Bits >= " + std::to_string(code_bits)) +
                                              ", got Bits = " + std::to_string(Bits));
        const auto rows = static_cast<Eigen::Index>(info.row_count());
        const auto cols = static_cast<Eigen::Index>(info.row_length());
        if (rows == 0 || cols == 0) throw tensor_error(info.name, "is empty (dims " + dims_text(info.dims) + ")");
        const Eigen::Index groups = cols / GroupSize;
        constexpr Eigen::Index words_per_group = GroupSize * Bits / 32;
        QuantizedMatrix<GroupSize, Bits> result;
        result.codes.resize(rows, groups * words_per_group);
        result.scales.resize(rows, groups);
        result.biases.resize(rows, groups);
        const std::uint64_t block_bytes = io_detail::ggml_type_info(static_cast<std::uint32_t>(info.type))->type_size;
        const std::byte* bytes = data_.data() + info.offset;
        detail::parallel_for(static_cast<std::size_t>(rows), detail::rows_per_range(cols),
                             [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r) {
                const auto row = static_cast<Eigen::Index>(r);
                for (Eigen::Index g = 0; g < groups; ++g) {
                    std::uint32_t* words = &result.codes(row, g * words_per_group);
                    if (kquant32 || q16) {  // sub-block g % subs of super-block g / subs of the row
                        constexpr Eigen::Index subs = static_cast<Eigen::Index>(io_detail::kquant_block) / GroupSize;
                        const std::byte* block = bytes + (r * static_cast<std::uint64_t>(groups / subs) +
                                                          static_cast<std::uint64_t>(g / subs)) *
                                                             block_bytes;
                        const auto sub_block = static_cast<std::size_t>(g % subs);
                        // q3_K and q6_K have a bias -o * scale: a non-finite d has no exact form (as Q4_0's).
                        if (signed_kquant && sub_block == 0) {
                            const float d =
                                info.type == GgmlType::q3_k ? io_detail::q3k_d(block) : io_detail::q6k_d(block);
                            if (!std::isfinite(d))
                                throw tensor_error(
                                    info.name, "block " + std::to_string(r * (groups / subs) + g / subs) + " (row " +
                                                   std::to_string(r) + ") has scale d = " + std::to_string(d) +
                                                   ", which has no exact QuantizedMatrix form");
                        }
                        const auto store = [&](const auto& group) {
                            result.scales(row, g) = group.scale;
                            result.biases(row, g) = group.bias;
                            detail::kernels::pack_codes<Bits>(group.codes.data(), GroupSize, words);
                        };
                        if (info.type == GgmlType::q4_k)
                            store(io_detail::q45k_group<false>(block, sub_block));
                        else if (info.type == GgmlType::q5_k)
                            store(io_detail::q45k_group<true>(block, sub_block));
                        else if (info.type == GgmlType::q2_k)
                            store(io_detail::q2k_group(block, sub_block));
                        else if (info.type == GgmlType::q3_k)
                            store(io_detail::q3k_group(block, sub_block));
                        else
                            store(io_detail::q6k_group(block, sub_block));
                        continue;
                    }
                    if constexpr (GroupSize == 32) {  // a Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 block
                        const std::uint64_t block_index =
                            r * static_cast<std::uint64_t>(groups) + static_cast<std::uint64_t>(g);
                        const std::byte* block = bytes + block_index * block_bytes;
                        const float d = io_detail::f16_to_float(io_detail::load_le<std::uint16_t>(block));
                        const bool scaled_offset =
                            info.type == GgmlType::q4_0 || info.type == GgmlType::q5_0 || info.type == GgmlType::q8_0;
                        if (scaled_offset && !std::isfinite(d))
                            throw tensor_error(info.name, "block " + std::to_string(block_index) + " (row " +
                                                              std::to_string(r) +
                                                              ") has scale d = " + std::to_string(d) +
                                                              ", which has no exact QuantizedMatrix form");
                        if constexpr (Bits == 4) {  // Q4_0 / Q4_1 here: the nibbles re-packed word by word
                            result.scales(row, g) = d;
                            result.biases(row, g) =
                                info.type == GgmlType::q4_1
                                    ? io_detail::f16_to_float(io_detail::load_le<std::uint16_t>(block + 2))
                                    : -8.0f * d;
                            io_detail::pack_q4_nibbles(block + (info.type == GgmlType::q4_1 ? 4 : 2), words);
                        } else if (Bits == 8 && info.type == GgmlType::q8_0) {
                            result.scales(row, g) = d;
                            result.biases(row, g) = -128.0f * d;
                            io_detail::pack_q8_codes(block + 2, words);
                        } else {
                            const auto decoded = io_detail::decode_mlx_block(info.type, block);
                            result.scales(row, g) = decoded.scale;
                            result.biases(row, g) = decoded.bias;
                            detail::kernels::pack_codes<Bits>(decoded.codes.data(), 32, words);
                        }
                    }
                }
            }
        });
        return result;
    }

private:
    GgufFile(std::shared_ptr<const io_detail::ByteSource> source, std::string label)
        : source_(std::move(source)), label_(std::move(label)) {
        parse();
    }

    format_error file_error(const std::string& fault) const {
        return format_error("lowbit::GgufFile: " + label_ + ": " + fault);
    }
    format_error tensor_error(std::string_view tensor, const std::string& fault) const {
        return file_error("tensor " + io_detail::quoted(tensor) + ": " + fault);
    }

    /// The tensor's info, after checking that dequantize_row converts its type.
    const GgufTensorInfo& convertible_tensor(std::string_view name) const {
        const auto& info = tensor_info(name);
        if (!io_detail::can_dequantize(info.type))
            throw tensor_error(info.name, "type " + std::string(ggml_type_name(info.type)) +
                                              " cannot be converted (supported: f32, f16, bf16, q4_0, q4_1, q5_0, "
                                              "q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K)");
        return info;
    }
    /// Row `row` of a convertible tensor into out[0, row_length).
    void dequantize_row_into(const GgufTensorInfo& info, std::size_t row, float* out) const {
        const std::size_t row_bytes = static_cast<std::size_t>(info.size / info.row_count());
        io_detail::dequantize_row(info.type, data_.data() + info.offset + row * row_bytes,
                                  static_cast<std::size_t>(info.row_length()), out);
    }

    std::size_t find(std::string_view name) const {
        const auto it = index_.find(name);
        if (it == index_.end()) throw tensor_error(name, "no such tensor (the file has " + std::to_string(tensors_.size()) + ")");
        return it->second;
    }

    static std::uint64_t min_value_size(GgufType type) noexcept {
        switch (type) {
            case GgufType::uint8: case GgufType::int8: case GgufType::boolean: return 1;
            case GgufType::uint16: case GgufType::int16: return 2;
            case GgufType::uint32: case GgufType::int32: case GgufType::float32: return 4;
            case GgufType::string: case GgufType::uint64: case GgufType::int64: case GgufType::float64: return 8;
            case GgufType::array: return 12;
        }
        return 0;
    }

    /// Reads a GGUF string; describe() names it in an error (built only then: strings come by the
    /// hundred thousand in tokenizer arrays).
    template <class Describe>
    std::string read_string(io_detail::ByteReader& reader, const Describe& describe) const {
        if (reader.remaining() < 8)
            throw file_error("truncated at byte " + std::to_string(reader.position()) + ": the length of " + describe() +
                             " needs 8 bytes, " + std::to_string(reader.remaining()) + " left");
        const auto length = reader.read<std::uint64_t>("a string length");
        if (length > reader.remaining())
            throw file_error(describe() + " at byte " + std::to_string(reader.position() - 8) + " has length " +
                             std::to_string(length) + ", beyond the " + std::to_string(reader.remaining()) + " bytes left");
        const auto bytes = reader.read_bytes(length, "a string");
        return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
    }

    GgufValue read_value(io_detail::ByteReader& reader, std::uint32_t type_id, const std::string& key, int depth) const {
        if (type_id > static_cast<std::uint32_t>(GgufType::float64))
            throw file_error("key " + io_detail::quoted(key) + ": unknown value type " + std::to_string(type_id));
        GgufValue value;
        value.type_ = static_cast<GgufType>(type_id);
        switch (value.type_) {
            case GgufType::uint8: value.scalar_ = std::uint64_t{reader.read<std::uint8_t>(key)}; break;
            case GgufType::int8: value.scalar_ = std::int64_t{reader.read<std::int8_t>(key)}; break;
            case GgufType::uint16: value.scalar_ = std::uint64_t{reader.read<std::uint16_t>(key)}; break;
            case GgufType::int16: value.scalar_ = std::int64_t{reader.read<std::int16_t>(key)}; break;
            case GgufType::uint32: value.scalar_ = std::uint64_t{reader.read<std::uint32_t>(key)}; break;
            case GgufType::int32: value.scalar_ = std::int64_t{reader.read<std::int32_t>(key)}; break;
            case GgufType::uint64: value.scalar_ = reader.read<std::uint64_t>(key); break;
            case GgufType::int64: value.scalar_ = reader.read<std::int64_t>(key); break;
            case GgufType::float32: value.scalar_ = double{reader.read<float>(key)}; break;
            case GgufType::float64: value.scalar_ = reader.read<double>(key); break;
            case GgufType::boolean: {
                const auto byte = reader.read<std::uint8_t>(key);
                if (byte > 1) throw file_error("key " + io_detail::quoted(key) + ": bool byte " + std::to_string(byte) + " is not 0 or 1");
                value.scalar_ = byte == 1;
                break;
            }
            case GgufType::string: value.scalar_ = read_string(reader, [&] { return "key " + io_detail::quoted(key) + "'s string"; }); break;
            case GgufType::array: {
                if (depth >= 8) throw file_error("key " + io_detail::quoted(key) + ": arrays nested deeper than 8");
                const auto element_type = reader.read<std::uint32_t>(key);
                if (element_type > static_cast<std::uint32_t>(GgufType::float64))
                    throw file_error("key " + io_detail::quoted(key) + ": unknown array element type " + std::to_string(element_type));
                value.element_type_ = static_cast<GgufType>(element_type);
                const auto count = reader.read<std::uint64_t>(key);
                if (count > reader.remaining() / min_value_size(value.element_type_))
                    throw file_error("key " + io_detail::quoted(key) + ": array count " + std::to_string(count) +
                                     " cannot fit in the " + std::to_string(reader.remaining()) + " bytes left");
                value.elements_.reserve(static_cast<std::size_t>(count));
                for (std::uint64_t i = 0; i < count; ++i)
                    value.elements_.push_back(read_value(reader, element_type, key, depth + 1));
                break;
            }
        }
        return value;
    }

    void parse() {
        io_detail::ByteReader reader(source_->bytes(), "lowbit::GgufFile: " + label_);
        const auto magic = reader.read_bytes(4, "the magic");
        if (std::memcmp(magic.data(), "GGUF", 4) != 0) throw file_error("bad magic (not a GGUF file)");
        version_ = reader.read<std::uint32_t>("the version");
        if (version_ != 2 && version_ != 3)
            throw file_error("version " + std::to_string(version_) + " is not supported (2 or 3, little-endian)");
        const auto tensor_count = reader.read<std::uint64_t>("the tensor count");
        const auto kv_count = reader.read<std::uint64_t>("the metadata count");
        // Every key-value takes at least 13 bytes (length, type, one byte), every tensor info 24.
        if (kv_count > reader.remaining() / 13)
            throw file_error("metadata count " + std::to_string(kv_count) + " cannot fit in the file");
        for (std::uint64_t i = 0; i < kv_count; ++i) {
            std::string key = read_string(reader, [&] { return "metadata key " + std::to_string(i); });
            const auto type = reader.read<std::uint32_t>("the value type");
            GgufValue value = read_value(reader, type, key, 0);
            if (!metadata_.emplace(key, std::move(value)).second) throw file_error("key " + io_detail::quoted(key) + " appears twice");
        }
        if (tensor_count > reader.remaining() / 24)
            throw file_error("tensor count " + std::to_string(tensor_count) + " cannot fit in the file");
        tensors_.reserve(static_cast<std::size_t>(tensor_count));
        for (std::uint64_t i = 0; i < tensor_count; ++i) tensors_.push_back(read_tensor_info(reader, i));

        if (const auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
            if (it->second.type() != GgufType::uint32)
                throw file_error("general.alignment is not a uint32");
            alignment_ = it->second.as_uint();
            if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
                throw file_error("general.alignment = " + std::to_string(alignment_) + " is not a power of two");
        }
        const std::uint64_t header_end = reader.position();
        const std::uint64_t data_start = (header_end + alignment_ - 1) / alignment_ * alignment_;
        const auto bytes = source_->bytes();
        // Past the end (only zero-byte tensors can then be valid): an empty span at the end of the file.
        data_ = bytes.subspan(static_cast<std::size_t>(std::min<std::uint64_t>(data_start, bytes.size())));

        std::vector<const GgufTensorInfo*> by_offset;
        for (std::size_t i = 0; i < tensors_.size(); ++i) {
            const auto& info = tensors_[i];
            if (!index_.emplace(info.name, i).second) throw tensor_error(info.name, "appears twice");
            if (info.offset % alignment_ != 0)
                throw tensor_error(info.name, "offset " + std::to_string(info.offset) + " is not a multiple of the alignment " +
                                                  std::to_string(alignment_));
            if (info.offset > data_.size() || info.size > data_.size() - info.offset)
                throw tensor_error(info.name, "bytes [" + std::to_string(info.offset) + ", +" + std::to_string(info.size) +
                                                  ") are outside the data section (" + std::to_string(data_.size()) +
                                                  " bytes; the file may be truncated)");
            if (info.size > 0) by_offset.push_back(&info);
        }
        std::sort(by_offset.begin(), by_offset.end(),
                  [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
        for (std::size_t i = 1; i < by_offset.size(); ++i)
            if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->size)
                throw tensor_error(by_offset[i]->name, "bytes at offset " + std::to_string(by_offset[i]->offset) +
                                                           " overlap tensor " + io_detail::quoted(by_offset[i - 1]->name));
    }

    GgufTensorInfo read_tensor_info(io_detail::ByteReader& reader, std::uint64_t index) const {
        GgufTensorInfo info;
        info.name = read_string(reader, [&] { return "tensor " + std::to_string(index) + "'s name"; });
        const auto n_dims = reader.read<std::uint32_t>("n_dims");
        if (n_dims == 0 || n_dims > 4)
            throw tensor_error(info.name, "n_dims = " + std::to_string(n_dims) + " (ggml allows 1 to 4)");
        std::uint64_t count = 1;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
            info.dims.push_back(reader.read<std::uint64_t>("a dimension"));
            if (info.dims.back() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
                !io_detail::multiply(count, info.dims.back(), count) ||
                count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                throw tensor_error(info.name, "the element count of dims " + dims_text(info.dims) + " overflows");
        }
        const auto type_id = reader.read<std::uint32_t>("the tensor type");
        const auto* type = io_detail::ggml_type_info(type_id);
        if (!type) throw tensor_error(info.name, "unknown ggml type id " + std::to_string(type_id));
        info.type = static_cast<GgmlType>(type_id);
        if (info.dims[0] % type->block_size != 0)
            throw tensor_error(info.name, "ne[0] = " + std::to_string(info.dims[0]) + " is not a multiple of " +
                                              std::string(type->name) + "'s block size " + std::to_string(type->block_size));
        if (!io_detail::multiply(count / type->block_size, type->type_size, info.size))
            throw tensor_error(info.name, "the byte size of dims " + dims_text(info.dims) + " overflows");
        info.offset = reader.read<std::uint64_t>("the tensor offset");
        return info;
    }

    static std::string dims_text(const std::vector<std::uint64_t>& dims) {
        std::string text = "[";
        for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
        return text + "]";
    }

    std::shared_ptr<const io_detail::ByteSource> source_;
    std::string label_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = 32;
    std::map<std::string, GgufValue, std::less<>> metadata_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, std::size_t, std::less<>> index_;
    std::span<const std::byte> data_;
};

LOWBIT_END_NAMESPACE
