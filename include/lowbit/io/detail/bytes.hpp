// The bytes of a checkpoint file and the checked arithmetic every reader uses on them.
//
// A reader keeps one shared `ByteSource`: a read-only memory map of the file (POSIX mmap, MAP_PRIVATE,
// nothing copied), or a caller's buffer borrowed as is (for files already in memory, and for the
// fuzzers). Tensors handed out by a reader are spans into these bytes, valid while any copy of the
// reader lives.
//
// As with every memory-mapped reader, a file that another process truncates while it is mapped is
// beyond what the checks can see (reading the lost pages raises SIGBUS); lowbit never writes to a
// mapped file.
//
//   file:  [ 0 ........................................................ size )
//            ^ ByteReader cursor: every read checks `count <= remaining()` first
//
// Multi-byte values are little-endian in every format lowbit reads (safetensors, GGUF v2/v3); they are
// read with std::memcpy (no unaligned or type-punned access), so the readers need a little-endian host,
// which static_assert checks (MLX's packing needs one too).
#pragma once

#include "../../detail/config.hpp"
#include "../../errors.hpp"

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define LOWBIT_IO_HAS_MMAP 1
#else
#include <fstream>
#define LOWBIT_IO_HAS_MMAP 0
#endif

static_assert(std::endian::native == std::endian::little,
              "lowbit's checkpoint readers need a little-endian host (safetensors, GGUF and MLX's packing are)");

LOWBIT_BEGIN_NAMESPACE
namespace io_detail {

/// Read-only bytes of one file or buffer, shared by a reader and everything it hands out.
class ByteSource {
public:
    ByteSource(const ByteSource&) = delete;
    ByteSource& operator=(const ByteSource&) = delete;
    ~ByteSource() {
#if LOWBIT_IO_HAS_MMAP
        if (mapped_ != nullptr) ::munmap(mapped_, bytes_.size());
#endif
    }

    /// Maps `path` read-only. Throws std::runtime_error naming `who` and the path when the file cannot be
    /// opened, is not a regular file, or cannot be mapped. An empty file gives an empty span.
    static std::shared_ptr<const ByteSource> map_file(const std::filesystem::path& path, std::string_view who) {
        auto source = std::shared_ptr<ByteSource>(new ByteSource());
        const auto fail = [&](const std::string& what) -> std::runtime_error {
            return std::runtime_error(std::string(who) + ": " + path.string() + ": " + what);
        };
#if LOWBIT_IO_HAS_MMAP
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw fail(std::string("cannot open (") + std::strerror(errno) + ")");
        struct stat info {};
        if (::fstat(fd, &info) != 0) {
            const int error = errno;
            ::close(fd);
            throw fail(std::string("cannot stat (") + std::strerror(error) + ")");
        }
        if (!S_ISREG(info.st_mode)) {
            ::close(fd);
            throw fail("not a regular file");
        }
        const auto size = static_cast<std::size_t>(info.st_size);
        if (size > 0) {
            void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapped == MAP_FAILED) {
                const int error = errno;
                ::close(fd);
                throw fail(std::string("cannot map (") + std::strerror(error) + ")");
            }
            source->mapped_ = mapped;
            source->bytes_ = std::span<const std::byte>(static_cast<const std::byte*>(mapped), size);
        }
        ::close(fd);
#else
        std::ifstream in(path, std::ios::binary);
        if (!in) throw fail("cannot open");
        in.seekg(0, std::ios::end);
        const auto size = static_cast<std::size_t>(in.tellg());
        in.seekg(0);
        source->owned_.resize(size);
        if (size > 0 && !in.read(reinterpret_cast<char*>(source->owned_.data()), static_cast<std::streamsize>(size)))
            throw fail("cannot read");
        source->bytes_ = std::span<const std::byte>(source->owned_.data(), size);
#endif
        return source;
    }

    /// Borrows `bytes` (the caller keeps them alive and unchanged while any reader uses them).
    static std::shared_ptr<const ByteSource> borrow(std::span<const std::byte> bytes) {
        auto source = std::shared_ptr<ByteSource>(new ByteSource());
        source->bytes_ = bytes;
        return source;
    }

    std::span<const std::byte> bytes() const noexcept { return bytes_; }

private:
    ByteSource() = default;
    std::span<const std::byte> bytes_;
#if LOWBIT_IO_HAS_MMAP
    void* mapped_ = nullptr;
#else
    std::vector<std::byte> owned_;
#endif
};

/// a * b, or false when it does not fit in std::uint64_t.
inline bool multiply(std::uint64_t a, std::uint64_t b, std::uint64_t& product) noexcept {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return false;
    product = a * b;
    return true;
}

/// a + b, or false when it does not fit in std::uint64_t.
inline bool add(std::uint64_t a, std::uint64_t b, std::uint64_t& sum) noexcept {
    if (b > std::numeric_limits<std::uint64_t>::max() - a) return false;
    sum = a + b;
    return true;
}

/// A little-endian value of type T at `bytes` (no alignment needed).
template <class T>
T load_le(const std::byte* bytes) noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return value;
}

/// A bounds-checked cursor over a byte span. Every read first checks that the bytes are there and
/// otherwise throws std::invalid_argument "<context>: truncated at byte N: <what> needs K bytes, M left".
class ByteReader {
public:
    ByteReader(std::span<const std::byte> bytes, std::string context) : bytes_(bytes), context_(std::move(context)) {}

    std::size_t position() const noexcept { return position_; }
    std::size_t remaining() const noexcept { return bytes_.size() - position_; }
    const std::string& context() const noexcept { return context_; }

    /// Throws unless `count` more bytes are there.
    void require(std::uint64_t count, std::string_view what) const {
        if (count > remaining())
            throw format_error(context_ + ": truncated at byte " + std::to_string(position_) + ": " +
                               std::string(what) + " needs " + std::to_string(count) + " bytes, " +
                               std::to_string(remaining()) + " left");
    }

    template <class T>
    T read(std::string_view what) {
        require(sizeof(T), what);
        const T value = load_le<T>(bytes_.data() + position_);
        position_ += sizeof(T);
        return value;
    }

    std::span<const std::byte> read_bytes(std::uint64_t count, std::string_view what) {
        require(count, what);
        const auto result = bytes_.subspan(position_, static_cast<std::size_t>(count));
        position_ += static_cast<std::size_t>(count);
        return result;
    }

    /// Moves to `offset` (at most the size).
    void seek(std::uint64_t offset, std::string_view what) {
        if (offset > bytes_.size())
            throw format_error(context_ + ": " + std::string(what) + " at byte " + std::to_string(offset) +
                               " is past the end (" + std::to_string(bytes_.size()) + " bytes)");
        position_ = static_cast<std::size_t>(offset);
    }

private:
    std::span<const std::byte> bytes_;
    std::string context_;
    std::size_t position_ = 0;
};

/// `text` quoted for an error message, at most 80 characters, control bytes shown as '?'.
inline std::string quoted(std::string_view text) {
    std::string result = "'";
    for (std::size_t i = 0; i < text.size() && i < 80; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        result += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    }
    if (text.size() > 80) result += "...";
    return result + "'";
}

}  // namespace io_detail
LOWBIT_END_NAMESPACE
