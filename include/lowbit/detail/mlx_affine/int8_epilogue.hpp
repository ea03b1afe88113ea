// The MLX affine epilogue of the int8 GEMM (docs/numerics.md N11; microkernel in gemm/int8_ukernel.hpp).
#pragma once

#include "../config.hpp"

#include <Eigen/Core>

#include "../gemm/int8_panels.hpp"
#include "../gemm/int8_ukernel.hpp"
#include "../unroll.hpp"

LOWBIT_BEGIN_NAMESPACE
namespace detail::kernels {

/// The N11 epilogue of the MLX affine format: at the end of group g, per output, total = fma(fl(s *
/// a), float(isum), total) and then total = fma(b, xsum, total) (s, b: the record's two parameter slots;
/// a, xsum: the row's); the totals are the outputs (TotalsAreOutputs; the epilogue's contract:
/// gemm/int8_ukernel.hpp).
struct AffineInt8Epilogue : TotalsAreOutputs {
    static constexpr int param_slots = 2;
    static constexpr bool integer_total = false;  ///< whether group() keeps int32 totals across groups

    template <class Ops, int MR, int NJ>
    LOWBIT_ALWAYS_INLINE static void group(const Int8BlockData& rows, Eigen::Index g, const float* params,
                                           const typename Ops::vec (&acc)[MR][NJ], typename Ops::fvec (&total)[MR][NJ],
                                           typename Ops::vec (&)[MR][NJ]) {
        using fvec = typename Ops::fvec;
        constexpr int L = Ops::lanes, NR = NJ * L;
        fvec s[NJ], b[NJ];
        static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
            s[j] = Ops::fload(params + j * L);
            b[j] = Ops::fload(params + NR + j * L);
        });
        static_for<MR>([&](auto m) LOWBIT_ALWAYS_INLINE {
            const fvec scale = Ops::fbroadcast(rows.a[g * MR + m]), sum = Ops::fbroadcast(rows.x_sum[g * MR + m]);
            static_for<NJ>([&](auto j) LOWBIT_ALWAYS_INLINE {
                total[m][j] = Ops::fmadd(Ops::fmul(s[j], scale), Ops::to_float(acc[m][j]), total[m][j]);
                total[m][j] = Ops::fmadd(b[j], sum, total[m][j]);
            });
        });
    }
};

}  // namespace detail::kernels
LOWBIT_END_NAMESPACE
