// Fake-quant forward and backward_clamped (lowbit's default config: 8-bit symmetric, x / s, half away
// from zero; raw-x band) over 64K floats (cache-resident, repeated 64 times per repetition) and 16M
// floats (memory-bound), beside the scalar reference loop and the plain Eigen array expression of the
// same formula, at every thread count. Ratios are against the Eigen expression; the fraction column is
// against the copy bandwidth measured in the same run (forward moves 2 floats per element: read x,
// write y; backward_clamped 3: read g and x, write dx). The "fwd pytorch" rows time the pytorch()
// preset (x * fl(1/s), half to even) beside the Eigen expression of that formula.
//
// "fake-quant x / s only" is the division alone (Eigen's x / s, one vdivps per vector and nothing
// else): every forward that divides, as docs/numerics.md N2 requires, needs at least this long, so its
// ratio against the Eigen expression is the ceiling for lowbit's forward ratio on this machine.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <lowbit/lowbit.hpp>

#include "harness.hpp"

namespace lowbit::bench {
namespace {

constexpr float scale = 0.02f;  // codes of x in [-3, 3): [-150, 150), so clamping happens too
constexpr float code_max = 127.0f;

struct Buffers {
    explicit Buffers(std::size_t count) : x(count), grad(count), out(count) {
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
        for (auto& value : x) value = uniform(rng);
        for (auto& value : grad) value = uniform(rng);
    }
    std::vector<float> x, grad, out;
};

enum class Pass { forward, backward_clamped, forward_pytorch };
enum class Impl { lowbit, eigen, scalar, divide_only };

const char* name_of(Pass pass, Impl impl) {
    if (pass == Pass::forward_pytorch) return impl == Impl::lowbit ? "fake-quant fwd pytorch lowbit" : "fake-quant fwd pytorch eigen";
    if (pass == Pass::forward && impl == Impl::divide_only) return "fake-quant x / s only";
    if (pass == Pass::forward) {
        return impl == Impl::lowbit ? "fake-quant forward lowbit"
               : impl == Impl::eigen ? "fake-quant forward eigen"
                                     : "fake-quant forward scalar";
    }
    return impl == Impl::lowbit ? "fake-quant backward lowbit"
           : impl == Impl::eigen ? "fake-quant backward eigen"
                                 : "fake-quant backward scalar";
}

Runner make_runner(Pass pass, Impl impl, std::size_t count, int passes) {
    auto buffers = std::make_shared<Buffers>(count);
    auto quantizer = std::make_shared<FakeQuantize<8>>(pass == Pass::forward_pytorch ? FakeQuantConfig::pytorch()
                                                                                      : FakeQuantConfig{});
    quantizer->set_qparams(scale, 0);
    return [=] {
        Buffers& b = *buffers;
        const auto n = static_cast<Eigen::Index>(count);
        Eigen::Map<const Eigen::ArrayXf> x(b.x.data(), n), grad(b.grad.data(), n);
        Eigen::Map<Eigen::ArrayXf> out(b.out.data(), n);
        for (int repeat = 0; repeat < passes; ++repeat) {
            if (pass == Pass::forward_pytorch) {
                const float inverse = 1.0f / scale;
                if (impl == Impl::lowbit) quantizer->forward(b.x, b.out);
                else out = (x * inverse).rint().max(-128.0f).min(127.0f) * scale;
            } else if (pass == Pass::forward) {
                if (impl == Impl::lowbit) quantizer->forward(b.x, b.out);
                else if (impl == Impl::eigen) out = (x / scale).round().max(-code_max).min(code_max) * scale;
                else if (impl == Impl::divide_only) out = x / scale;
                else detail::reference::fake_quantize_forward(quantizer->params(), b.x.data(), b.out.data(), count);
            } else {
                const float low = -code_max * scale, high = code_max * scale;
                if (impl == Impl::lowbit) quantizer->backward_clamped(b.grad, b.x, b.out);
                else if (impl == Impl::eigen) out = (x >= low && x <= high).select(grad, 0.0f);
                else detail::reference::backward_clamped(quantizer->mask(), b.grad.data(), b.x.data(), b.out.data(), count);
            }
            keep(b.out.data());
        }
    };
}

}  // namespace

void add_fake_quant_cases(Registry& registry) {
    struct Size {
        std::size_t count;
        int passes;
        const char* shape;
        const char* bandwidth;
    };
    const Size sizes[] = {{std::size_t{1} << 16, 64, "64K floats x 64", "bandwidth copy cache"},
                          {std::size_t{1} << 24, 1, "16M floats", "bandwidth copy dram"}};
    for (int threads : registry.options().thread_counts()) {
        for (const Size& size : sizes) {
            for (Pass pass : {Pass::forward, Pass::backward_clamped, Pass::forward_pytorch}) {
                for (Impl impl : {Impl::eigen, Impl::lowbit, Impl::scalar, Impl::divide_only}) {
                    if (pass == Pass::forward_pytorch && impl == Impl::scalar) continue;
                    if (pass != Pass::forward && impl == Impl::divide_only) continue;
                    Case c;
                    c.name = name_of(pass, impl);
                    c.shape = size.shape;
                    c.threads = threads;
                    const double floats_moved = pass == Pass::forward ? 2.0 : 3.0;
                    c.bytes = floats_moved * sizeof(float) * static_cast<double>(size.count) * size.passes;
                    c.baseline = impl == Impl::eigen ? "" : name_of(pass, Impl::eigen);
                    c.bandwidth_of = size.bandwidth;
                    c.prepare = [pass, impl, size]() { return make_runner(pass, impl, size.count, size.passes); };
                    registry.add(std::move(c));
                }
            }
        }
    }
}

}  // namespace lowbit::bench
