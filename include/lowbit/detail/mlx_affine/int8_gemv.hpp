// The int8-activation matmul on MLX affine codes (docs/numerics.md N11) for a few activation rows (the
// GEMV side; int8_gemm.hpp is the GEMM): kernel and threaded driver.
//
// Ops is one of the structs of detail/arch/int8.hpp (V = Ops::bytes code bytes per vector,
// L = Ops::lanes int32 lanes). A row of weight codes is read as bytes: the packed words themselves for
// Bits in {2, 4, 8} (a byte holds S = 8 / Bits codes, code j of the byte in bits j*Bits), or the row
// unpacked to one byte per code for Bits in {3, 5, 6} (then S = 1, as for 8 bits). A chunk is V code
// bytes = V*S codes; step t of a chunk is (bytes >> t*Bits) & mask, and the activation codes are
// permuted once per call (permute_x) so that byte j of step t of chunk c meets code c*V*S + j*S + t.
// One dot instruction per step then leaves, in lane i, the sum over the 4*S codes of bytes 4i..4i+3,
// which all lie in one weight group. Lanes of one group are summed exactly (integers) by a tree of
// merges (adjacent lanes, L vectors into one), giving a vector of L consecutive groups' isum; then,
// per lane, p = fl(fl(s*a) * float(isum)) and c = fl(b * xsum) are accumulated and the lanes summed
// at the end of the row (the order the reference's tolerance allows, int8_matmul_reference.hpp).
// MR rows of x share each loaded and unpacked code vector (MR = 1: GEMV, MR = 4: GEMM).
#pragma once

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../../formats/mlx_affine.hpp"
#include "../arch/int8.hpp"
#include "../gemm/int8_quantize_x.hpp"
#include "../quantized_view.hpp"
#include "../simd.hpp"
#include "../threading/parallel.hpp"
#include "../unroll.hpp"
#include "packing.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// How the int8 kernels read a row of codes of the format <GroupSize, Bits> with Ops.
template <class Ops, int GroupSize, int Bits>
struct Int8Layout {
    static constexpr bool packed = Bits == 2 || Bits == 4 || Bits == 8;  ///< read the words directly
    static constexpr int byte_bits = packed ? Bits : 8;                  ///< bits per code in the bytes read
    static constexpr int steps = 8 / byte_bits;                          ///< codes per byte (S)
    static constexpr int chunk_codes = Ops::bytes * steps;
    static constexpr int lane_codes = 4 * steps;
    static constexpr int lanes_per_group = GroupSize / lane_codes;
    static constexpr int segment = std::min(Ops::lanes, lanes_per_group);  ///< lanes per group in a vector
    static constexpr int chunks_per_vector = std::max(1, lanes_per_group / Ops::lanes);
    static constexpr int vectors_per_block = segment;  ///< vectors whose merge gives Ops::lanes groups
    static constexpr int block_groups = Ops::lanes;

    static Eigen::Index row_bytes(Eigen::Index K) { return K * byte_bits / 8; }
    static Eigen::Index chunks(Eigen::Index K) { return (row_bytes(K) + Ops::bytes - 1) / Ops::bytes; }
    static Eigen::Index blocks(Eigen::Index K) { return (K / GroupSize + block_groups - 1) / block_groups; }
    /// Length of one permuted activation row: whole blocks, zero padded.
    static Eigen::Index x_length(Eigen::Index K) {
        return blocks(K) * vectors_per_block * chunks_per_vector * chunk_codes;
    }
    static Eigen::Index padded_groups(Eigen::Index K) { return blocks(K) * block_groups; }
};

/// xq (one row, K codes) into the chunk/step order of Int8Layout (length x_length(K), zero padded).
template <class Layout>
void permute_x_int8(const std::int8_t* xq, Eigen::Index K, std::int8_t* x_perm, int vector_bytes) {
    constexpr int S = Layout::steps;
    std::fill(x_perm, x_perm + Layout::x_length(K), std::int8_t{0});
    for (Eigen::Index k = 0; k < K; ++k) {
        const Eigen::Index c = k / Layout::chunk_codes, within = k % Layout::chunk_codes;
        const Eigen::Index j = within / S, t = within % S;
        x_perm[(c * S + t) * vector_bytes + j] = xq[k];
    }
}

/// Prepared activations: per row the permuted codes, a and xsum (both padded with zeros).
struct Int8GroupActivations {
    Eigen::Index x_length = 0, groups = 0;  ///< per-row strides of x_perm and of a / x_sum
    std::vector<std::int8_t, xsimd::aligned_allocator<std::int8_t, 64>> x_perm;
    std::vector<float> a, x_sum;
};

