// BERT's uncased WordPiece tokenizer (as transformers' BertTokenizer with do_lower_case = true,
// tokenize_chinese_chars = true, strip_accents unset), from the model's vocab.txt:
//
//   text (UTF-8) -> clean (drop NUL, U+FFFD and control characters; any whitespace becomes a space)
//                -> a space around every CJK ideograph
//                -> split on whitespace; per word: lower-case, strip accents, split on punctuation
//                -> per piece: greedy longest match in the vocabulary, continuations prefixed "##";
//                   a piece with no match (or over 100 code points) becomes [UNK]
//                -> [CLS] pieces [SEP], truncated to max_tokens ids in all (the model says 256).
//
// Lower-casing and accent stripping cover what a C++ program can do without ICU: Latin (with its
// Extended-A, -B and Additional blocks), IPA, Greek (and Greek Extended), Cyrillic, Hiragana, Katakana
// (a dakuten is a combining mark: "で" becomes "て") and fullwidth forms, from fold_table.hpp,
// generated from Python's unicodedata by tools/gen_minilm_fold_table.py. Other scripts pass unchanged:
// Hangul syllables, which NFD splits into jamo, are the known difference from BertTokenizer. Punctuation is ASCII punctuation plus the Unicode punctuation blocks
// (General Punctuation, CJK Symbols and Punctuation, fullwidth ASCII punctuation, Latin-1's
// punctuation). Invalid UTF-8 throws TokenizerError naming the byte offset.
#pragma once

#include "../utf8.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fold_table.hpp"

namespace minilm {

/// Bad input to the tokenizer (invalid UTF-8, a vocabulary without its special tokens, ...).
struct TokenizerError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

namespace text_detail {

/// The code points of `text`; throws TokenizerError naming the offset of the first invalid sequence
/// (bad lead byte, missing continuation, overlong form, surrogate or beyond U+10FFFF).
inline std::vector<char32_t> decode_utf8(std::string_view text) {
    std::vector<char32_t> out;
    out.reserve(text.size());
    std::size_t i = 0;
    auto bad = [&](std::size_t at) {
        return TokenizerError("invalid UTF-8 at byte " + std::to_string(at) + " of a " + std::to_string(text.size()) +
                              "-byte text");
    };
    while (i < text.size()) {
        const auto lead = static_cast<unsigned char>(text[i]);
        int length = 0;
        char32_t cp = 0;
        if (lead < 0x80) { length = 1; cp = lead; }
        else if ((lead & 0xE0) == 0xC0) { length = 2; cp = lead & 0x1F; }
        else if ((lead & 0xF0) == 0xE0) { length = 3; cp = lead & 0x0F; }
        else if ((lead & 0xF8) == 0xF0) { length = 4; cp = lead & 0x07; }
        else throw bad(i);
        if (i + static_cast<std::size_t>(length) > text.size()) throw bad(i);
        for (int k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
            if ((next & 0xC0) != 0x80) throw bad(i);
            cp = (cp << 6) | (next & 0x3F);
        }
        static constexpr char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < smallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) throw bad(i);
        out.push_back(cp);
        i += static_cast<std::size_t>(length);
    }
    return out;
}

using ::example_text::append_utf8;

/// Unicode category Zs, plus tab, newline and carriage return (BERT's _is_whitespace).
inline bool is_whitespace(char32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Categories Cc and Cf that BERT drops (its _is_control, which keeps tab, newline, return as whitespace).
inline bool is_control(char32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    return c < 0x20 || (c >= 0x7F && c < 0xA0) || c == 0xAD || (c >= 0x200B && c <= 0x200F) ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) || c == 0xFEFF;
}

/// BERT's _is_punctuation: every ASCII non-alphanumeric printable, and Unicode category P*
/// (approximated by the punctuation blocks named at the top of this file).
inline bool is_punctuation(char32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    return c == 0xA1 || c == 0xA7 || c == 0xAB || c == 0xB6 || c == 0xB7 || c == 0xBB || c == 0xBF ||
           (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205E) || (c >= 0x3001 && c <= 0x3003) ||
           (c >= 0x3008 && c <= 0x3011) || (c >= 0x3014 && c <= 0x301F) || c == 0x30FB ||
           (c >= 0xFF01 && c <= 0xFF03) || (c >= 0xFF05 && c <= 0xFF0A) || (c >= 0xFF0C && c <= 0xFF0F) ||
           c == 0xFF1A || c == 0xFF1B || c == 0xFF1F || c == 0xFF20 || (c >= 0xFF3B && c <= 0xFF3D) ||
           c == 0xFF3F || c == 0xFF5B || c == 0xFF5D || (c >= 0xFF5F && c <= 0xFF65);
}

/// The CJK Unified Ideographs blocks BERT puts spaces around (its _is_chinese_char).
inline bool is_cjk(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// Lower case, then the base letter of an accented one (str.lower, NFD, drop combining marks), for
/// the blocks named at the top of this file; combining diacritics (U+0300-U+036F) map to 0 (dropped);
/// anything else is returned unchanged.
inline char32_t fold(char32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (c >= 0x300 && c <= 0x36F) return 0;
    const auto it = std::lower_bound(fold_table.begin(), fold_table.end(), c,
                                     [](const std::pair<char32_t, char32_t>& entry, char32_t key) { return entry.first < key; });
    return it != fold_table.end() && it->first == c ? it->second : c;
}

}  // namespace text_detail

/// A tokenized text: ids [CLS] ... [SEP] and whether word pieces were cut off to fit.
struct Encoding {
    std::vector<std::int32_t> ids;
    bool truncated = false;
};

class WordPieceTokenizer {
public:
    /// Words longer than this (in code points) become [UNK] (BERT's max_input_chars_per_word).
    static constexpr std::size_t max_word_chars = 100;

