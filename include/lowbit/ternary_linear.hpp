// TernaryLinear: a deployed BitNet b1.58 layer (docs/numerics.md N14), the packed
// ternary weights of BitLinear::deploy() with int8 activations per token.
//
//   weights  [out, in] ternary codes t in {-1, 0, 1}, packed as I2 (2 bits per weight) or TQ1 (5 per
//            byte, 1.6 bits); layouts in detail/ternary/packing.hpp, file form in io/ternary_checkpoint.hpp
//   scales   one absmean gamma per tensor ([1, 1]) or per group of 64 inputs of a row ([out, in / 64])
//   bias     optional, [out]
// forward(x [M, in]) -> [M, out]: a[m], xq = the per-token int8 quantization of x (A8, as
// quantize_activations_int8), isum = sum_k t[n,k] xq[m,k] exact in int32, then
//   per tensor  y = fma(fl(float(isum) * gamma), a[m], bias[n])
//   per group   p = fma(float(isum_g), gamma[n,g], p) over g ascending from 0;  y = fma(p, a[m], bias[n])
// which is BitLinear::forward's arithmetic: the deployed output equals the training output bit for bit.
// With an int8 instruction set (AVX-512 VNNI or AVX2) the first forward also unpacks the codes, I2 or
// TQ1, into the shared int8 GEMM's 2-bit panels (detail/ternary/int8_gemm.hpp) and keeps them: 2 bits
// per weight more memory (plus the per-group scales again), shared by copies.
// Errors (std::invalid_argument naming the value): a code outside {-1, 0, 1}, a NaN, infinite or
// non-positive scale, a NaN or infinite bias or input element, shapes that disagree, a group size other
// than 64, in > 2^22 (the int32 bound of the kernels), and packed bytes holding the unused fourth value.
#pragma once

#include "detail/config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "bitnet.hpp"
#include "detail/checks.hpp"
#include "detail/dispatch/ternary.hpp"
#include "detail/ternary/packing.hpp"
#include "detail/ternary/reference.hpp"
#include "matrix_types.hpp"

LOWBIT_BEGIN_NAMESPACE

/// Name of a format as in files and messages: "i2" or "tq1".
inline const char* ternary_format_name(TernaryFormat format) {
    return format == TernaryFormat::i2 ? "i2" : "tq1";
}

class TernaryLinear {
public:
    static constexpr int group_size = detail::ternary::group_codes;  ///< inputs per scale in per-group mode

    TernaryLinear() = default;

    /// Packs `weights` (per tensor, or per group of 64) in `format`. Throws as the header says.
    explicit TernaryLinear(const TernaryWeights& weights, std::optional<Eigen::VectorXf> bias = std::nullopt,
                           TernaryFormat format = TernaryFormat::i2) {
        constexpr const char* function = "lowbit::TernaryLinear";
        weights.check_shapes(function);
        init_shape(weights.codes.rows(), weights.codes.cols(), weights.per_tensor, weights.group_size, format,
                   function);
        for (Eigen::Index r = 0; r < weights.codes.rows(); ++r)
            for (Eigen::Index c = 0; c < weights.codes.cols(); ++c)
                if (weights.codes(r, c) < -1 || weights.codes(r, c) > 1)
                    throw std::invalid_argument(std::string(function) + ": code " +
                                                std::to_string(weights.codes(r, c)) + " at (" + std::to_string(r) +
                                                ", " + std::to_string(c) + ") is not -1, 0 or 1");
        set_scales_and_bias(weights.scales, std::move(bias), function);
        packed_.resize(static_cast<std::size_t>(out_ * row_bytes_));
        for (Eigen::Index r = 0; r < out_; ++r)
            detail::ternary::pack_row(format_, &weights.codes(r, 0), in_, packed_.data() + r * row_bytes_);
    }

