// lowbit-llm: a llama-architecture language model (SmolLM2-135M-Instruct by default) run from its GGUF
// file with lowbit's quantized layers (examples/llm/: tokenizer, model, sampling, perplexity).
//
//   lowbit-llm [--model FILE] --prompt TEXT [-n N] [--chat] [--temp T --top-p P --seed S] [--ignore-eos]
//   lowbit-llm [--model FILE] --perplexity TEXT_FILE [--ctx N] [--chunks N]
//   lowbit-llm [--model FILE] --bench [--pp N] [--tg N] [--repetitions N]    (llama-bench's pp / tg tests)
//   lowbit-llm [--model FILE] --tokenize TEXT                                 (the ids, one per line)
//   lowbit-llm [--model FILE] --check                                         (the ctest)
//   any of them with --threads N and --int8 (int8 activations; f32 otherwise)
//
// Exit status: 0 on success, 1 on an error or a failed --check, 77 when the model file is missing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <lowbit/parallel.hpp>

#include "llm/bpe_tokenizer.hpp"
#include "llm/chat_template.hpp"
#include "llm/llama.hpp"
#include "llm/perplexity.hpp"
#include "llm/sampling.hpp"

#ifndef LOWBIT_LLM_DEFAULT_MODEL
#define LOWBIT_LLM_DEFAULT_MODEL "build/deps/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#endif
#ifndef LOWBIT_LLM_DEFAULT_TEXT
#define LOWBIT_LLM_DEFAULT_TEXT "/usr/share/common-licenses/GPL-3"
#endif

namespace {

constexpr int missing_model_status = 77;

struct Options {
    std::string model = LOWBIT_LLM_DEFAULT_MODEL;
    std::string prompt;
    bool has_prompt = false;
    int tokens = 64;
    bool chat = false;
    float temperature = 0.0f;
    float top_p = 0.9f;
    std::uint64_t seed = 42;
    bool ignore_eos = false;
    bool margins = false;
    std::string perplexity_file;
    int context = 512;
    std::size_t chunks = 0;
    bool bench = false;
    int pp = 512;
    int tg = 128;
    int repetitions = 5;
    bool profile = false;
    std::string tokenize;
    bool has_tokenize = false;
    bool check = false;
    int threads = 0;
    bool int8 = false;
};

long integer(const std::string& flag, const std::string& text, long minimum) {
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < minimum || value > (1L << 30))
        throw std::invalid_argument(flag + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
    return value;
}

float real(const std::string& flag, const std::string& text, float low, float high) {
    char* end = nullptr;
    const float value = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(value >= low && value <= high))
        throw std::invalid_argument(flag + " needs a number in [" + std::to_string(low) + ", " + std::to_string(high) +
                                    "], got '" + text + "'");
    return value;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--model" || arg == "-m")
            o.model = value();
        else if (arg == "--prompt" || arg == "-p") {
            o.prompt = value();
            o.has_prompt = true;
        } else if (arg == "-n" || arg == "--n-predict")
            o.tokens = static_cast<int>(integer(arg, value(), 0));
        else if (arg == "--chat")
            o.chat = true;
        else if (arg == "--temp")
            o.temperature = real(arg, value(), 0.0f, 100.0f);
        else if (arg == "--top-p")
            o.top_p = real(arg, value(), 1e-6f, 1.0f);
        else if (arg == "--seed")
            o.seed = static_cast<std::uint64_t>(integer(arg, value(), 0));
        else if (arg == "--ignore-eos")
            o.ignore_eos = true;
        else if (arg == "--margins")
            o.margins = true;
        else if (arg == "--perplexity")
            o.perplexity_file = value();
        else if (arg == "--ctx" || arg == "-c")
            o.context = static_cast<int>(integer(arg, value(), 2));
        else if (arg == "--chunks")
            o.chunks = static_cast<std::size_t>(integer(arg, value(), 1));
        else if (arg == "--bench")
            o.bench = true;
        else if (arg == "--pp")
            o.pp = static_cast<int>(integer(arg, value(), 0));
        else if (arg == "--tg")
            o.tg = static_cast<int>(integer(arg, value(), 0));
        else if (arg == "--repetitions" || arg == "-r")
            o.repetitions = static_cast<int>(integer(arg, value(), 1));
        else if (arg == "--profile")
            o.profile = true;
        else if (arg == "--tokenize") {
            o.tokenize = value();
            o.has_tokenize = true;
        } else if (arg == "--check")
            o.check = true;
        else if (arg == "--threads" || arg == "-t")
            o.threads = static_cast<int>(integer(arg, value(), 1));
        else if (arg == "--int8")
            o.int8 = true;
        else if (arg == "--help" || arg == "-h") {
            std::printf(
                "usage: lowbit-llm [--model FILE] --prompt TEXT [-n 64] [--chat] [--temp 0 --top-p 0.9 --seed 42] "
                "[--ignore-eos] [--margins]\n"
                "       lowbit-llm [--model FILE] --perplexity TEXT_FILE [--ctx 512] [--chunks N]\n"
                "       lowbit-llm [--model FILE] --bench [--pp 512] [--tg 128] [--repetitions 5] [--profile]\n"
                "       lowbit-llm [--model FILE] --tokenize TEXT\n"
                "       lowbit-llm [--model FILE] --check\n"
                "       each with [--threads N] [--int8]\n"
                "FILE: a llama-architecture GGUF (default %s, which tools/install-deps fetches).\n"
                "--temp 0 is greedy decoding; --chat wraps the prompt in the model's ChatML template.\n"
                "--perplexity follows llama-perplexity: chunks of --ctx tokens, the second half of each scored.\n",
                LOWBIT_LLM_DEFAULT_MODEL);
            std::exit(0);
        } else {
            throw std::invalid_argument("unknown argument '" + arg + "' (see --help)");
        }
    }
    const int modes = o.has_prompt + !o.perplexity_file.empty() + o.bench + o.has_tokenize + o.check;
    if (modes != 1)
        throw std::invalid_argument(
            "give exactly one of --prompt, --perplexity, --bench, --tokenize, --check (see --help)");
    return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Everything a run needs from the file.
