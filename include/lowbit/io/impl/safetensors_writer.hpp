// SafetensorsWriter's output: the JSON header and the file (safetensors_writer.hpp; included by it unless
// LOWBIT_EXTERN_IO, compiled once by lowbit::io_compiled otherwise: detail/compiled.hpp).
#pragma once

#include "../safetensors_writer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

LOWBIT_BEGIN_NAMESPACE

LOWBIT_IO_FUNC std::vector<std::byte> SafetensorsWriter::to_bytes() const {
    std::vector<const Tensor*> order;
    for (const auto& tensor : tensors_) order.push_back(&tensor);
    std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
        if (dtype_size(a->dtype) != dtype_size(b->dtype)) return dtype_size(a->dtype) > dtype_size(b->dtype);
        return a->name < b->name;
    });
    nlohmann::json header = nlohmann::json::object();
    if (!metadata_.empty()) header["__metadata__"] = metadata_;
    std::uint64_t offset = 0;
    for (const Tensor* tensor : order) {
        header[tensor->name] = {{"dtype", std::string(dtype_name(tensor->dtype))},
                                {"shape", tensor->shape},
                                {"data_offsets", {offset, offset + tensor->bytes.size()}}};
        offset += tensor->bytes.size();
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const nlohmann::json::exception& e) {  // a name or metadata string that is not UTF-8
        throw std::invalid_argument(std::string("lowbit::SafetensorsWriter: the header cannot be written: ") +
                                    e.what());
    }
    text.append((8 - text.size() % 8) % 8, ' ');

    std::vector<std::byte> file(8 + text.size() + static_cast<std::size_t>(offset));
    const std::uint64_t header_size = text.size();
    std::memcpy(file.data(), &header_size, 8);
    std::memcpy(file.data() + 8, text.data(), text.size());
    std::byte* data = file.data() + 8 + text.size();
    for (const Tensor* tensor : order) {
        if (!tensor->bytes.empty()) std::memcpy(data, tensor->bytes.data(), tensor->bytes.size());
        data += tensor->bytes.size();
    }
    return file;
}

LOWBIT_IO_FUNC void SafetensorsWriter::write(const std::filesystem::path& path) const {
    const std::vector<std::byte> bytes = to_bytes();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        throw std::runtime_error("lowbit::SafetensorsWriter::write: " + path.string() + ": cannot open for writing");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error("lowbit::SafetensorsWriter::write: " + path.string() + ": write failed");
}

LOWBIT_END_NAMESPACE
