// SafetensorsFile's header parser (safetensors.hpp; included by it unless LOWBIT_EXTERN_IO, compiled once
// by lowbit::io_compiled otherwise: detail/compiled.hpp).
#pragma once

#include "../safetensors.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

LOWBIT_BEGIN_NAMESPACE

LOWBIT_IO_FUNC void SafetensorsFile::parse() {
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

LOWBIT_IO_FUNC void SafetensorsFile::parse_metadata(const nlohmann::json& value) {
    if (value.is_null()) return;  // mlx.core.save_safetensors without metadata writes null
    if (!value.is_object()) throw file_error("__metadata__ is not an object");
    for (const auto& [key, item] : value.items()) {
        if (!item.is_string()) throw file_error("__metadata__ value of " + io_detail::quoted(key) + " is not a string");
        metadata_.emplace(key, item.get<std::string>());
    }
}

LOWBIT_IO_FUNC SafetensorsFile::Entry SafetensorsFile::parse_entry(const std::string& name,
                                                                   const nlohmann::json& value) const {
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
            throw error(name, "the byte size of shape " + io_detail::shape_text(entry.shape) + "... of " + dtype_text +
                                  " overflows 64 bits");
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

LOWBIT_END_NAMESPACE
