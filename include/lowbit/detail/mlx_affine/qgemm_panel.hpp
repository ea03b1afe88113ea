// qgemm_f32 panel packing: the codes of one group of NC output columns unpacked into a float panel
// [GroupSize][NC] (k-major, zero-padded to a multiple of NR), with the columns' scales and biases, for
// QgemmF32Ukernel. Vector unpack for Bits in {2, 4, 8}, the scalar block unpacker otherwise.
#pragma once

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "../../quantized_matrix.hpp"
#include "../simd.hpp"
#include "../unroll.hpp"
#include "matmul_common.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

using Index = Eigen::Index;

/// Unpacks group g of columns [n0, n0 + nc) into panel[k * panel_stride + j] (k < GroupSize,
/// j < panel_stride; columns nc.. are zero) and their scales and biases into panel_scales/biases.
template <class Arch, int GroupSize, int Bits>
void build_panel(const QuantizedMatrix<GroupSize, Bits>& q, Index g, Index n0, Index nc, Index panel_stride,
                 float* panel, float* panel_scales, float* panel_biases, std::uint32_t* words_t) {
    constexpr int words_per_group = QuantizedMatrix<GroupSize, Bits>::words_per_group;
    for (Index j = 0; j < panel_stride; ++j) {
        panel_scales[j] = j < nc ? q.scales(n0 + j, g) : 0.0f;
        panel_biases[j] = j < nc ? q.biases(n0 + j, g) : 0.0f;
    }
    if constexpr (MlxAffine<GroupSize, Bits>::codes_in_whole_words) {
        using ubatch = xsimd::batch<std::uint32_t, Arch>;
        using fbatch = xsimd::batch<float, Arch>;
        constexpr Index W = static_cast<Index>(fbatch::size);
        constexpr int codes_per_word = 32 / Bits;
        // Transpose the group's words to [word][column], then unpack W columns per vector.
        for (Index j = 0; j < panel_stride; ++j) {
            const std::uint32_t* words = j < nc ? &q.codes(n0 + j, g * words_per_group) : nullptr;
            for (int w = 0; w < words_per_group; ++w) words_t[w * panel_stride + j] = words ? words[w] : 0u;
        }
        const ubatch mask((std::uint32_t{1} << Bits) - 1);
        for (int w = 0; w < words_per_group; ++w)
            for (Index j = 0; j < panel_stride; j += W) {
                const ubatch words = ubatch::load_unaligned(words_t + w * panel_stride + j);
                static_for<codes_per_word>([&](auto step) {
                    constexpr int t = decltype(step)::value;
                    const ubatch code = (words >> (t * Bits)) & mask;
                    xsimd::batch_cast<float>(simd::bit_cast<std::int32_t>(code))
                        .store_unaligned(panel + (w * codes_per_word + t) * panel_stride + j);
                });
            }
    } else {
        std::array<float, GroupSize> codes{};
        for (Index j = 0; j < panel_stride; ++j) {
            if (j < nc) unpack_codes<Bits>(&q.codes(n0 + j, g * words_per_group), GroupSize, codes.data());
            else codes.fill(0.0f);
            for (int k = 0; k < GroupSize; ++k) panel[k * panel_stride + j] = codes[static_cast<std::size_t>(k)];
        }
    }
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
