// This machine's limits, measured in the same run as everything else: streaming read and copy
// bandwidth over arrays far larger than the caches ("dram") and over cache-resident ones ("cache").
#include <cstring>
#include <memory>
#include <vector>

#include <lowbit/detail/threading/parallel.hpp>
#include <lowbit/detail/simd.hpp>

#include "harness.hpp"

namespace lowbit::bench {
namespace {

namespace simd = lowbit::detail::simd;

/// Sum of `count` floats read as four concurrent sequential streams (one per quarter of the range),
/// each into its own vector accumulator: several streams keep more cache-line requests in flight
/// than one, as a GEMV over several rows does, so this is the read bandwidth a kernel can reach.
float streaming_sum(const float* values, std::size_t count) {
    using batch = simd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    const std::size_t quarter = count / 4 / lanes * lanes;
    const float* s0 = values;
    const float* s1 = values + quarter;
    const float* s2 = values + 2 * quarter;
    const float* s3 = values + 3 * quarter;
    batch a(0.0f), b(0.0f), c(0.0f), d(0.0f);
    for (std::size_t i = 0; i < quarter; i += lanes) {
        a += batch::load_aligned(s0 + i);
        b += batch::load_aligned(s1 + i);
        c += batch::load_aligned(s2 + i);
        d += batch::load_aligned(s3 + i);
    }
    float total = simd::reduce_add((a + b) + (c + d));
    for (std::size_t i = 4 * quarter; i < count; ++i) total += values[i];
    return total;
}

struct AlignedFloats {
    explicit AlignedFloats(std::size_t count)
        : values(static_cast<float*>(::operator new[](count * sizeof(float), std::align_val_t{64}))), size(count) {
        for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i % 1024) * 0.5f;
    }
    ~AlignedFloats() { ::operator delete[](values, std::align_val_t{64}); }
    AlignedFloats(const AlignedFloats&) = delete;
    AlignedFloats& operator=(const AlignedFloats&) = delete;
    float* values;
    std::size_t size;
};

/// Splits `count` floats into per-thread chunks of whole cache lines.
template <class Body>
void for_chunks(std::size_t count, Body&& body) {
    constexpr std::size_t line = 16;  // floats per 64-byte line
    lowbit::detail::parallel_for(count / line, 4096, [&](std::size_t begin, std::size_t end) {
        body(begin * line, (end - begin) * line);
    });
}

void add_read(Registry& registry, const char* name, const char* shape, std::size_t bytes, int passes, int threads) {
    Case c;
    c.name = name;
    c.shape = shape;
    c.threads = threads;
    c.bytes = static_cast<double>(bytes) * passes;
    c.prepare = [bytes, passes]() -> Runner {
        auto data = std::make_shared<AlignedFloats>(bytes / sizeof(float));
        return [data, passes] {
            for (int pass = 0; pass < passes; ++pass) {
                for_chunks(data->size, [&](std::size_t offset, std::size_t count) {
                    keep(streaming_sum(data->values + offset, count));
                });
            }
        };
    };
    registry.add(std::move(c));
}

void add_copy(Registry& registry, const char* name, const char* shape, std::size_t bytes, int passes, int threads) {
    Case c;
    c.name = name;
    c.shape = shape;
    c.threads = threads;
    c.bytes = 2.0 * static_cast<double>(bytes) * passes;  // read the source, write the destination
    c.prepare = [bytes, passes]() -> Runner {
        auto source = std::make_shared<AlignedFloats>(bytes / sizeof(float));
        auto destination = std::make_shared<AlignedFloats>(bytes / sizeof(float));
        return [source, destination, passes] {
            for (int pass = 0; pass < passes; ++pass) {
                for_chunks(source->size, [&](std::size_t offset, std::size_t count) {
                    std::memcpy(destination->values + offset, source->values + offset, count * sizeof(float));
                });
                keep(destination->values);
            }
        };
    };
    registry.add(std::move(c));
}

}  // namespace

void add_bandwidth_cases(Registry& registry) {
    constexpr std::size_t dram_bytes = std::size_t{256} << 20;   // far beyond any L3 here
    constexpr std::size_t cache_bytes = std::size_t{128} << 10;  // fits L2 (per core)
    constexpr int cache_passes = 1024;
    for (int threads : registry.options().thread_counts()) {
        add_read(registry, "bandwidth read dram", "256 MiB", dram_bytes, 1, threads);
        add_copy(registry, "bandwidth copy dram", "2 x 256 MiB", dram_bytes, 1, threads);
        add_read(registry, "bandwidth read cache", "128 KiB x 1024", cache_bytes * threads, cache_passes, threads);
        add_copy(registry, "bandwidth copy cache", "2 x 64 KiB x 1024", cache_bytes / 2 * threads, cache_passes,
                 threads);
    }
}

}  // namespace lowbit::bench