    /// A layer from packed bytes in the file form (io/ternary_checkpoint.hpp): [out, row_bytes] bytes,
    /// I2 digits 0..2 (3 is refused), TQ1 base-3 numbers 0..242 (243..255 are refused). scales [1, 1]
    /// per tensor or [out, in / 64] per group. Throws std::invalid_argument naming the row and byte of
    /// the first bad value, or as the constructor above.
    static TernaryLinear from_packed(TernaryFormat format, Eigen::Index out_features, Eigen::Index in_features,
                                     bool per_tensor, std::span<const std::uint8_t> packed, const RowMatrixXf& scales,
                                     std::optional<Eigen::VectorXf> bias = std::nullopt) {
        constexpr const char* function = "lowbit::TernaryLinear::from_packed";
        TernaryLinear layer;
        layer.init_shape(out_features, in_features, per_tensor, per_tensor ? static_cast<int>(in_features) : group_size,
                         format, function);
        detail::require_same_size(function, "packed bytes", packed.size(), "out * row_bytes",
                                  static_cast<std::size_t>(out_features * layer.row_bytes_));
        layer.packed_.resize(packed.size());
        for (std::size_t i = 0; i < packed.size(); ++i) {
            const std::uint8_t byte = packed[i];
            const auto where = [&] {
                return " in row " + std::to_string(i / static_cast<std::size_t>(layer.row_bytes_)) + ", byte " +
                       std::to_string(i % static_cast<std::size_t>(layer.row_bytes_));
            };
            if (format == TernaryFormat::i2) {
                for (int s = 0; s < 4; ++s)
                    if (((byte >> (2 * s)) & 3) == 3)
                        throw std::invalid_argument(std::string(function) + ": I2 byte " + std::to_string(byte) +
                                                    where() + " holds the unused code 3 (field " + std::to_string(s) +
                                                    ")");
                layer.packed_[i] = byte;
            } else {
                if (byte >= 243)
                    throw std::invalid_argument(std::string(function) + ": TQ1 byte " + std::to_string(byte) + where() +
                                                " is not a base-3 number of 5 digits (0..242)");
                layer.packed_[i] = detail::ternary::tq1_memory_byte(byte);
            }
        }
        layer.set_scales_and_bias(scales, std::move(bias), function);
        return layer;
    }

    /// The packed codes in the file form of from_packed, [out, row_bytes] row-major.
    std::vector<std::uint8_t> file_bytes() const {
        std::vector<std::uint8_t> bytes(packed_);
        if (format_ == TernaryFormat::tq1) {
            const auto& table = detail::ternary::tq1_number_of_memory_byte();
            for (std::uint8_t& byte : bytes) byte = table[byte];
        }
        return bytes;
    }

    Eigen::Index in_features() const { return in_; }
    Eigen::Index out_features() const { return out_; }
    TernaryFormat format() const { return format_; }
    bool per_tensor() const { return per_tensor_; }
    /// Bytes per packed row (whole chunks of 256 (I2) or 320 (TQ1) weights).
    Eigen::Index row_bytes() const { return row_bytes_; }
    /// The packed codes as the kernels read them, [out, row_bytes] (TQ1 in the in-memory form).
    const std::vector<std::uint8_t>& packed_codes() const { return packed_; }
    /// [1, 1] per tensor, [out, in / 64] per group.
    const RowMatrixXf& scales() const { return scales_; }
    const std::optional<Eigen::VectorXf>& bias() const { return bias_; }

    /// The unpacked codes and scales (what deploy() packed).
    TernaryWeights ternary_weights() const {
        TernaryWeights weights;
        weights.per_tensor = per_tensor_;
        weights.group_size = per_tensor_ ? static_cast<int>(in_) : group_size;
        weights.scales = scales_;
        weights.codes.resize(out_, in_);
        for (Eigen::Index r = 0; r < out_; ++r)
            detail::ternary::unpack_row(format_, packed_.data() + r * row_bytes_, in_, &weights.codes(r, 0));
        return weights;
    }

    /// out [M, out_features] (row-major span) = forward of x [M, in_features] (row-major span).
    /// (A template only so that the int8 GEMM is compiled where forward is called, not in every
    /// translation unit that includes this header; Float is always float.)
    template <class Float = float>
    void forward(std::span<const std::type_identity_t<Float>> x, Eigen::Index M,
                 std::span<std::type_identity_t<Float>> out) const {
        static_assert(std::is_same_v<Float, float>, "lowbit::TernaryLinear::forward takes float spans");
        constexpr const char* function = "lowbit::TernaryLinear::forward";
        require_initialised(function);
        if (M < 0) throw std::invalid_argument(std::string(function) + ": M = " + std::to_string(M) + " is negative");
        detail::require_same_size(function, "x", x.size(), "M * in_features", static_cast<std::size_t>(M * in_));
        detail::require_same_size(function, "out", out.size(), "M * out_features", static_cast<std::size_t>(M * out_));
        if (M == 0) return;
        const detail::ternary::TernaryActivations act =
            detail::ternary::prepare_activations(x.data(), in_, M, in_, format_, !per_tensor_, function);
        detail::ternary_matmul(view(), act, out.data(), out_, int8_panels_.get());
    }

