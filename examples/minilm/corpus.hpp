// Real English sentences from fortune-mod's data files (Debian package `fortunes`, installed in
// /usr/share/games/fortunes by tools/install-deps): each file holds entries separated by lines of "%".
//
// Extraction, per entry: drop attribution lines (starting with "--" after spaces), join the other lines
// with single spaces, split after '.', '!' or '?' followed by spaces and an upper-case letter or a quote;
// keep pieces of 4 to 60 words that hold a lower-case letter and are valid UTF-8; drop repeats. Files
// are read in name order (every regular file without a '.' in its name).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "tokenizer.hpp"

namespace minilm {

namespace corpus_detail {

inline bool valid_utf8(const std::string& text) {
    try {
        text_detail::decode_utf8(text);
        return true;
    } catch (const TokenizerError&) {
        return false;
    }
}

inline std::size_t word_count(const std::string& text) {
    std::istringstream words(text);
    std::size_t count = 0;
    for (std::string word; words >> word;) ++count;
    return count;
}

inline void add_entry(const std::string& entry, std::unordered_set<std::string>& seen, std::vector<std::string>& out) {
    std::string joined;
    std::istringstream lines(entry);
    for (std::string line; std::getline(lines, line);) {
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line.compare(first, 2, "--") == 0) continue;
        const auto last = line.find_last_not_of(" \t\r");
        if (!joined.empty()) joined += ' ';
        for (std::size_t i = first; i <= last; ++i) {
            const char c = line[i] == '\t' ? ' ' : line[i];
            if (c == ' ' && !joined.empty() && joined.back() == ' ') continue;
            joined += c;
        }
    }
    std::size_t begin = 0;
    auto keep = [&](std::size_t end) {
        std::string sentence = joined.substr(begin, end - begin);
        while (!sentence.empty() && sentence.back() == ' ') sentence.pop_back();
        const std::size_t words = word_count(sentence);
        const bool has_lower = std::any_of(sentence.begin(), sentence.end(), [](char c) { return c >= 'a' && c <= 'z'; });
        if (words >= 4 && words <= 60 && has_lower && valid_utf8(sentence) && seen.insert(sentence).second)
            out.push_back(std::move(sentence));
    };
    for (std::size_t i = 0; i + 2 < joined.size(); ++i) {
        const char c = joined[i];
        if ((c == '.' || c == '!' || c == '?') && joined[i + 1] == ' ') {
            const char next = joined[i + 2];
            if (std::isupper(static_cast<unsigned char>(next)) || next == '"' || next == '\'') {
                keep(i + 1);
                begin = i + 2;
            }
        }
    }
    if (begin < joined.size()) keep(joined.size());
}

}  // namespace corpus_detail

/// The sentences of a fortune file, or of every fortune file in a folder (extraction at the top of
/// this file). Throws std::runtime_error when the path cannot be read or holds no fortune file.
inline std::vector<std::string> read_fortune_sentences(const std::filesystem::path& path) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
        for (const auto& entry : std::filesystem::directory_iterator(path))
            if (entry.is_regular_file() && entry.path().filename().string().find('.') == std::string::npos)
                files.push_back(entry.path());
        std::sort(files.begin(), files.end());
    } else {
        files.push_back(path);
    }
    if (files.empty()) throw std::runtime_error("no fortune files in " + path.string());
    std::vector<std::string> sentences;
    std::unordered_set<std::string> seen;
    for (const auto& file : files) {
        std::ifstream in(file, std::ios::binary);
        if (!in) throw std::runtime_error("cannot read the corpus file " + file.string());
        std::string entry;
        for (std::string line; std::getline(in, line);) {
            if (line == "%" || line == "%\r") {
                corpus_detail::add_entry(entry, seen, sentences);
                entry.clear();
            } else {
                entry += line;
                entry += '\n';
            }
        }
        corpus_detail::add_entry(entry, seen, sentences);
    }
    return sentences;
}

/// `count` sentences spread evenly over `all` (every (size / count)-th, deterministic), or all of them
/// when count is 0 or not below their number.
inline std::vector<std::string> spread_sample(const std::vector<std::string>& all, std::size_t count) {
    if (count == 0 || count >= all.size()) return all;
    std::vector<std::string> sample;
    sample.reserve(count);
    for (std::size_t i = 0; i < count; ++i) sample.push_back(all[i * all.size() / count]);
    return sample;
}

/// The sentences of `all` that are not in `taken`, in their order (e.g. calibration sentences disjoint
/// from the evaluation sentences).
inline std::vector<std::string> sentences_not_in(const std::vector<std::string>& all, const std::vector<std::string>& taken) {
    const std::unordered_set<std::string> excluded(taken.begin(), taken.end());
    std::vector<std::string> rest;
    for (const std::string& sentence : all)
        if (!excluded.count(sentence)) rest.push_back(sentence);
    return rest;
}

}  // namespace minilm
