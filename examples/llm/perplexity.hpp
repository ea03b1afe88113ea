// Perplexity by llama-perplexity's protocol: the text's tokens (a BOS first in each chunk when the
// model adds one) cut into chunks of `context` tokens from the start, whole chunks only; each chunk
// runs from an empty cache, and only its second half is scored: for i in [context/2, context - 1),
// -log softmax(logits_i)[token_{i+1}]. Perplexity = exp(mean of those over every chunk).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "llama.hpp"

namespace llm {

struct PerplexityResult {
    double perplexity = 0;
    std::size_t scored_tokens = 0;
    std::size_t chunks = 0;
    double seconds = 0;
};

/// -log softmax(logits)[token], the sum of exponentials in double (as llama-perplexity).
inline double negative_log_likelihood(const Eigen::Ref<const Eigen::RowVectorXf>& logits, std::int32_t token) {
    const float max = logits.maxCoeff();
    double sum = 0;
    for (Eigen::Index i = 0; i < logits.size(); ++i) sum += std::exp(static_cast<double>(logits[i] - max));
    return -(static_cast<double>(logits[token] - max) - std::log(sum));
}

/// Perplexity of `tokens` in chunks of `context` (at most `max_chunks` of them; 0: all). `bos`: the id
/// that replaces each chunk's first token, or -1. `progress` prints "[chunk]running perplexity," after
/// each chunk as llama-perplexity does. Throws std::invalid_argument for fewer than 2 * context tokens
/// (llama-perplexity's minimum) or a context below 2.
inline PerplexityResult perplexity(const LlamaModel& model, std::vector<std::int32_t> tokens, int context,
                                   std::size_t max_chunks, std::int32_t bos, bool progress) {
    if (context < 2)
        throw std::invalid_argument("perplexity: the context must be at least 2 tokens, got " +
                                    std::to_string(context));
    if (tokens.size() < 2 * static_cast<std::size_t>(context))
        throw std::invalid_argument("perplexity: the text has " + std::to_string(tokens.size()) +
                                    " tokens; a context of " + std::to_string(context) + " needs at least " +
                                    std::to_string(2 * context));
    const auto begin = std::chrono::steady_clock::now();
    PerplexityResult result;
    result.chunks = tokens.size() / static_cast<std::size_t>(context);
    if (max_chunks > 0) result.chunks = std::min(result.chunks, max_chunks);
    const std::size_t first = static_cast<std::size_t>(context) / 2;
    KvCache cache(model.config(), context);
    double nll = 0;
    for (std::size_t chunk = 0; chunk < result.chunks; ++chunk) {
        std::span<std::int32_t> window(tokens.data() + chunk * static_cast<std::size_t>(context),
                                       static_cast<std::size_t>(context));
        const std::int32_t original = window[0];
        if (bos >= 0) window[0] = bos;
        cache.clear();
        const RowMatrix logits = model.forward(window, cache, first);
        window[0] = original;
        for (std::size_t i = first; i + 1 < window.size(); ++i)
            nll += negative_log_likelihood(logits.row(static_cast<Eigen::Index>(i - first)), window[i + 1]);
        result.scored_tokens += window.size() - 1 - first;
        if (progress) {
            std::printf("[%zu]%.4f,", chunk + 1, std::exp(nll / static_cast<double>(result.scored_tokens)));
            std::fflush(stdout);
        }
    }
    if (progress) std::printf("\n");
    result.perplexity = std::exp(nll / static_cast<double>(result.scored_tokens));
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return result;
}

}  // namespace llm
