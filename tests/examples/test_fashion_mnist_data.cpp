// The Fashion-MNIST example's IDX reader on broken files: each must fail with an error naming the
// file and what was wrong, never crash or load garbage.
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "fashion_mnist_data.hpp"

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;

fs::path scratch_dir() {
    const fs::path dir = fs::temp_directory_path() / "lowbit-test-fashion-mnist";
    fs::create_directories(dir);
    return dir;
}

void write_gzip(const fs::path& path, const std::vector<unsigned char>& bytes) {
    gzFile file = gzopen(path.c_str(), "wb");
    REQUIRE(file != nullptr);
    if (!bytes.empty()) REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == int(bytes.size()));
    REQUIRE(gzclose(file) == Z_OK);
}

void append_big_endian(std::vector<unsigned char>& bytes, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<unsigned char>(value >> shift));
}

std::vector<unsigned char> image_file(std::uint32_t magic, std::uint32_t count, std::uint32_t side,
                                      std::size_t pixel_bytes) {
    std::vector<unsigned char> bytes;
    append_big_endian(bytes, magic);
    append_big_endian(bytes, count);
    append_big_endian(bytes, side);
    append_big_endian(bytes, side);
    for (std::size_t i = 0; i < pixel_bytes; ++i) bytes.push_back(static_cast<unsigned char>(i % 256));
    return bytes;
}

}  // namespace

TEST_CASE("IDX image files load and pad with zeros", "[fashion_mnist]") {
    const fs::path path = scratch_dir() / "good-images.gz";
    write_gzip(path, image_file(0x00000803, 2, 28, 2 * 784));
    const auto images = fashion_mnist::load_images(path.string(), 832);
    REQUIRE(images.rows() == 2);
    REQUIRE(images.cols() == 832);
    CHECK(images(0, 1) == 1.0f / 255.0f);
    CHECK(images(1, 0) == static_cast<float>(784 % 256) / 255.0f);
    CHECK(images.rightCols(832 - 784).cwiseAbs().maxCoeff() == 0.0f);
}

TEST_CASE("broken IDX files fail with the file and the problem named", "[fashion_mnist]") {
    const fs::path dir = scratch_dir();
    SECTION("missing file") {
        const std::string path = (dir / "does-not-exist.gz").string();
        CHECK_THROWS_WITH(fashion_mnist::load_images(path, 784),
                          ContainsSubstring(path) && ContainsSubstring("cannot open"));
    }
    SECTION("wrong magic number") {
        const fs::path path = dir / "labels-as-images.gz";
        write_gzip(path, image_file(0x00000801, 1, 28, 784));
        CHECK_THROWS_WITH(fashion_mnist::load_images(path.string(), 784),
                          ContainsSubstring(path.string()) && ContainsSubstring("magic is 0x00000801"));
    }
    SECTION("wrong image size") {
        const fs::path path = dir / "small-images.gz";
        write_gzip(path, image_file(0x00000803, 1, 14, 14 * 14));
        CHECK_THROWS_WITH(fashion_mnist::load_images(path.string(), 784), ContainsSubstring("14x14"));
    }
    SECTION("fewer pixels than the header promises") {
        const fs::path path = dir / "short-images.gz";
        write_gzip(path, image_file(0x00000803, 3, 28, 2 * 784));
        CHECK_THROWS_WITH(fashion_mnist::load_images(path.string(), 784),
                          ContainsSubstring(path.string()) && ContainsSubstring("truncated"));
    }
    SECTION("header cut short") {
        const fs::path path = dir / "tiny.gz";
        write_gzip(path, {0, 0, 8});
        CHECK_THROWS_WITH(fashion_mnist::load_labels(path.string()), ContainsSubstring("shorter than the 8-byte"));
    }
    SECTION("gzip stream cut in the middle") {
        const fs::path whole = dir / "whole-images.gz";
        write_gzip(whole, image_file(0x00000803, 20, 28, 20 * 784));
        std::ifstream in(whole, std::ios::binary);
        std::vector<char> compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const fs::path cut = dir / "cut-images.gz";
        std::ofstream(cut, std::ios::binary).write(compressed.data(), static_cast<std::streamsize>(compressed.size() / 2));
        CHECK_THROWS_WITH(fashion_mnist::load_images(cut.string(), 784), ContainsSubstring(cut.string()));
    }
    SECTION("label outside 0..9") {
        const fs::path path = dir / "bad-labels.gz";
        std::vector<unsigned char> bytes;
        append_big_endian(bytes, 0x00000801);
        append_big_endian(bytes, 3);
        bytes.insert(bytes.end(), {1, 12, 3});
        write_gzip(path, bytes);
        CHECK_THROWS_WITH(fashion_mnist::load_labels(path.string()), ContainsSubstring("label 1 is 12"));
    }
}