template <class Arch, class Ops, int GroupSize, int Bits>
Int8GroupActivations prepare_activations_int8(const float* x, Eigen::Index x_stride, Eigen::Index M, Eigen::Index K) {
    using layout = Int8Layout<Ops, GroupSize, Bits>;
    Int8GroupActivations act;
    act.x_length = layout::x_length(K);
    act.groups = layout::padded_groups(K);
    act.x_perm.resize(static_cast<std::size_t>(M * act.x_length));
    act.a.assign(static_cast<std::size_t>(M * act.groups), 0.0f);
    act.x_sum.assign(static_cast<std::size_t>(M * act.groups), 0.0f);
    std::vector<std::int8_t> xq(static_cast<std::size_t>(K));
    for (Eigen::Index m = 0; m < M; ++m) {
        quantize_x_int8_groups<Arch, GroupSize>(x + m * x_stride, K, xq.data(), act.a.data() + m * act.groups);
        permute_x_int8<layout>(xq.data(), K, act.x_perm.data() + m * act.x_length, Ops::bytes);
        dequantized_group_sums<GroupSize>(xq.data(), act.a.data() + m * act.groups, K,
                                          act.x_sum.data() + m * act.groups);
    }
    return act;
}

/// out[m * out_stride + n] for the MR activation rows starting at m0 (MR <= 4) and one weight row n,
/// whose code bytes are `bytes` (row_bytes(K) of them; read through a zero-padded copy at the tail).
template <class Ops, int GroupSize, int Bits, int MR>
LOWBIT_ALWAYS_INLINE inline void int8_row_dot(const std::uint8_t* bytes, Eigen::Index K, const float* scales,
                                              const float* biases, const Int8GroupActivations& act, Eigen::Index m0,
                                              float* out, Eigen::Index out_stride) {
    using layout = Int8Layout<Ops, GroupSize, Bits>;
    using vec = typename Ops::vec;
    using fvec = typename Ops::fvec;
    constexpr int S = layout::steps, V = Ops::bytes, L = Ops::lanes;
    constexpr int CPV = layout::chunks_per_vector, VPB = layout::vectors_per_block;
    constexpr std::uint8_t mask = static_cast<std::uint8_t>((1u << layout::byte_bits) - 1u);
    constexpr int levels = std::countr_zero(static_cast<unsigned>(VPB));
    const Eigen::Index groups = K / GroupSize, row_bytes = layout::row_bytes(K), chunks = layout::chunks(K);
    const Eigen::Index whole_chunks = row_bytes / V;
    alignas(64) std::uint8_t tail[V];

    // Plain arrays: std::array of an intrinsic type drops its alignment attribute (-Wignored-attributes).
    fvec total_p[MR], total_c[MR];
    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE { total_p[m] = total_c[m] = Ops::fzero(); });
    // Hoisted: the compiler cannot prove that the tail copy leaves act alone, and would reload these.
    const std::int8_t* x_rows[MR];
    const float* a_rows[MR];
    const float* sum_rows[MR];
    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
        x_rows[m] = act.x_perm.data() + (m0 + m) * act.x_length;
        a_rows[m] = act.a.data() + (m0 + m) * act.groups;
        sum_rows[m] = act.x_sum.data() + (m0 + m) * act.groups;
    });
    // Blocks whose chunks are all whole skip the bounds checks (every block but the last, usually).
    const Eigen::Index whole_blocks = whole_chunks / (VPB * CPV);
    auto run_block = [&]<bool Checked>(std::bool_constant<Checked>, Eigen::Index block) LOWBIT_ALWAYS_INLINE {
        // stack[m][level]: the merge tree of this block, built as a binary counter.
        vec stack[MR][levels + 1];
        static_for<VPB>([&](auto v_constant) LOWBIT_ALWAYS_INLINE {
            constexpr int v = decltype(v_constant)::value;
            vec acc[MR];
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE { acc[m] = Ops::zero(); });
            static_for<CPV>([&](auto i_constant) LOWBIT_ALWAYS_INLINE {
                const Eigen::Index c = (block * VPB + v) * CPV + decltype(i_constant)::value;
                if (Checked && c >= chunks) return;
                vec codes;
                if (!Checked || c < whole_chunks) {
                    codes = Ops::load(bytes + c * V);
                } else {
                    std::memset(tail, 0, sizeof tail);
                    std::memcpy(tail, bytes + c * V, static_cast<std::size_t>(row_bytes - c * V));
                    codes = Ops::load(tail);
                }
                static_for<S>([&](auto t_constant) LOWBIT_ALWAYS_INLINE {
                    constexpr int t = decltype(t_constant)::value;
                    vec step;
                    if constexpr (S == 1)
                        step = codes;
                    else if constexpr (t == 0)
                        step = Ops::byte_mask(codes, mask);
                    else if constexpr (t + 1 == S)
                        step = Ops::template shift_right<t * layout::byte_bits>(codes);
                    else
                        step = Ops::byte_mask(Ops::template shift_right<t * layout::byte_bits>(codes), mask);
                    if constexpr (t + 1 == S && S > 1) step = Ops::byte_mask(step, mask);  // 16-bit shift carries
                    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                        const std::int8_t* xp = x_rows[m] + (c * S + t) * V;
                        acc[m] = Ops::template dot<(Bits == 8 ? 8 : 6)>(acc[m], step, Ops::load(xp));
                    });
                });
            });
            // Binary-counter merge: v's trailing one bits say how many pending levels to fold in.
            static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
                vec current = acc[m];
                static_for<levels>([&](auto level_constant) LOWBIT_ALWAYS_INLINE {
                    constexpr int level = decltype(level_constant)::value;
                    constexpr bool carry = ((v + 1) & ((1 << (level + 1)) - 1)) == 0;  // bits 0..level of v set
                    if constexpr (carry) current = Ops::merge(stack[m][level], current);
                });
                constexpr int depth = std::countr_one(static_cast<unsigned>(v));
                stack[m][depth] = current;
            });
        });
        const Eigen::Index g0 = block * L;
        const int count = static_cast<int>(std::min<Eigen::Index>(L, groups - g0));
        const fvec s = Ops::fload_partial(scales + g0, count), b = Ops::fload_partial(biases + g0, count);
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            const float* a = a_rows[m] + g0;
            const float* xs = sum_rows[m] + g0;
            const fvec sa = Ops::fmul(s, Ops::fload_partial(a, L));
            total_p[m] = Ops::fadd(total_p[m], Ops::fmul(sa, Ops::to_float(stack[m][levels])));
            total_c[m] = Ops::fadd(total_c[m], Ops::fmul(b, Ops::fload_partial(xs, L)));
        });
    };
    Eigen::Index block = 0;
    for (; block < whole_blocks; ++block) run_block(std::false_type{}, block);
    for (; block < layout::blocks(K); ++block) run_block(std::true_type{}, block);
    static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
        out[(m0 + m) * out_stride] = Ops::freduce(Ops::fadd(total_p[m], total_c[m]));
    });
}

