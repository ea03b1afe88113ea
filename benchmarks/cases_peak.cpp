// This machine's arithmetic limits, measured in the same run as everything else, like the bandwidth
// rows: "peak f32 fma" (GFLOP/s of the widest fused multiply-add xsimd gives this build) and "peak int8
// dot" (GOP/s of the int8 dot product the int8 kernels use: vpdpbusd on AVX-512 VNNI, vpmaddubsw +
// vpmaddwd on AVX2; 2 operations per byte product). Each thread runs independent accumulator chains,
// enough of them to cover the instruction's latency, over values kept in registers.
#include <array>
#include <cstddef>
#include <cstring>
#include <string>
#include <memory>

#include <lowbit/detail/arch/int8.hpp>
#include <lowbit/detail/simd.hpp>
#include <lowbit/detail/threading/parallel.hpp>
#include <lowbit/detail/unroll.hpp>

#include "harness.hpp"

namespace lowbit::bench {
namespace {

namespace simd = lowbit::detail::simd;

constexpr int chains = 12;          // independent accumulators per thread (latency x throughput <= 12)
constexpr long iterations = 1 << 18;  // per thread and repetition

/// Runs `chain_step` chains x iterations times on each of `threads` threads.
template <class Body>
void on_every_thread(int threads, Body&& body) {
    lowbit::detail::parallel_for(static_cast<std::size_t>(threads), 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t) body();
    });
}

float fma_chains() {
    using batch = simd::batch<float>;
    std::array<batch, chains> acc;
    for (int i = 0; i < chains; ++i) acc[static_cast<std::size_t>(i)] = batch(static_cast<float>(i));
    const batch factor(0.999999f), step(1e-6f);
    for (long n = 0; n < iterations; ++n) {
        lowbit::detail::static_for<chains>([&](auto i) { acc[i] = simd::fma(acc[i], factor, step); });
    }
    batch total = acc[0];
    for (int i = 1; i < chains; ++i) total += acc[static_cast<std::size_t>(i)];
    return simd::reduce_add(total);
}

#if defined(LOWBIT_HAS_INT8_AVX512_VNNI) || defined(LOWBIT_HAS_INT8_AVX2)
using Ops = simd::int8::best;

int dot_chains() {
    typename Ops::vec acc[chains];  // a plain array: std::array drops the vector type's attributes
    for (auto& a : acc) a = Ops::zero();
    alignas(64) std::array<unsigned char, Ops::bytes> codes{}, x{};
    for (int i = 0; i < Ops::bytes; ++i) {
        codes[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i % 16);
        x[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i % 7);
    }
    const auto code_vec = Ops::load(codes.data()), x_vec = Ops::load(x.data());
    for (long n = 0; n < iterations; ++n) {
        // 6-bit codes: the single-instruction-pair route on AVX2 (8-bit codes take two there).
        lowbit::detail::static_for<chains>([&](auto i) { acc[i] = Ops::template dot<6>(acc[i], code_vec, x_vec); });
    }
    auto total = acc[0];
    for (int i = 1; i < chains; ++i) total = Ops::add(total, acc[i]);
    alignas(64) std::array<int, Ops::lanes> lanes{};
    std::memcpy(lanes.data(), &total, sizeof total);
    return lanes[0];
}
#endif

}  // namespace

void add_peak_cases(Registry& registry) {
    for (int threads : registry.options().thread_counts()) {
        Case fma;
        fma.name = peak_f32_fma_name;
        fma.shape = std::to_string(chains) + " chains";
        fma.threads = threads;
        fma.flops = 2.0 * simd::batch<float>::size * chains * double(iterations) * threads;
        fma.prepare = [threads]() -> Runner {
            return [threads] { on_every_thread(threads, [] { keep(fma_chains()); }); };
        };
        registry.add(std::move(fma));
#if defined(LOWBIT_HAS_INT8_AVX512_VNNI) || defined(LOWBIT_HAS_INT8_AVX2)
        Case dot;
        dot.name = peak_int8_dot_name;
        dot.shape = std::to_string(chains) + " chains";
        dot.threads = threads;
        dot.flops = 2.0 * Ops::bytes * chains * double(iterations) * threads;  // GOP/s in the GFLOP/s column
        dot.prepare = [threads]() -> Runner {
            return [threads] {
                on_every_thread(threads, [] {
                    const int lane = dot_chains();
                    keep(&lane);
                });
            };
        };
        registry.add(std::move(dot));
#endif
    }
}

}  // namespace lowbit::bench
