// Fashion-MNIST from the gzip'd IDX files Debian ships in the package dataset-fashion-mnist
// (/usr/share/datasets/fashion-mnist). Every problem with a file (missing, not gzip, truncated, wrong
// IDX header, label out of range, image and label counts that disagree) throws DataError naming the
// file and what was wrong.
//
// IDX layout (big-endian): u32 magic = 0x00000800 | (u8 element type 0x08) << 0 | dims,
// i.e. 0x00000803 for images [count, 28, 28] and 0x00000801 for labels [count]; then one u32 per
// dimension; then the unsigned bytes, row by row.
#pragma once

#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/matrix_types.hpp>

namespace fashion_mnist {

using RowMatrix = lowbit::RowMatrixXf;

inline constexpr int image_side = 28;
inline constexpr int pixels = image_side * image_side;  // 784
inline constexpr int classes = 10;

struct DataError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Split {
    RowMatrix images;         ///< [count, features], pixels scaled to [0, 1], then zero padding
    std::vector<int> labels;  ///< [count], each in [0, 10)
};

/// The whole decompressed content of a gzip file.
inline std::vector<unsigned char> read_gzip(const std::string& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
        throw DataError(path + ": cannot open (" + std::strerror(errno) +
                        "); install Debian's dataset-fashion-mnist or pass --data DIR");
    }
    std::vector<unsigned char> bytes;
    unsigned char chunk[1 << 16];
    for (;;) {
        const int got = gzread(file, chunk, sizeof chunk);
        if (got < 0) {
            int code = 0;
            const std::string message = gzerror(file, &code);
            gzclose(file);
            throw DataError(path + ": not a readable gzip stream (" + message + ")");
        }
        if (got == 0) break;
        bytes.insert(bytes.end(), chunk, chunk + got);
    }
    int code = 0;
    const std::string message = gzerror(file, &code);
    gzclose(file);
    // zlib reports a stream cut short as Z_BUF_ERROR at the end.
    if (code != Z_OK && code != Z_STREAM_END) {
        throw DataError(path + ": truncated or corrupt gzip data (" + message + ")");
    }
    return bytes;
}

inline std::uint32_t read_big_endian(const unsigned char* bytes) {
    return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) | (std::uint32_t{bytes[2]} << 8) |
           std::uint32_t{bytes[3]};
}

inline std::string hex(std::uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08X", value);
    return text;
}

/// Images as rows of `features` floats (>= 784): pixel / 255, then zeros.
inline RowMatrix load_images(const std::string& path, int features) {
    const std::vector<unsigned char> bytes = read_gzip(path);
    constexpr std::size_t header = 16;
    if (bytes.size() < header) {
        throw DataError(path + ": " + std::to_string(bytes.size()) +
                        " bytes, shorter than the 16-byte IDX image header");
    }
    const std::uint32_t magic = read_big_endian(bytes.data());
    if (magic != 0x00000803u) {
        throw DataError(path + ": IDX magic is " + hex(magic) +
                        ", expected 0x00000803 (unsigned bytes, 3 dimensions) for an image file");
    }
    const std::uint32_t count = read_big_endian(bytes.data() + 4);
    const std::uint32_t rows = read_big_endian(bytes.data() + 8);
    const std::uint32_t cols = read_big_endian(bytes.data() + 12);
    if (rows != image_side || cols != image_side) {
        throw DataError(path + ": images are " + std::to_string(rows) + "x" + std::to_string(cols) +
                        ", expected 28x28");
    }
    const std::size_t expected = header + std::size_t{count} * pixels;
    if (bytes.size() != expected) {
        throw DataError(path + ": header says " + std::to_string(count) + " images (" + std::to_string(expected) +
                        " bytes) but the file holds " + std::to_string(bytes.size()) + " bytes" +
                        (bytes.size() < expected ? " (truncated)" : ""));
    }
    RowMatrix images = RowMatrix::Zero(count, features);
    for (std::uint32_t i = 0; i < count; ++i) {
        const unsigned char* image = bytes.data() + header + std::size_t{i} * pixels;
        for (int p = 0; p < pixels; ++p) images(i, p) = static_cast<float>(image[p]) / 255.0f;
    }
    return images;
}

inline std::vector<int> load_labels(const std::string& path) {
    const std::vector<unsigned char> bytes = read_gzip(path);
    constexpr std::size_t header = 8;
    if (bytes.size() < header) {
        throw DataError(path + ": " + std::to_string(bytes.size()) +
                        " bytes, shorter than the 8-byte IDX label header");
    }
    const std::uint32_t magic = read_big_endian(bytes.data());
    if (magic != 0x00000801u) {
        throw DataError(path + ": IDX magic is " + hex(magic) +
                        ", expected 0x00000801 (unsigned bytes, 1 dimension) for a label file");
    }
    const std::uint32_t count = read_big_endian(bytes.data() + 4);
    if (bytes.size() != header + count) {
        throw DataError(path + ": header says " + std::to_string(count) + " labels but the file holds " +
                        std::to_string(bytes.size() - header) + (bytes.size() < header + count ? " (truncated)" : ""));
    }
    std::vector<int> labels(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        labels[i] = bytes[header + i];
        if (labels[i] >= classes) {
            throw DataError(path + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) +
                            ", outside 0..9");
        }
    }
    return labels;
}

/// One split ("train" or "t10k") from `directory`.
inline Split load_split(const std::string& directory, const std::string& split, int features) {
    const std::string images_path = directory + "/" + split + "-images-idx3-ubyte.gz";
    const std::string labels_path = directory + "/" + split + "-labels-idx1-ubyte.gz";
    Split result{load_images(images_path, features), load_labels(labels_path)};
    if (static_cast<std::size_t>(result.images.rows()) != result.labels.size()) {
        throw DataError(images_path + " holds " + std::to_string(result.images.rows()) + " images but " +
                        labels_path + " holds " + std::to_string(result.labels.size()) + " labels");
    }
    return result;
}

}  // namespace fashion_mnist
