// The exception types of <lowbit/errors.hpp> (docs/numerics.md N15): a malformed file is a
// lowbit::format_error, a bad argument a plain std::invalid_argument, GPTQ's float failure a
// lowbit::numerical_error, a file that cannot be opened a std::runtime_error.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <lowbit/io.hpp>
#include <lowbit/ptq.hpp>
#include <nlohmann/json.hpp>

namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
    std::vector<std::byte> out;
    for (const char c : text) out.push_back(static_cast<std::byte>(c));
    return out;
}

/// Which of the types `fn` throws, most derived first: "format", "numerical", "argument", "runtime".
template <class Fn>
std::string thrown_kind(Fn&& fn) {
    try {
        fn();
    } catch (const lowbit::format_error&) {
        return "format";
    } catch (const lowbit::numerical_error&) {
        return "numerical";
    } catch (const std::invalid_argument&) {
        return "argument";
    } catch (const std::runtime_error&) {
        return "runtime";
    }
    return "nothing";
}

}  // namespace

TEST_CASE("the exception types tell a bad file, a bad argument and a numerical failure apart", "[errors]") {
    // Malformed files: a safetensors header length past the end, a GGUF of version 99, an MLX config
    // whose "quantization" is a number.
    const auto safetensors = bytes_of(std::string("\x40\0\0\0\0\0\0\0{}", 10));
    CHECK(thrown_kind([&] { (void)lowbit::SafetensorsFile::from_bytes(safetensors); }) == "format");
    const auto gguf = bytes_of(std::string("GGUF\x63\0\0\0", 8) + std::string(16, '\0'));
    CHECK(thrown_kind([&] { (void)lowbit::GgufFile::from_bytes(gguf); }) == "format");
    CHECK(thrown_kind([] { (void)lowbit::MlxQuantization::from_json(nlohmann::json{{"quantization", 5}}); }) == "format");
    // format_error and numerical_error are invalid_arguments too, as they were thrown before.
    CHECK_THROWS_AS(lowbit::SafetensorsFile::from_bytes(safetensors), std::invalid_argument);

    // A bad argument: in not a multiple of the group.
    CHECK(thrown_kind([] { (void)lowbit::quantize<64, 4>(lowbit::RowMatrixXf::Ones(2, 48)); }) == "argument");
    // A file that is not there: the operating system's error.
    CHECK(thrown_kind([] { (void)lowbit::SafetensorsFile::open("/nonexistent/lowbit/model.safetensors"); }) == "runtime");

    // GPTQ with calibration inputs that never reach input 5 (H[5, 5] = 0), no damping and no retry:
    // H is not positive definite, a numerical failure rather than a bad argument.
    lowbit::RowMatrixXf x = lowbit::RowMatrixXf::Ones(8, 64);
    for (Eigen::Index r = 0; r < x.rows(); ++r) x(r, r) = 2.0f;
    x.col(5).setZero();
    lowbit::GptqOptions options;
    options.damping = 0.0f;
    options.damping_retries = 0;
    const lowbit::RowMatrixXf w = lowbit::RowMatrixXf::Ones(4, 64);
    CHECK(thrown_kind([&] { (void)lowbit::gptq<64, 4>(w, x, options); }) == "numerical");
    CHECK_THROWS_AS((lowbit::gptq<64, 4>(w, x, options)), std::invalid_argument);
}
