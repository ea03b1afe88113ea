// libFuzzer target over GgufFile: the input bytes are parsed as a GGUF file from memory, then every
// metadata value is read and printed, and every tensor converted both ways.
//
// The contract checked: every call returns or throws std::invalid_argument (the only exception caught
// here); nothing reads outside the input (AddressSanitizer). Properties checked, aborting on a violation:
// a tensor's bytes lie inside the input; to_matrix has ne[1]*ne[2]*... rows of ne[0]; where to_quantized
// succeeds, its dequantize() equals to_matrix value for value (NaN where NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include <lowbit/io.hpp>

namespace {

[[noreturn]] void violation(const char* what, const std::string& name) {
    std::fprintf(stderr, "lowbit fuzz_gguf: contract violation: %s (tensor '%s')\n", what, name.c_str());
    std::abort();
}

void read_value(const lowbit::GgufValue& value) {
    (void)value.to_string();
    try { (void)value.as_uint(); } catch (const std::invalid_argument&) {}
    try { (void)value.as_int(); } catch (const std::invalid_argument&) {}
    try { (void)value.as_double(); } catch (const std::invalid_argument&) {}
    try { (void)value.as_bool(); } catch (const std::invalid_argument&) {}
    try { (void)value.as_string(); } catch (const std::invalid_argument&) {}
    try {
        for (const auto& element : value.as_array()) read_value(element);
    } catch (const std::invalid_argument&) {
    }
}

template <int GroupSize, int Bits>
void check_quantized(const lowbit::GgufFile& file, const std::string& name, const lowbit::RowMatrixXf* reference) {
    try {
        const auto q = file.to_quantized<GroupSize, Bits>(name);
        if (reference == nullptr) violation("to_quantized succeeded where to_matrix failed", name);
        const lowbit::RowMatrixXf w = lowbit::dequantize(q);
        if (w.rows() != reference->rows() || w.cols() != reference->cols()) violation("to_quantized shape", name);
        for (Eigen::Index i = 0; i < w.size(); ++i) {
            const float a = w.data()[i], b = reference->data()[i];
            if (!(a == b || (std::isnan(a) && std::isnan(b)))) violation("to_quantized value differs from to_matrix", name);
        }
    } catch (const std::invalid_argument&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto file = lowbit::GgufFile::from_bytes(input, "fuzz-input");
        for (const auto& [key, value] : file.metadata()) read_value(value);
        (void)file.alignment();
        for (const auto& name : file.tensor_names()) {
            const auto& info = file.tensor_info(name);
            const auto bytes = file.tensor_bytes(name);
            if (bytes.data() < input.data() || bytes.data() + bytes.size() > input.data() + input.size())
                violation("tensor bytes outside the input", name);
            (void)lowbit::ggml_type_name(file.tensor_type(name));
            std::optional<lowbit::RowMatrixXf> matrix;
            try {
                matrix = file.to_matrix(name);
                if (static_cast<std::uint64_t>(matrix->cols()) != info.row_length() ||
                    static_cast<std::uint64_t>(matrix->rows()) != info.row_count())
                    violation("to_matrix shape", name);
            } catch (const std::invalid_argument&) {
            }
            const lowbit::RowMatrixXf* reference = matrix ? &*matrix : nullptr;
            check_quantized<32, 4>(file, name, reference);  // Q4_0, Q4_1, q4_K (and narrower codes: refused)
            check_quantized<32, 5>(file, name, reference);
            check_quantized<32, 8>(file, name, reference);
            check_quantized<16, 4>(file, name, reference);  // q2_K, q3_K (and the groups of 32: refused)
            check_quantized<16, 6>(file, name, reference);  // q2_K, q3_K, q6_K
        }
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