    /// From vocab.txt: one token per line, its id the line number. Throws TokenizerError when the file
    /// cannot be read, is empty, repeats a token, or lacks [PAD], [UNK], [CLS] or [SEP].
    static WordPieceTokenizer from_file(const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw TokenizerError("cannot open the vocabulary " + path);
        std::vector<std::string> tokens;
        for (std::string line; std::getline(in, line);) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            tokens.push_back(line);
        }
        return WordPieceTokenizer(std::move(tokens), path);
    }

    /// From the tokens in id order; `label` names them in errors. Throws as from_file.
    explicit WordPieceTokenizer(std::vector<std::string> tokens, const std::string& label = "<vocabulary>")
        : tokens_(std::move(tokens)) {
        if (tokens_.empty()) throw TokenizerError("the vocabulary " + label + " is empty");
        for (std::size_t id = 0; id < tokens_.size(); ++id) {
            if (!ids_.emplace(tokens_[id], static_cast<std::int32_t>(id)).second)
                throw TokenizerError("the vocabulary " + label + " repeats the token '" + tokens_[id] + "' (line " +
                                     std::to_string(id + 1) + ")");
        }
        auto special = [&](const char* token) {
            const auto it = ids_.find(token);
            if (it == ids_.end()) throw TokenizerError("the vocabulary " + label + " has no " + token + " token");
            return it->second;
        };
        pad_id_ = special("[PAD]");
        unk_id_ = special("[UNK]");
        cls_id_ = special("[CLS]");
        sep_id_ = special("[SEP]");
    }

    std::size_t vocabulary_size() const noexcept { return tokens_.size(); }
    std::int32_t pad_id() const noexcept { return pad_id_; }
    std::int32_t unk_id() const noexcept { return unk_id_; }
    std::int32_t cls_id() const noexcept { return cls_id_; }
    std::int32_t sep_id() const noexcept { return sep_id_; }
    const std::string& token(std::int32_t id) const { return tokens_.at(static_cast<std::size_t>(id)); }

    /// The basic tokenizer's words (lower-cased, accents stripped, punctuation split), UTF-8.
    /// Throws TokenizerError for invalid UTF-8.
    std::vector<std::string> basic_tokens(std::string_view text) const {
        std::vector<std::string> words;
        std::string current;
        auto flush = [&] {
            if (!current.empty()) words.push_back(std::move(current));
            current.clear();
        };
        for (const char32_t c : text_detail::decode_utf8(text)) {
            if (c == 0 || c == 0xFFFD || text_detail::is_control(c)) continue;
            if (text_detail::is_whitespace(c)) { flush(); continue; }
            if (text_detail::is_cjk(c) || text_detail::is_punctuation(c)) {
                flush();
                text_detail::append_utf8(current, text_detail::fold(c));
                flush();
                continue;
            }
            const char32_t folded = text_detail::fold(c);
            if (folded != 0) text_detail::append_utf8(current, folded);
        }
        flush();
        return words;
    }

    /// The word pieces of `text` (no [CLS]/[SEP], no truncation). Throws TokenizerError for invalid UTF-8.
    std::vector<std::int32_t> word_pieces(std::string_view text) const {
        std::vector<std::int32_t> ids;
        for (const std::string& word : basic_tokens(text)) append_word_pieces(word, ids);
        return ids;
    }

    /// [CLS] word pieces [SEP], at most max_tokens ids (>= 2): extra word pieces are dropped and
    /// `truncated` set. An empty text gives [CLS] [SEP]. Throws TokenizerError for invalid UTF-8 or
    /// max_tokens < 2.
    Encoding encode(std::string_view text, std::size_t max_tokens) const {
        if (max_tokens < 2) throw TokenizerError("max_tokens = " + std::to_string(max_tokens) + " leaves no room for [CLS] and [SEP]");
        std::vector<std::int32_t> pieces = word_pieces(text);
        Encoding encoding;
        encoding.truncated = pieces.size() > max_tokens - 2;
        if (encoding.truncated) pieces.resize(max_tokens - 2);
        encoding.ids.reserve(pieces.size() + 2);
        encoding.ids.push_back(cls_id_);
        encoding.ids.insert(encoding.ids.end(), pieces.begin(), pieces.end());
        encoding.ids.push_back(sep_id_);
        return encoding;
    }

private:
    void append_word_pieces(const std::string& word, std::vector<std::int32_t>& ids) const {
        // Code point boundaries: pieces never split a UTF-8 sequence.
        std::vector<std::size_t> starts;
        for (std::size_t i = 0; i < word.size(); ++i)
            if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) starts.push_back(i);
        if (starts.size() > max_word_chars) {
            ids.push_back(unk_id_);
            return;
        }
        starts.push_back(word.size());
        std::vector<std::int32_t> pieces;
        std::size_t begin = 0;  // index into starts
        while (begin + 1 < starts.size()) {
            std::size_t end = starts.size() - 1;
            std::int32_t found = -1;
            for (; end > begin; --end) {
                std::string piece = word.substr(starts[begin], starts[end] - starts[begin]);
                if (begin > 0) piece = "##" + piece;
                const auto it = ids_.find(piece);
                if (it != ids_.end()) {
                    found = it->second;
                    break;
                }
            }
            if (found < 0) {
                ids.push_back(unk_id_);
                return;
            }
            pieces.push_back(found);
            begin = end;
        }
        ids.insert(ids.end(), pieces.begin(), pieces.end());
    }

    std::vector<std::string> tokens_;
    std::unordered_map<std::string, std::int32_t> ids_;
    std::int32_t pad_id_ = 0, unk_id_ = 0, cls_id_ = 0, sep_id_ = 0;
};

}  // namespace minilm
