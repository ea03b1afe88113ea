// Seed corpora for the libFuzzer targets in fuzz/: the tests tagged [fuzz-seeds] build seed inputs and
// check their headers (a known operation and format); with LOWBIT_FUZZ_CORPUS set they also write them
// into $LOWBIT_FUZZ_CORPUS/<name>/ (tools/run-fuzzers runs them before the fuzzers). The seeds reach
// every operation of a target with consistent shapes, so the fuzzer starts from the deep paths rather
// than from the first refusal.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "../../fuzz/quantized_input.hpp"

namespace {

namespace fs = std::filesystem;
using lowbit_fuzz::Op;
using lowbit_fuzz::Writer;

/// $LOWBIT_FUZZ_CORPUS/<target>/, created; empty when the variable is unset.
fs::path corpus_dir(const char* target) {
    const char* root = std::getenv("LOWBIT_FUZZ_CORPUS");
    if (root == nullptr || *root == '\0') return {};
    const fs::path dir = fs::path(root) / target;
    fs::create_directories(dir);
    return dir;
}

/// Checks the seed's header names an operation and a format the target knows, and writes it to `dir`
/// unless `dir` is empty.
void write_seed(const fs::path& dir, const std::string& name, const Writer& seed) {
    INFO("seed " << name);
    REQUIRE(seed.bytes().size() >= 3);
    CHECK(seed.bytes()[1] < lowbit_fuzz::op_count);
    CHECK(seed.bytes()[2] < std::size(lowbit_fuzz::format_group_size));
    if (dir.empty()) return;
    std::ofstream file(dir / ("seed-" + name), std::ios::binary);
    file.write(reinterpret_cast<const char*>(seed.bytes().data()), static_cast<std::streamsize>(seed.bytes().size()));
    REQUIRE(file.good());
}

Writer header(Op op, std::uint8_t variant, std::uint8_t threads = 0) {
    Writer w;
    w.u8(threads).u8(static_cast<std::uint8_t>(op)).u8(variant);
    return w;
}

/// Floats cycling through plain values and the edges of float.
float seed_value(int i, bool hostile) {
    static const float plain[] = {0.5f, -0.25f, 1.0f, -1.0f, 0.125f, 0.0f, 0.75f, -0.625f};
    static const float edges[] = {FLT_MAX, -FLT_MAX, std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN(), FLT_TRUE_MIN, -0.0f, FLT_MIN, 1e30f};
    return hostile && i % 5 == 0 ? edges[(i / 5) % 8] : plain[i % 8];
}

}  // namespace