struct Runner {
    lowbit::GgufFile file;
    std::string label;
    llm::BpeTokenizer tokenizer;
    llm::LlamaModel model;
    std::int32_t bos = -1;  ///< the BOS id when the model adds one, else -1
    std::vector<std::int32_t> end_of_generation;

    static Runner open(const std::string& path, lowbit::Activations activations) {
        auto file = lowbit::GgufFile::open(path);
        auto tokenizer = llm::BpeTokenizer::from_gguf(file, path);
        auto model = llm::LlamaModel::from_gguf(file, path, activations);
        if (static_cast<std::size_t>(model.config().vocab_size) != tokenizer.vocab_size())
            throw llm::ModelError(path + ": the vocabulary has " + std::to_string(tokenizer.vocab_size()) +
                                  " tokens, the model " + std::to_string(model.config().vocab_size));
        Runner runner{file, path, std::move(tokenizer), std::move(model), -1, {}};
        const auto& metadata = runner.file.metadata();
        const auto token_id = [&](const char* key) -> std::int32_t {
            const auto it = metadata.find(key);
            if (it == metadata.end()) return -1;
            const auto id = it->second.as_int();
            if (id < 0 || static_cast<std::size_t>(id) >= runner.tokenizer.vocab_size())
                throw llm::ModelError(path + ": " + key + " is " + std::to_string(id) + ", outside the vocabulary");
            return static_cast<std::int32_t>(id);
        };
        const auto add_bos = metadata.find("tokenizer.ggml.add_bos_token");
        if (add_bos == metadata.end() || add_bos->second.as_bool())
            runner.bos = token_id("tokenizer.ggml.bos_token_id");
        // End of generation: EOS, EOT, and the control tokens llama.cpp also stops at.
        for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
            if (const auto id = token_id(key); id >= 0) runner.end_of_generation.push_back(id);
        for (const char* text : {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<end_of_turn>"})
            if (const auto id = runner.tokenizer.find(text);
                id && runner.tokenizer.type(*id) == llm::TokenType::control)
                runner.end_of_generation.push_back(*id);
        return runner;
    }

    std::vector<std::int32_t> prompt_tokens(const std::string& text, bool parse_special) const {
        auto ids = tokenizer.encode(text, parse_special);
        if (bos >= 0) ids.insert(ids.begin(), bos);
        return ids;
    }

    bool ends_generation(std::int32_t id) const {
        return std::find(end_of_generation.begin(), end_of_generation.end(), id) != end_of_generation.end();
    }
};

struct Generation {
    std::vector<std::int32_t> tokens;
    std::vector<float> margins;  ///< per generated token: the largest logit minus the second largest
    int generation_forwards = 0;  ///< one-token forwards after the prompt's (the last token needs none)
    std::string text;
    double prompt_seconds = 0, generation_seconds = 0;
};

/// The largest logit minus the second largest (how near greedy decoding was to a tie).
float top_two_margin(const Eigen::Ref<const Eigen::RowVectorXf>& logits) {
    float first = -INFINITY, second = -INFINITY;
    for (Eigen::Index i = 0; i < logits.size(); ++i) {
        if (logits[i] > first)
            second = first, first = logits[i];
        else if (logits[i] > second)
            second = logits[i];
    }
    return first - second;
}

/// Runs `prompt` and samples up to `count` tokens after it.
Generation generate(const Runner& runner, const std::vector<std::int32_t>& prompt, int count, llm::Sampler& sampler,
                    bool ignore_eos, bool stream) {
    const int context = runner.model.config().context_length;
    if (prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
    if (static_cast<long>(prompt.size()) + count > context)
        throw std::invalid_argument("the prompt's " + std::to_string(prompt.size()) + " tokens and " +
                                    std::to_string(count) + " to generate exceed the model's context of " +
                                    std::to_string(context));
    Generation result;
    llm::KvCache cache(runner.model.config(), static_cast<int>(prompt.size()) + std::max(count, 1));
    auto start = std::chrono::steady_clock::now();
    llm::RowMatrix logits = runner.model.forward(prompt, cache, prompt.size() - 1);
    result.prompt_seconds = seconds_since(start);
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
        const std::int32_t next = sampler(logits.row(0));
        result.margins.push_back(top_two_margin(logits.row(0)));
        if (!ignore_eos && runner.ends_generation(next)) break;
        result.tokens.push_back(next);
        const std::string piece = runner.tokenizer.decode(next);
        result.text += piece;
        if (stream) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
        if (i + 1 == count) break;
        const std::int32_t one[1] = {next};
        logits = runner.model.forward(one, cache, 0);
        ++result.generation_forwards;
    }
    result.generation_seconds = seconds_since(start);
    return result;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::invalid_argument("cannot open the text file " + path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

/// llama-bench's tests: pp (a prompt of N random tokens from an empty cache, one forward, logits of the
/// last token only) and tg (N tokens one at a time from an empty cache); tokens/s as the median of the
/// repetitions, after one warm-up run of each.
int run_bench(const Runner& runner, const Options& o) {
    const auto& config = runner.model.config();
    std::mt19937_64 random(1);
    std::uniform_int_distribution<std::int32_t> any_token(0, config.vocab_size - 1);
    const auto model_mib = static_cast<double>(std::filesystem::file_size(runner.label)) / (1 << 20);
    std::printf("model %s (%.1f MiB), threads %d, activations %s\n", runner.label.c_str(), model_mib,
                lowbit::num_threads(), o.int8 ? "int8" : "f32");
    std::printf("linear layers (q, k, v stacked; gate, up stacked): %s\n", runner.model.layer_formats().c_str());
    const auto report = [&](const char* test, int n, std::vector<double> seconds, const llm::ForwardTimes& times) {
        const double med = median(seconds);
        double low = seconds.front(), high = seconds.front();
        for (const double s : seconds) low = std::min(low, s), high = std::max(high, s);
        std::printf("%s%-5d %8.2f tokens/s  (median of %zu; %.2f to %.2f)", test, n, n / med, seconds.size(), n / high,
                    n / low);
        if (o.profile) {
            const double total = times.total();
            std::printf("  linear %.0f%%, attention %.0f%%, head %.0f%%, other %.0f%%", 100 * times.linear / total,
                        100 * times.attention / total, 100 * times.head / total, 100 * times.other / total);
        }
        std::printf("\n");
    };
    if (o.pp > 0) {
        llm::KvCache cache(config, o.pp);
        std::vector<double> seconds;
        llm::ForwardTimes times;
        for (int rep = 0; rep <= o.repetitions; ++rep) {
            std::vector<std::int32_t> prompt(static_cast<std::size_t>(o.pp));
            for (auto& id : prompt) id = any_token(random);
            cache.clear();
            llm::ForwardTimes run;
            const auto start = std::chrono::steady_clock::now();
            runner.model.forward(prompt, cache, prompt.size() - 1, &run);
            if (rep == 0) continue;  // warm-up
            seconds.push_back(seconds_since(start));
            times += run;
        }
        report("pp", o.pp, seconds, times);
    }
    if (o.tg > 0) {
        llm::KvCache cache(config, o.tg);
        std::vector<double> seconds;
        llm::ForwardTimes times;
        for (int rep = 0; rep <= o.repetitions; ++rep) {
            cache.clear();
            llm::ForwardTimes run;
            std::int32_t token[1] = {any_token(random)};
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < o.tg; ++i) token[0] = llm::greedy(runner.model.forward(token, cache, 0, &run).row(0));
            if (rep == 0) continue;
            seconds.push_back(seconds_since(start));
            times += run;
        }
        report("tg", o.tg, seconds, times);
    }
    return 0;
}

int run_perplexity(const Runner& runner, const Options& o) {
    const auto tokens = runner.prompt_tokens(read_file(o.perplexity_file), false);
    std::printf("%s: %zu tokens, context %d, threads %d, activations %s\n", o.perplexity_file.c_str(), tokens.size(),
                o.context, lowbit::num_threads(), o.int8 ? "int8" : "f32");
    const auto result = llm::perplexity(runner.model, tokens, o.context, o.chunks, runner.bos, true);
    std::printf("%.2f seconds, %.1f tokens/s\n", result.seconds,
                static_cast<double>(result.chunks) * o.context / result.seconds);
    std::printf("perplexity: %.4f over %zu tokens\n", result.perplexity, result.scored_tokens);
    return 0;
}

int run_prompt(const Runner& runner, const Options& o) {
    std::string text = o.prompt;
    if (o.chat) text = llm::ChatTemplate::from_gguf(runner.file, runner.label).apply(text);
    const auto prompt = runner.prompt_tokens(text, true);
    llm::Sampler sampler(o.temperature, o.top_p, o.seed);
    std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
    std::printf(o.chat ? "\n" : "");
    const auto result = generate(runner, prompt, o.tokens, sampler, o.ignore_eos, true);
    std::printf(
        "\n\nprompt: %zu tokens, %.1f tokens/s; generation: %zu tokens, %.1f tokens/s (threads %d, activations %s)\n",
        prompt.size(), static_cast<double>(prompt.size()) / result.prompt_seconds, result.tokens.size(),
        // One-token forwards per second, as llama.cpp's eval rate (sampling included).
        result.generation_forwards == 0 ? 0.0 : result.generation_forwards / result.generation_seconds,
        lowbit::num_threads(), o.int8 ? "int8" : "f32");
    if (o.margins) {
        std::printf("per token, the top-two logit margin and the bytes of its text:");
        for (std::size_t i = 0; i < result.tokens.size(); ++i)
            std::printf(" margin %.4f bytes %zu", result.margins[i], runner.tokenizer.decode(result.tokens[i]).size());
        std::printf("\n");
    }
    return 0;
}

/// --check (the ctest): SmolLM2-135M-Instruct against figures llama.cpp gave for the same file
/// (tools/compare-llama's tools, llama.cpp 0.5.0-dev commit 0c1e570): token ids, greedy text, a short
/// perplexity on Debian's GPL-3 text; the chat template; a prompt over the context refused. Prints each
/// check and returns 1 when one fails.
int run_check(const Options& o) {
    int failures = 0;
    const auto expect = [&](bool ok, std::string what) {
        for (std::size_t at = what.find('\n'); at != std::string::npos; at = what.find('\n', at + 2))
            what.replace(at, 1, "\\n");
        std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
        failures += !ok;
    };
    const Runner f32 = Runner::open(o.model, lowbit::Activations::f32);
    const Runner int8 = Runner::open(o.model, lowbit::Activations::int8);
    const auto& metadata = f32.file.metadata();
    if (const auto name = metadata.find("general.basename");
        name == metadata.end() || name->second.to_string() != "'smollm2'") {
        std::fprintf(stderr,
                     "lowbit-llm --check: %s is not SmolLM2; the check compares with llama.cpp's figures for SmolLM2\n",
                     o.model.c_str());
        return 1;
    }
    // llama-tokenize's ids for this text.
    const std::string text = "Hello world 12345, it's a test:  spaces\n\nnewline";
    const std::vector<std::int32_t> llama_ids{19556, 905, 216,  33, 34,  35,   36,  37,  28,   357,
                                              506,   253, 1028, 42, 216, 5600, 198, 198, 28160};
    expect(f32.prompt_tokens(text, true) == llama_ids, "token ids equal llama-tokenize's");
    expect(f32.tokenizer.decode(llama_ids) == text, "the ids decode to the text");

    // llama-completion --temp 0 -n 12 (ggml multiplies q4_1 by q8_1-quantized activations, as lowbit's
    // int8 path does; the f32 path parts from it at token 6, where its top two logits are 0.22 apart).
    const std::string prompt = "The capital of France is";
    const std::string llama_text = " Paris.\n\nThe United States has a population of approximately";
    llm::Sampler greedy(0.0f, 1.0f, 0);
    const auto int8_text = generate(int8, int8.prompt_tokens(prompt, true), 12, greedy, true, false).text;
    expect(int8_text == llama_text, "int8 greedy 12 tokens equal llama-completion's: '" + int8_text + "'");
    const auto f32_run = generate(f32, f32.prompt_tokens(prompt, true), 12, greedy, true, false);
    expect(f32_run.text.rfind(" Paris.\n\nThe", 0) == 0,
           "f32 greedy: the first 5 tokens equal llama-completion's: '" + f32_run.text + "'");

    // llama-perplexity -c 256 --chunks 4 on the same text: 19.3583 (f16 key-value cache, q8_1 activations).
    if (std::filesystem::is_regular_file(LOWBIT_LLM_DEFAULT_TEXT)) {
        const double llama_ppl = 19.3583;
        for (const Runner* runner : {&f32, &int8}) {
            const auto tokens = runner->prompt_tokens(read_file(LOWBIT_LLM_DEFAULT_TEXT), false);
            const auto result = llm::perplexity(runner->model, tokens, 256, 4, runner->bos, false);
            char line[160];
            std::snprintf(line, sizeof line,
                          "%s perplexity %.4f over %zu tokens within 1 %% of llama-perplexity's %.4f",
                          runner == &f32 ? "f32" : "int8", result.perplexity, result.scored_tokens, llama_ppl);
            expect(std::abs(result.perplexity / llama_ppl - 1) <= 0.01, line);
        }
    } else {
        std::printf("skip perplexity: %s is missing\n", LOWBIT_LLM_DEFAULT_TEXT);
    }

    // The chat template: ChatML with the template's default system message.
    const auto chat = llm::ChatTemplate::from_gguf(f32.file, f32.label);
    const auto chat_ids = f32.prompt_tokens(chat.apply("What is 2 + 2?"), true);
    expect(chat.default_system().has_value() && chat_ids.front() == 1 && chat_ids.back() == 198,
           "chat template: <|im_start|>system ... <|im_start|>assistant\\n");
    const auto reply = generate(int8, chat_ids, 8, greedy, false, false);
    expect(!reply.tokens.empty(), "chat reply: '" + reply.text + "'");

    // A prompt and generation longer than the context: a clear error, not a crash.
    try {
        generate(f32, f32.prompt_tokens(prompt, true), f32.model.config().context_length, greedy, true, false);
        expect(false, "a generation past the context is refused");
    } catch (const std::invalid_argument& error) {
        expect(std::string(error.what()).find("exceed the model's context of 8192") != std::string::npos,
               std::string("a generation past the context is refused: ") + error.what());
    }
    std::printf("%s\n", failures == 0 ? "lowbit-llm --check: all passed" : "lowbit-llm --check: FAILED");
    return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        if (o.threads > 0) lowbit::set_num_threads(o.threads);
        if (!std::filesystem::is_regular_file(o.model)) {
            std::fprintf(
                stderr,
                "lowbit-llm: the model %s is missing; get SmolLM2-135M-Instruct with `sudo tools/install-deps` "
                "(it unpacks it into build/deps/smollm2) or pass --model FILE\n",
                o.model.c_str());
            return missing_model_status;
        }
        if (o.check) return run_check(o);
        const auto activations = o.int8 ? lowbit::Activations::int8 : lowbit::Activations::f32;
        const Runner runner = Runner::open(o.model, activations);
        if (o.has_tokenize) {
            for (const auto id : runner.prompt_tokens(o.tokenize, true)) std::printf("%d\n", id);
            return 0;
        }
        if (o.bench) return run_bench(runner, o);
        if (!o.perplexity_file.empty()) return run_perplexity(runner, o);
        if (o.has_prompt) return run_prompt(runner, o);
        return 1;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "lowbit-llm: %s\n", error.what());
        return 1;
    }
}