/// out[m * out_stride + n] = int8 matmul (N11) of x [M, K] (rows with stride x_stride, finite) and q;
/// GEMV when M = 1, else blocks of 4 rows (any M works; the dispatch uses it for a few rows only).
/// Threads over ranges of output columns.
template <class Arch, class Ops, int GroupSize, int Bits>
void qgemv_i8(const float* x, Eigen::Index x_stride, Eigen::Index M, const QuantizedView<MlxAffine<GroupSize, Bits>>& q,
              float* out, Eigen::Index out_stride) {
    using layout = Int8Layout<Ops, GroupSize, Bits>;
    const Eigen::Index N = q.rows(), K = q.cols();
    const Int8GroupActivations act = prepare_activations_int8<Arch, Ops, GroupSize, Bits>(x, x_stride, M, K);
    const Eigen::Index row_bytes = layout::row_bytes(K);
    // About 256 KiB of codes per range (a worker's worth), walked in slices of about 8 KiB that stay
    // in L1 while every block of 4 activation rows passes over them (a larger slice evicts the
    // activation rows; measured at M = 32, K = 4096). Rows of 3, 5 and 6 bits are unpacked to bytes
    // once per slice.
    const std::size_t grain = static_cast<std::size_t>(std::max<Eigen::Index>(4, (Eigen::Index{1} << 18) / row_bytes));
    const Eigen::Index slice = std::max<Eigen::Index>(1, (Eigen::Index{1} << 13) / row_bytes);
    parallel_for(static_cast<std::size_t>(N), grain, [&](std::size_t begin, std::size_t end) {
        std::vector<std::uint8_t> unpacked(layout::packed ? 0 : static_cast<std::size_t>(slice * K));
        for (Eigen::Index n0 = static_cast<Eigen::Index>(begin); n0 < static_cast<Eigen::Index>(end); n0 += slice) {
            const Eigen::Index n1 = std::min<Eigen::Index>(n0 + slice, static_cast<Eigen::Index>(end));
            if constexpr (!layout::packed)
                for (Eigen::Index n = n0; n < n1; ++n)
                    unpack_codes<Bits>(&q.codes(n, 0), static_cast<std::size_t>(K), unpacked.data() + (n - n0) * K);
            auto bytes_of = [&](Eigen::Index n) -> const std::uint8_t* {
                if constexpr (layout::packed)
                    return reinterpret_cast<const std::uint8_t*>(&q.codes(n, 0));
                else
                    return unpacked.data() + (n - n0) * K;
            };
            auto rows = [&]<int MR>(std::integral_constant<int, MR>, Eigen::Index m) {
                for (Eigen::Index n = n0; n < n1; ++n)
                    int8_row_dot<Ops, GroupSize, Bits, MR>(bytes_of(n), K, &q.scales(n, 0), &q.biases(n, 0), act, m,
                                                           out + n, out_stride);
            };
            Eigen::Index m = 0;
            for (; m + 4 <= M; m += 4) rows(std::integral_constant<int, 4>{}, m);
            if (M - m == 3) rows(std::integral_constant<int, 3>{}, m);
            if (M - m == 2) rows(std::integral_constant<int, 2>{}, m);
            if (M - m == 1) rows(std::integral_constant<int, 1>{}, m);
        }
    });
}

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