TEST_CASE("fuzz seeds: fuzz_quantized", "[fuzz-seeds]") {
    const fs::path dir = corpus_dir("quantized");  // empty when LOWBIT_FUZZ_CORPUS is unset: nothing written
    int written = 0;
    for (std::uint8_t format = 0; format < lowbit_fuzz::format_count; ++format) {
        const int group = lowbit_fuzz::format_group_size[format];
        const int bits = lowbit_fuzz::format_bits[format];
        for (const bool hostile : {false, true}) {
            // quantize: 2 x (2 groups) weights, then 1 row of x.
            Writer q = header(Op::quantize, format, 1);
            q.u8(2).u16(static_cast<std::uint16_t>(2 * group));
            for (int i = 0; i < 4 * group; ++i) q.f32(seed_value(i, hostile));
            q.u8(1);
            for (int i = 0; i < 2 * group; ++i) q.f32(seed_value(i + 3, false));
            write_seed(dir, "quantize-" + std::to_string(format) + (hostile ? "-hostile" : ""), q);
            ++written;

            // Hand-built consistent matrix: 3 rows, 1 group, then x [2, group] and a bias of 3.
            Writer m = header(Op::quantized_matrix, format, 2);
            m.flag(true).u8(3).u8(1);
            const int words = group * bits / 32;
            for (int i = 0; i < 3 * words; ++i) m.u32(0x9e3779b9u * static_cast<std::uint32_t>(i + 1));
            for (int i = 0; i < 3; ++i) m.f32(hostile && i == 1 ? std::numeric_limits<float>::quiet_NaN() : 0.01f * static_cast<float>(i + 1));
            for (int i = 0; i < 3; ++i) m.f32(-0.5f + static_cast<float>(i));
            m.u8(2).flag(true);
            for (int i = 0; i < 2 * group; ++i) m.f32(seed_value(i, false));
            m.flag(true);
            for (int i = 0; i < 3; ++i) m.f32(0.5f);
            write_seed(dir, "matrix-" + std::to_string(format) + (hostile ? "-hostile" : ""), m);
            ++written;
        }
        // Mismatched parts: codes 2 x words, scales 3 x 1, biases 2 x 2.
        Writer bad = header(Op::quantized_matrix, format);
        bad.flag(false).u8(2).u8(1).u8(static_cast<std::uint8_t>(group * bits / 32)).u8(3).u8(1).u8(2).u8(2);
        write_seed(dir, "matrix-mismatched-" + std::to_string(format), bad);
        ++written;
    }
    // Ternary weights: 2 x 4 codes, group 2, scales 2 x 2 (consistent); then group 0.
    for (const int group : {2, 0, -1}) {
        Writer t = header(Op::ternary_weights, 0);
        t.u8(2).u8(4);
        for (int i = 0; i < 8; ++i) t.u8(static_cast<std::uint8_t>(i % 3 == 0 ? 0xff : i % 3));
        t.u8(static_cast<std::uint8_t>(static_cast<std::int8_t>(group))).flag(false).u8(2).u8(2);
        for (int i = 0; i < 4; ++i) t.f32(0.25f * static_cast<float>(i + 1));
        write_seed(dir, "ternary-group" + std::to_string(group), t);
        ++written;
    }
    for (const int scales : {3, 1}) {
        Writer a = header(Op::int8_activations, 0);
        a.u8(3).u8(2);
        for (int i = 0; i < 6; ++i) a.u8(static_cast<std::uint8_t>(i * 40));
        a.u8(static_cast<std::uint8_t>(scales));
        for (int i = 0; i < scales; ++i) a.f32(0.5f);
        write_seed(dir, "int8-scales" + std::to_string(scales), a);
        ++written;
    }
    // BitNet span forms: 2 x 4 with group 2; (-1) x (-8); (2^62 + 1) x 4 against 4 values.
    {
        Writer b = header(Op::bitnet_sizes, 0);
        b.u8(0).u8(2).u8(0).u8(4).flag(true).u8(2).u8(0).u8(8);
        for (int i = 0; i < 8; ++i) b.f32(seed_value(i, false));
        b.flag(false);
        write_seed(dir, "bitnet-2x4", b);
        Writer n = header(Op::bitnet_sizes, 0);
        n.u8(1).u8(1).u8(1).u8(8).flag(true).u8(1).u8(0).u8(8);
        for (int i = 0; i < 8; ++i) n.f32(seed_value(i, false));
        write_seed(dir, "bitnet-negative", n);
        Writer o = header(Op::bitnet_sizes, 0);
        o.u8(2).i64((std::int64_t{1} << 62) + 1).u8(0).u8(4).flag(true).u8(1).u8(0).u8(4);
        for (int i = 0; i < 4; ++i) o.f32(seed_value(i, false));
        write_seed(dir, "bitnet-overflow", o);
        Writer d = header(Op::bitnet_sizes, 0);
        d.u8(0).u8(1).u8(0).u8(3).flag(true).u8(1).u8(0).u8(3).f32(FLT_TRUE_MIN).f32(0.0f).f32(-FLT_TRUE_MIN);
        write_seed(dir, "bitnet-denormal", d);
        written += 4;
    }
    // FakeQuantize: each instantiation, calibrate then forward; set_qparams with a tiny scale; FLT_MAX data.
    for (std::uint8_t variant = 0; variant < 4; ++variant) {
        for (const bool pytorch : {false, true}) {
            Writer f = header(Op::fake_quantize, variant, 1);
            f.flag(pytorch).u8(0).u8(2);
            f.u8(1).u8(6);  // calibrate on 6 values
            for (int i = 0; i < 6; ++i) f.f32(seed_value(i, false) * 3.0f);
            f.u8(2).u8(3).f32(FLT_MAX).f32(-FLT_MAX).f32(1.0f);  // observe the float extremes
            f.u8(8);
            for (int i = 0; i < 16; ++i) f.f32(seed_value(i, true));
            write_seed(dir, "fake-" + std::to_string(variant) + (pytorch ? "-pytorch" : ""), f);
            Writer s = header(Op::fake_quantize, variant);
            s.flag(pytorch).u8(0).u8(1).u8(0).f32(FLT_TRUE_MIN).i32(0).u8(4);
            for (int i = 0; i < 8; ++i) s.f32(seed_value(i, true));
            write_seed(dir, "fake-tiny-scale-" + std::to_string(variant) + (pytorch ? "-pytorch" : ""), s);
            written += 2;
        }
    }
    // PerChannelFakeQuantize: calibrated, set_qparams, and uncalibrated (backward_lsq before calibration).
    for (const std::uint8_t mode : {0, 2, 3}) {
        Writer p = header(Op::per_channel, mode);
        p.flag(false).u8(0).u8(0).u8(3).u8(4);
        for (int i = 0; i < 24; ++i) p.f32(seed_value(i, mode == 0));
        p.u8(mode);
        if (mode == 2) {
            p.u8(3).f32(0.1f).f32(0.2f).f32(0.3f).flag(true).i32(0).i32(0).i32(0);
        }
        p.u8(3);
        write_seed(dir, "per-channel-" + std::to_string(mode), p);
        ++written;
    }
    INFO("seeds written to " << dir.string());
    CHECK(written > 40);
}