    /// forward of x [M, in_features] (any Eigen dense float matrix), [M, out_features].
    template <class Derived>
    RowMatrixXf forward(const Eigen::DenseBase<Derived>& x) const {
        require_initialised("lowbit::TernaryLinear::forward");
        if (x.cols() != in_)
            throw std::invalid_argument("lowbit::TernaryLinear::forward: x " + detail::shape_text(x.rows(), x.cols()) +
                                        " needs " + std::to_string(in_) + " columns (in_features)");
        const detail::RowMajorInput<Derived> input(x.derived());
        RowMatrixXf out(x.rows(), out_);
        forward(input.span(), x.rows(), std::span<float>(out.data(), static_cast<std::size_t>(out.size())));
        return out;
    }

    /// The kernels' view of this layer (valid while it lives).
    detail::ternary::PackedTernaryView view() const {
        detail::ternary::PackedTernaryView v;
        v.format = format_;
        v.rows = out_;
        v.cols = in_;
        v.row_bytes = row_bytes_;
        v.codes = packed_.data();
        v.per_tensor = per_tensor_;
        v.scales = scales_.data();
        v.bias = bias_ ? bias_->data() : nullptr;
        return v;
    }

private:
    void require_initialised(const char* function) const {
        if (out_ == 0)
            throw std::invalid_argument(std::string(function) + ": empty TernaryLinear (default-constructed)");
    }

    void init_shape(Eigen::Index out_features, Eigen::Index in_features, bool per_tensor, int group,
                    TernaryFormat format, const char* function) {
        if (out_features < 1 || in_features < 1)
            throw std::invalid_argument(std::string(function) + ": shape " +
                                        detail::shape_text(out_features, in_features) + " is empty or negative");
        if (in_features > detail::ternary::max_cols)
            throw std::invalid_argument(std::string(function) + ": in_features = " + std::to_string(in_features) +
                                        " exceeds " + std::to_string(detail::ternary::max_cols) +
                                        " (the int32 bound of the ternary kernels)");
        if (format != TernaryFormat::i2 && format != TernaryFormat::tq1)
            throw std::invalid_argument(std::string(function) + ": unknown TernaryFormat " +
                                        std::to_string(static_cast<int>(format)));
        if (!per_tensor && (group != group_size || in_features % group_size != 0))
            throw std::invalid_argument(std::string(function) +
                                        ": per-group scales need group_size = 64 dividing in = " +
                                        std::to_string(in_features) + ", got group_size = " + std::to_string(group));
        out_ = out_features;
        in_ = in_features;
        per_tensor_ = per_tensor;
        format_ = format;
        row_bytes_ = detail::ternary::row_bytes(format, in_features);
    }

    void set_scales_and_bias(const RowMatrixXf& scales, std::optional<Eigen::VectorXf> bias, const char* function) {
        const Eigen::Index rows = per_tensor_ ? 1 : out_, cols = per_tensor_ ? 1 : in_ / group_size;
        if (scales.rows() != rows || scales.cols() != cols)
            throw std::invalid_argument(std::string(function) + ": scales " +
                                        detail::shape_text(scales.rows(), scales.cols()) + " should be " +
                                        detail::shape_text(rows, cols));
        for (Eigen::Index i = 0; i < scales.size(); ++i)
            if (!(std::isfinite(scales.data()[i]) && scales.data()[i] > 0.0f))
                throw std::invalid_argument(std::string(function) + ": scale " + detail::float_text(scales.data()[i]) +
                                            " (element " + std::to_string(i) + ") is not finite and positive");
        if (bias) {
            if (bias->size() != out_)
                throw std::invalid_argument(std::string(function) + ": bias has " + std::to_string(bias->size()) +
                                            " elements, out_features = " + std::to_string(out_));
            detail::require_finite_data(function,
                                        std::span<const float>(bias->data(), static_cast<std::size_t>(bias->size())));
        }
        scales_ = scales;
        bias_ = std::move(bias);
    }

    Eigen::Index out_ = 0, in_ = 0, row_bytes_ = 0;
    bool per_tensor_ = true;
    TernaryFormat format_ = TernaryFormat::i2;
    std::vector<std::uint8_t> packed_;
    RowMatrixXf scales_;
    std::optional<Eigen::VectorXf> bias_;
    // The int8 GEMM's panels of the codes (2 bits per weight, plus the per-group scales), built by the
    // first forward and shared by copies (the weights never change); null only when moved from.
    std::shared_ptr<detail::Int8PanelCache> int8_panels_ = std::make_shared<detail::Int8PanelCache>();
};

LOWBIT_END_NAMESPACE
