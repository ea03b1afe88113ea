// lowbit-llm's loader (examples/llm) on arbitrary bytes: the GGUF file's tokenizer and llama model either
// load or are refused with std::invalid_argument (TokenizerError, ModelError, GgufFile's errors), never a
// crash. A tokenizer that loads encodes a fixed text (special tokens parsed) and decodes every id back;
// a model that loads runs one token and gives one row of logits per vocabulary entry.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>

#include "llm/bpe_tokenizer.hpp"
#include "llm/llama.hpp"

namespace {

[[noreturn]] void violation(const char* what) {
    std::fprintf(stderr, "fuzz_llm: contract violation: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto file = lowbit::GgufFile::from_bytes(input, "fuzz-input");
        try {
            const auto tokenizer = llm::BpeTokenizer::from_gguf(file, "fuzz-input");
            const auto ids =
                tokenizer.encode("Hello world 12345, it's <|im_start|>a  test\n\n\xC3\xA9\xF0\x9F\x98\x80", true);
            for (const auto id : ids) {
                if (id < 0 || static_cast<std::size_t>(id) >= tokenizer.vocab_size())
                    violation("an id outside the vocabulary");
                (void)tokenizer.decode(id);
            }
        } catch (const std::invalid_argument&) {
        }
        try {
            const auto model = llm::LlamaModel::from_gguf(file, "fuzz-input", lowbit::Activations::f32);
            llm::KvCache cache(model.config(), 2);
            const std::int32_t token[1] = {0};
            const auto logits = model.forward(token, cache, 0);
            if (logits.rows() != 1 || logits.cols() != model.config().vocab_size) violation("logits shape");
        } catch (const std::invalid_argument&) {
        }
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
