// Test helpers for the checkpoint readers: a temporary directory removed at scope exit, whole-file
// byte I/O, and GgufBuilder, a minimal GGUF v3 writer (lowbit only reads GGUF) for building test files.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace lowbit::test {

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
public:
    TempDir() {
        static std::atomic<unsigned> counter{0};
        const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
        path_ = std::filesystem::temp_directory_path() /
                ("lowbit-io-" + std::to_string(::getpid()) + "-" + std::to_string(stamp) + "-" + std::to_string(counter++));
        std::filesystem::create_directories(path_);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(chars.size());
    if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
    return bytes;
}

/// Appends little-endian values to a byte vector.
struct ByteWriter {
    std::vector<std::byte> bytes;

    template <class T>
    ByteWriter& put(T value) {
        const auto old = bytes.size();
        bytes.resize(old + sizeof(T));
        std::memcpy(bytes.data() + old, &value, sizeof(T));
        return *this;
    }
    ByteWriter& put_string(const std::string& text) {
        put<std::uint64_t>(text.size());
        for (const char c : text) bytes.push_back(static_cast<std::byte>(c));
        return *this;
    }
    ByteWriter& put_bytes(const std::vector<std::byte>& more) {
        bytes.insert(bytes.end(), more.begin(), more.end());
        return *this;
    }
    void pad_to(std::size_t alignment) {
        while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    }
};

/// Builds a GGUF v3 file: key-values (raw value bytes after the type id) and tensors (raw block bytes).
class GgufBuilder {
public:
    /// A key with a value of GGUF type `type` whose encoding (after the type) is `value`.
    GgufBuilder& kv(const std::string& key, std::uint32_t type, const std::vector<std::byte>& value) {
        ByteWriter w;
        w.put_string(key).put<std::uint32_t>(type).put_bytes(value);
        kvs_.push_back(w.bytes);
        return *this;
    }
    template <class T>
    GgufBuilder& kv_scalar(const std::string& key, std::uint32_t type, T value) {
        ByteWriter w;
        w.put<T>(value);
        return kv(key, type, w.bytes);
    }
    GgufBuilder& kv_string(const std::string& key, const std::string& value) {
        ByteWriter w;
        w.put_string(value);
        return kv(key, 8, w.bytes);
    }
    /// A tensor with dims ne (innermost first), ggml type id and its data bytes. The offset is the next
    /// aligned one unless `offset` is given.
    GgufBuilder& tensor(const std::string& name, std::vector<std::uint64_t> dims, std::uint32_t type,
                        std::vector<std::byte> data, std::int64_t offset = -1) {
        tensors_.push_back({name, std::move(dims), type, std::move(data), offset});
        return *this;
    }
    GgufBuilder& alignment(std::size_t value) {
        alignment_ = value;
        return *this;
    }

    std::vector<std::byte> build(std::uint32_t version = 3) const {
        ByteWriter w;
        w.bytes = {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}};
        w.put<std::uint32_t>(version).put<std::uint64_t>(tensors_.size()).put<std::uint64_t>(kvs_.size());
        for (const auto& kv : kvs_) w.put_bytes(kv);
        std::vector<std::uint64_t> offsets;
        std::uint64_t next = 0;
        for (const auto& t : tensors_) {
            const std::uint64_t offset = t.offset >= 0 ? static_cast<std::uint64_t>(t.offset) : next;
            offsets.push_back(offset);
            next = std::max<std::uint64_t>(next, (offset + t.data.size() + alignment_ - 1) / alignment_ * alignment_);
            w.put_string(t.name).put<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
            for (const auto d : t.dims) w.put<std::uint64_t>(d);
            w.put<std::uint32_t>(t.type).put<std::uint64_t>(offset);
        }
        w.pad_to(alignment_);
        const std::size_t data_start = w.bytes.size();
        w.bytes.resize(data_start + next);
        for (std::size_t i = 0; i < tensors_.size(); ++i)
            if (!tensors_[i].data.empty())
                std::memcpy(w.bytes.data() + data_start + offsets[i], tensors_[i].data.data(), tensors_[i].data.size());
        return w.bytes;
    }

private:
    struct Tensor {
        std::string name;
        std::vector<std::uint64_t> dims;
        std::uint32_t type;
        std::vector<std::byte> data;
        std::int64_t offset;
    };
    std::vector<std::vector<std::byte>> kvs_;
    std::vector<Tensor> tensors_;
    std::size_t alignment_ = 32;
};

}  // namespace lowbit::test
