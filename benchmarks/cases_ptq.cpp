// Post-training quantizers (include/lowbit/ptq/, docs/numerics.md N13) on a 4096 x 4096 layer, against
// round-to-nearest (`quantize q4 g64`) of the same matrix: clip_search, hqq, and gptq with 512
// calibration rows. They take seconds, so they are opt-in: only `--filter ptq` (or a filter naming
// them) runs them.
#include <memory>

#include <lowbit/lowbit.hpp>
#include <lowbit/ptq.hpp>

#include "harness.hpp"

namespace lowbit::bench {

void add_ptq_cases(Registry& registry) {
    constexpr int n = 4096, k = 4096, calibration_rows = 512;
    Case base;
    base.shape = "N=" + std::to_string(n) + " K=" + std::to_string(k);
    base.threads = 1;  // the time goals are for one thread
    base.baseline = "quantize q4 g64";
    base.opt_in = true;
    base.slow = true;

    Case clip = base;
    clip.name = "ptq clip_search q4 g64";
    clip.prepare = []() -> Runner {
        auto w = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(n, k));
        return [w] { keep(clip_search<64, 4>(*w).codes.data()); };
    };
    registry.add(std::move(clip));

    Case half_quadratic = base;
    half_quadratic.name = "ptq hqq q4 g64";
    half_quadratic.prepare = []() -> Runner {
        auto w = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(n, k));
        return [w] { keep(hqq<64, 4>(*w).codes.data()); };
    };
    registry.add(std::move(half_quadratic));

    Case optimal_brain = base;
    optimal_brain.name = "ptq gptq q4 g64";
    optimal_brain.shape += " X=" + std::to_string(calibration_rows);
    optimal_brain.baseline = "";  // its shape names the calibration rows, so no quantize row matches
    optimal_brain.prepare = []() -> Runner {
        auto w = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(n, k));
        auto x = std::make_shared<RowMatrixXf>(RowMatrixXf::Random(calibration_rows, k));
        return [w, x] { keep(gptq<64, 4>(*w, *x).codes.data()); };
    };
    registry.add(std::move(optimal_brain));
}

}  // namespace lowbit::bench
