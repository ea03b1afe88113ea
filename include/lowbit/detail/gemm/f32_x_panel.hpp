// qgemm_f32's x panel: the rows of x packed once per call in the order QgemmF32Ukernel::run steps
// through them, so that a register block broadcasts from one stream (no row stride, which at a row of
// 4096 floats put all of a block's rows on one L1 set and held eight address registers). Layout of the
// block of Rows rows starting at row m (Rows = MR, or the rest at the end of a tile of MC rows):
//
//   | g0: k = 0: x[m][k], .., x[m + Rows - 1][k] | k = 1 | ... | k = G-1 | sum(x) of g0 | g0+1: ... |
//   element (row r, group g, step k <= G) at m * groups * (G + 1) + (g * (G + 1) + k) * Rows + r,
//   step G holding the group's sum of x (the bias row's multiplier), as the panel block's row G holds b.
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <Eigen/Core>

#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "f32_ukernel.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// x_block[(g * (GroupSize + 1) + k) * Rows + r] = x[r * x_stride + g * GroupSize + k] for k < GroupSize,
/// and x_sum[r * groups + g] at k = GroupSize, for r < Rows, g < groups: a register block's rows of
/// x in the order QgemmF32Ukernel::run steps through them (one broadcast stream, no row stride). W x W
/// squares through simd::transpose_words where Rows <= W, element by element otherwise.
template <class Arch, int GroupSize, int Rows>
void pack_x_block(const float* x, Index x_stride, const float* x_sum, Index groups, float* x_block) {
    using ubatch = xsimd::batch<std::uint32_t, Arch>;
    constexpr Index W = static_cast<Index>(ubatch::size);
    std::array<ubatch, W> square{};  // rows Rows .. W-1 hold leftovers: their lanes are never stored
    alignas(64) std::array<float, W> lanes;
    for (Index g = 0; g < groups; ++g) {
        float* steps = x_block + g * (GroupSize + 1) * Rows;
        if constexpr (Rows <= W && GroupSize % W == 0) {
            for (Index k0 = 0; k0 < GroupSize; k0 += W) {
                for (Index r = 0; r < Rows; ++r)
                    square[static_cast<std::size_t>(r)] = simd::bit_cast<std::uint32_t>(
                        xsimd::batch<float, Arch>::load_unaligned(x + r * x_stride + g * GroupSize + k0));
                simd::transpose_words(square);
                for (Index c = 0; c < W; ++c) {
                    simd::bit_cast<float>(square[static_cast<std::size_t>(c)]).store_aligned(lanes.data());
                    std::memcpy(steps + (k0 + c) * Rows, lanes.data(), Rows * sizeof(float));
                }
            }
        } else {
            for (Index r = 0; r < Rows; ++r)
                for (Index k = 0; k < GroupSize; ++k) steps[k * Rows + r] = x[r * x_stride + g * GroupSize + k];
        }
        for (Index r = 0; r < Rows; ++r) steps[GroupSize * Rows + r] = x_sum[r * groups + g];
    }
}

/// x packed for QgemmF32Ukernel::run, M rows in register blocks as qgemm_f32 walks them (per tile of MC
/// rows, blocks of MR rows, the tile's last one of the rest): the block of rows [m, m + Rows) at m *
/// groups * (GroupSize + 1) floats, laid out by pack_x_block<Rows> (block()). x_sum: M rows of `groups`
/// group sums. Blocks split over threads, blocks_per_range at a time. The buffer is the calling thread's, kept between
/// calls up to retained_bytes (allocated per call, its first touch cost 2 to 7 % of the GEMM at M = 256 and 512 in page
/// faults; benchmarks/README.md) and released at the end of a call that needed more.
template <class Arch, int GroupSize>
class PackedX {
public:
    static constexpr std::size_t retained_bytes = std::size_t{16} << 20;
    static constexpr std::size_t blocks_per_range = 8;

    PackedX(const float* x, Index x_stride, Index M, const float* x_sum, Index groups)
        : floats_(buffer()), groups_(groups) {
        using blocking = QgemmF32Ukernel<Arch>;
        constexpr int MR = blocking::MR;
        floats_.resize(static_cast<std::size_t>(M * groups * (GroupSize + 1)));
        std::vector<Index> block_rows;  // the first row of every register block, then M
        for (Index m0 = 0; m0 < M; m0 += blocking::MC)
            for (Index m = m0; m < std::min(M, m0 + blocking::MC); m += MR) block_rows.push_back(m);
        block_rows.push_back(M);
        parallel_for(block_rows.size() - 1, blocks_per_range, [&](std::size_t begin, std::size_t end) {
            for (std::size_t b = begin; b < end; ++b) {
                const Index m = block_rows[b], rows = block_rows[b + 1] - m;
                static_for<MR + 1>([&](auto count) {
                    constexpr int Rows = decltype(count)::value;
                    if constexpr (Rows > 0)
                        if (rows == Rows)
                            pack_x_block<Arch, GroupSize, Rows>(x + m * x_stride, x_stride, x_sum + m * groups, groups,
                                                                floats_.data() + m * groups * (GroupSize + 1));
                });
            }
        });
    }
    ~PackedX() {
        if (floats_.capacity() * sizeof(float) > retained_bytes) {
            floats_.clear();
            floats_.shrink_to_fit();
        }
    }
    PackedX(const PackedX&) = delete;
    PackedX& operator=(const PackedX&) = delete;

    /// The register block of `rows` rows from row m, at group g0.
    const float* block(Index m, Index rows, Index g0) const noexcept {
        return floats_.data() + (m * groups_ + g0 * rows) * (GroupSize + 1);
    }

private:
    using Buffer = std::vector<float, xsimd::aligned_allocator<float, Arch::alignment()>>;
    static Buffer& buffer() {
        static thread_local Buffer floats;
        return floats;
    }
    Buffer& floats_;
    Index groups_;
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
