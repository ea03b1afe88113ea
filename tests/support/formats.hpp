// What the typed tests (TEMPLATE_LIST_TEST_CASE over lowbit::QuantizedFormats) read from a format
// generically: its name for messages and a group's bias (0 in a format without biases).
// A format's decode rule itself is its own (Format::value, Format::group_scale).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include <lowbit/formats/formats.hpp>
#include <lowbit/quantized_matrix.hpp>

namespace lowbit::test {

/// "affine g64 q4": mode, group size and bits, for INFO messages.
template <class Format>
std::string format_text() {
    return std::string(Format::mode) + " g" + std::to_string(Format::group_size) + " q" + std::to_string(Format::bits);
}

/// The bias of group g of row n: q.biases(n, g), or 0 in a format without biases.
template <class Format>
double group_bias(const lowbit::QuantizedMatrixOf<Format>& q, Eigen::Index n, Eigen::Index g) {
    if constexpr (Format::has_biases) return q.biases(n, g);
    else return 0.0;
}

/// Every bit width: 1, 3, 4, 5 and 8 at g64, 2 and 6 in groups of 16 (one word a group; three words a
/// group, codes straddling them); g32 and g128 at 3 bits (codes that straddle words) and 4 bits: a set
/// of affine formats that reaches every bit width's code path and every group size.
using RepresentativeAffineFormats = std::tuple<MlxAffine<64, 1>, MlxAffine<16, 2>, MlxAffine<64, 3>, MlxAffine<64, 4>,
                                               MlxAffine<64, 5>, MlxAffine<16, 6>, MlxAffine<64, 8>, MlxAffine<32, 3>,
                                               MlxAffine<128, 3>, MlxAffine<32, 4>, MlxAffine<128, 4>>;

// The formats the typed tests run on. By default the kernel and layer tests run on every format and the
// PTQ methods (each one template over group size and bits) on the representative set. A build that
// defines LOWBIT_TEST_REPRESENTATIVE_FORMATS (CMake: LOWBIT_TEST_ALL_FORMATS=OFF) narrows both: the CI
// presets that rebuild the same code for another instruction set, xsimd version or sanitizer, while the
// default build runs every format.
#ifdef LOWBIT_TEST_REPRESENTATIVE_FORMATS
using TestedAffineFormats = RepresentativeAffineFormats;
/// Bits 2, 3, 4 and 8; group sizes 32, 64 and 128.
using PtqTestFormats = std::tuple<MlxAffine<64, 2>, MlxAffine<64, 3>, MlxAffine<64, 4>, MlxAffine<64, 8>,
                                  MlxAffine<32, 3>, MlxAffine<128, 4>>;
#else
using TestedAffineFormats = MlxAffineFormats;
using PtqTestFormats = RepresentativeAffineFormats;
#endif
/// The affine formats above and the three floating-point formats.
using TestedFormats = decltype(std::tuple_cat(std::declval<TestedAffineFormats>(), std::tuple<Mxfp4, Nvfp4, Mxfp8>{}));

/// The formats of the std::tuple List for which Keep<Format>::value holds, as a std::tuple.
template <class List, template <class> class Keep>
struct FilterFormats;
template <class... Formats, template <class> class Keep>
struct FilterFormats<std::tuple<Formats...>, Keep> {
    using type = decltype(std::tuple_cat(
        std::declval<std::conditional_t<Keep<Formats>::value, std::tuple<Formats>, std::tuple<>>>()...));
};
template <class Format>
struct IsNarrowAffine : std::bool_constant<Format::has_biases && Format::bits <= 4> {};
template <class Format>
struct IsWideOrFloat : std::bool_constant<!IsNarrowAffine<Format>::value> {};

/// TestedFormats in two halves for typed tests split over two units: the affine formats of 1 to 4 bits,
/// and the rest (wider affine formats, floating-point formats).
using TestedNarrowAffineFormats = typename FilterFormats<TestedFormats, IsNarrowAffine>::type;
using TestedWideFormats = typename FilterFormats<TestedFormats, IsWideOrFloat>::type;

}  // namespace lowbit::test
