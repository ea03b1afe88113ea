// The byte-level BPE tokenizer of a GGUF file (tokenizer.ggml.model = "gpt2"), as llama.cpp runs it:
//
//   text -> split at special tokens (control tokens only when parse_special; user-defined always)
//        -> pre-tokenize each piece: every number code point alone, then GPT-2's pattern
//           's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//        -> each word's bytes as GPT-2's printable code points (bytes_to_unicode), merged pair by pair,
//           lowest merge rank first (leftmost on ties), until no pair of the merge list is left
//        -> each symbol's id in tokenizer.ggml.tokens (a symbol not in the vocabulary: its bytes' ids)
//
// The pre-tokenizer is the one llama.cpp uses for tokenizer.ggml.pre "smollm", "starcoder", "refact",
// "command-r" and "gpt-2" ("gpt-2" without the digit split). Code points are classed exactly for ASCII
// and Latin-1; above U+00FF, punctuation and symbol blocks (U+2000-U+2BFF, U+3000-U+303F, U+FE30-U+FE4F,
// U+FF00-U+FF0F, U+1F000-U+1FAFF) count as neither letter nor number, Unicode's white space as space,
// and everything else as a letter; non-ASCII digits other than Latin-1's superscripts and fractions
// therefore count as letters (Unicode says numbers), a difference only for such digits.
//
// decode() is the inverse for normal tokens; control tokens decode to nothing (llama.cpp's
// token_to_piece with special = false).
//
// Errors: TokenizerError (std::invalid_argument) naming the file and the key for a model or
// pre-tokenizer other than these, or missing or mismatched arrays; encode() throws it for a byte
// that neither merges into a token nor has one of its own.
#pragma once

#include "../utf8.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <lowbit/io/gguf.hpp>

namespace llm {

/// A tokenizer in a GGUF file that this runner cannot read or run.
struct TokenizerError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

namespace unicode {

using ::example_text::append_utf8;

/// One code point of `text` at `pos` and its length in bytes. A malformed sequence reads as one byte
/// with code point invalid_cp (0xFFFFFFFF, class Other), so every byte of any text is consumed.
struct Decoded {
    std::uint32_t cp;
    std::size_t length;
};
inline constexpr std::uint32_t invalid_cp = 0xFFFFFFFF;

inline Decoded decode_utf8(std::string_view text, std::size_t pos) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(pos);
    if (lead < 0x80) return {lead, 1};
    const std::size_t length = lead >= 0xF0 && lead < 0xF8 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (length == 0 || pos + length > text.size()) return {invalid_cp, 1};
    std::uint32_t cp = lead & (0x7F >> length);
    for (std::size_t i = 1; i < length; ++i) {
        if ((byte(pos + i) & 0xC0) != 0x80) return {invalid_cp, 1};
        cp = (cp << 6) | (byte(pos + i) & 0x3F);
    }
    return {cp, length};
}

enum class Class { letter, number, space, other };

/// The class of a code point (the approximation above U+00FF is described at the top of the file).
inline Class classify(std::uint32_t cp) {
    if (cp == invalid_cp) return Class::other;
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return Class::letter;
        if (cp >= '0' && cp <= '9') return Class::number;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return Class::space;
        return Class::other;
    }
    if (cp <= 0xFF) {
        if (cp == 0x85 || cp == 0xA0) return Class::space;
        if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE)) return Class::number;
        if (cp == 0xAA || cp == 0xB5 || cp == 0xBA) return Class::letter;
        if (cp < 0xC0 || cp == 0xD7 || cp == 0xF7) return Class::other;
        return Class::letter;
    }
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
        cp == 0x205F || cp == 0x3000)
        return Class::space;
    if ((cp >= 0x2000 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0xFE30 && cp <= 0xFE4F) ||
        (cp >= 0xFF00 && cp <= 0xFF0F) || (cp >= 0x1F000 && cp <= 0x1FAFF))
        return Class::other;
    return Class::letter;
}

/// GPT-2's bytes_to_unicode: each byte as a printable code point (printable Latin-1 bytes map to
/// themselves, the other 68 to U+0100 onwards in byte order).
inline const std::array<std::uint32_t, 256>& byte_to_code_point() {
    static const std::array<std::uint32_t, 256> table = [] {
        std::array<std::uint32_t, 256> map{};
        std::uint32_t next = 256;
        for (std::uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            map[b] = printable ? b : next++;
        }
        return map;
    }();
    return table;
}

}  // namespace unicode

/// Splits `piece` into pre-tokenizer words (see the top of the file), appending [begin, end) byte ranges.
inline void pre_tokenize(std::string_view piece, bool split_digits, std::vector<std::string_view>& words) {
    // Code points with their byte offsets; offsets[n] = piece.size().
    std::vector<std::uint32_t> cps;
    std::vector<std::size_t> offsets;
    for (std::size_t pos = 0; pos < piece.size();) {
        const auto decoded = unicode::decode_utf8(piece, pos);
        cps.push_back(decoded.cp);
        offsets.push_back(pos);
        pos += decoded.length;
    }
    offsets.push_back(piece.size());
    const auto emit = [&](std::size_t begin, std::size_t end) {
        if (end > begin) words.push_back(piece.substr(offsets[begin], offsets[end] - offsets[begin]));
    };
    // GPT-2's pattern over the code points [begin, end), as llama.cpp's hand-written matcher runs it.
    const auto gpt2 = [&](std::size_t begin, std::size_t end) {
        const auto cls = [&](std::size_t i) { return unicode::classify(cps[i]); };
        std::size_t pos = begin;
        while (pos < end) {
            const std::uint32_t cp = cps[pos];
            if (cp == '\'' && pos + 1 < end) {
                const std::uint32_t next = cps[pos + 1];
                if (next == 's' || next == 't' || next == 'm' || next == 'd') {
                    emit(pos, pos + 2);
                    pos += 2;
                    continue;
                }
                if (pos + 2 < end) {
                    const std::uint32_t after = cps[pos + 2];
                    if ((next == 'r' && after == 'e') || (next == 'v' && after == 'e') ||
                        (next == 'l' && after == 'l')) {
                        emit(pos, pos + 3);
                        pos += 3;
                        continue;
                    }
                }
            }
            // " ?" then a run of one class (letters, numbers, or neither-nor-space).
            const std::size_t first = cp == ' ' && pos + 1 < end ? pos + 1 : pos;
            const auto run_class = cls(first);
            if (first < end && run_class != unicode::Class::space && (first == pos + 1 || cp != ' ')) {
                std::size_t stop = first + 1;
                while (stop < end && cls(stop) == run_class) ++stop;
                emit(pos, stop);
                pos = stop;
                continue;
            }
            std::size_t spaces = 0;
            while (pos + spaces < end && cls(pos + spaces) == unicode::Class::space) ++spaces;
            if (spaces > 1 && pos + spaces < end) {  // \s+(?!\S): leave the last space to the next word
                emit(pos, pos + spaces - 1);
                pos += spaces - 1;
            } else if (spaces > 0) {  // \s+
                emit(pos, pos + spaces);
                pos += spaces;
            } else {
                emit(pos, pos + 1);
                ++pos;
            }
        }
    };
    if (!split_digits) {
        gpt2(0, cps.size());
        return;
    }
    std::size_t begin = 0;
    for (std::size_t i = 0; i < cps.size(); ++i) {
        if (unicode::classify(cps[i]) != unicode::Class::number) continue;
        gpt2(begin, i);
        emit(i, i + 1);
        begin = i + 1;
    }
    gpt2(begin, cps.size());
}

/// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : int {
    undefined = 0,
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6
};

class BpeTokenizer {
public:
    /// Reads the tokenizer of `file` (`label` names it in errors).
    static BpeTokenizer from_gguf(const lowbit::GgufFile& file, const std::string& label) {
        BpeTokenizer tokenizer;
        const auto fail = [&](const std::string& fault) { return TokenizerError(label + ": " + fault); };
        const auto& metadata = file.metadata();
        const auto get = [&](const std::string& key) -> const lowbit::GgufValue& {
            const auto it = metadata.find(key);
            if (it == metadata.end()) throw fail("tokenizer key '" + key + "' is missing");
            return it->second;
        };
        try {
            const std::string& model = get("tokenizer.ggml.model").as_string();
            if (model != "gpt2")
                throw fail("tokenizer.ggml.model is '" + model + "'; this runner reads byte-level BPE ('gpt2') only");
            const auto pre = metadata.find("tokenizer.ggml.pre");
            const std::string pre_name = pre == metadata.end() ? "gpt-2" : pre->second.as_string();
            if (pre_name == "gpt-2" || pre_name == "default") {
                tokenizer.split_digits_ = false;
            } else if (pre_name == "smollm" || pre_name == "starcoder" || pre_name == "refact" ||
                       pre_name == "command-r") {
                tokenizer.split_digits_ = true;
            } else {
                throw fail("tokenizer.ggml.pre is '" + pre_name +
                           "'; this runner knows 'gpt-2', 'smollm', 'starcoder', 'refact' and 'command-r'");
            }
            const auto& tokens = get("tokenizer.ggml.tokens").as_array();
            const auto& merges = get("tokenizer.ggml.merges").as_array();
            if (tokens.empty() || tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
                throw fail("tokenizer.ggml.tokens has " + std::to_string(tokens.size()) + " tokens");
            tokenizer.pieces_.reserve(tokens.size());
            for (const auto& token : tokens) tokenizer.pieces_.push_back(token.as_string());
            tokenizer.types_.assign(tokens.size(), TokenType::normal);
            if (const auto types = metadata.find("tokenizer.ggml.token_type"); types != metadata.end()) {
                const auto& values = types->second.as_array();
                if (values.size() != tokens.size())
                    throw fail("tokenizer.ggml.token_type has " + std::to_string(values.size()) + " entries for " +
                               std::to_string(tokens.size()) + " tokens");
                for (std::size_t i = 0; i < values.size(); ++i) {
                    const auto type = values[i].as_int();
                    if (type < 0 || type > 6)
                        throw fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] is " + std::to_string(type));
                    tokenizer.types_[i] = static_cast<TokenType>(type);
                }
            }
            for (std::size_t id = 0; id < tokenizer.pieces_.size(); ++id)
                tokenizer.ids_.emplace(tokenizer.pieces_[id], static_cast<std::int32_t>(id));
            for (std::size_t rank = 0; rank < merges.size(); ++rank) {
                const std::string& merge = merges[rank].as_string();
                const auto space = merge.find(' ', 1);
                if (space == std::string::npos || space + 1 >= merge.size())
                    throw fail("tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + merge +
                               "' is not two symbols");
                tokenizer.merge_ranks_.emplace(merge, static_cast<std::int32_t>(rank));
            }
            for (int b = 0; b < 256; ++b) {
                std::string symbol;
                unicode::append_utf8(symbol, unicode::byte_to_code_point()[static_cast<std::size_t>(b)]);
                const auto it = tokenizer.ids_.find(symbol);
                tokenizer.byte_ids_[static_cast<std::size_t>(b)] = it == tokenizer.ids_.end() ? -1 : it->second;
            }
            for (std::size_t id = 0; id < tokenizer.pieces_.size(); ++id) {
                const auto type = tokenizer.types_[id];
                if (type == TokenType::control || type == TokenType::user_defined || type == TokenType::unknown)
                    tokenizer.specials_.push_back(static_cast<std::int32_t>(id));
            }
            // Longest first, so that a special token is never cut by a shorter one it starts with.
            std::stable_sort(tokenizer.specials_.begin(), tokenizer.specials_.end(),
                             [&](std::int32_t a, std::int32_t b) {
                                 return tokenizer.pieces_[static_cast<std::size_t>(a)].size() >
                                        tokenizer.pieces_[static_cast<std::size_t>(b)].size();
                             });
        } catch (const TokenizerError&) {
            throw;
        } catch (const std::invalid_argument& error) {  // a GgufValue of the wrong type
            throw fail(std::string("tokenizer metadata: ") + error.what());
        }
        return tokenizer;
    }

    std::size_t vocab_size() const noexcept { return pieces_.size(); }
    const std::string& piece(std::int32_t id) const { return pieces_.at(static_cast<std::size_t>(id)); }
    TokenType type(std::int32_t id) const { return types_.at(static_cast<std::size_t>(id)); }
    /// The id of a token by its text, if the vocabulary has it.
    std::optional<std::int32_t> find(std::string_view piece) const {
        const auto it = ids_.find(std::string(piece));
        return it == ids_.end() ? std::nullopt : std::optional<std::int32_t>(it->second);
    }

    /// The ids of `text`. parse_special: control tokens written in the text become their ids
    /// (user-defined tokens always do); otherwise they are tokenized as text.
    std::vector<std::int32_t> encode(std::string_view text, bool parse_special) const {
        std::vector<std::int32_t> ids;
        std::size_t begin = 0;
        while (begin < text.size()) {
            // The earliest special token (longest on a tie) at or after `begin`.
            std::size_t best_pos = text.size();
            std::int32_t best_id = -1;
            for (const std::int32_t id : specials_) {
                if (!parse_special && types_[static_cast<std::size_t>(id)] != TokenType::user_defined) continue;
                const std::string& special = pieces_[static_cast<std::size_t>(id)];
                if (special.empty()) continue;
                const auto pos = text.find(special, begin);
                if (pos < best_pos) {
                    best_pos = pos;
                    best_id = id;
                }
            }
            encode_text(text.substr(begin, best_pos - begin), ids);
            if (best_id < 0) break;
            ids.push_back(best_id);
            begin = best_pos + pieces_[static_cast<std::size_t>(best_id)].size();
        }
        return ids;
    }

    /// The text of `id`: its symbols' bytes; control tokens give "". Throws std::out_of_range for an id
    /// outside the vocabulary.
    std::string decode(std::int32_t id) const {
        const auto index = static_cast<std::size_t>(id);
        if (id < 0 || index >= pieces_.size())
            throw std::out_of_range("llm::BpeTokenizer: token id " + std::to_string(id));
        if (types_[index] == TokenType::control) return {};
        if (types_[index] == TokenType::user_defined) return pieces_[index];
        std::string bytes;
        const std::string& piece = pieces_[index];
        for (std::size_t pos = 0; pos < piece.size();) {
            const auto decoded = unicode::decode_utf8(piece, pos);
            pos += decoded.length;
            const auto byte = code_point_to_byte(decoded.cp);
            if (byte) bytes += static_cast<char>(*byte);
        }
        return bytes;
    }

    std::string decode(const std::vector<std::int32_t>& ids) const {
        std::string text;
        for (const auto id : ids) text += decode(id);
        return text;
    }

private:
    static std::optional<unsigned char> code_point_to_byte(std::uint32_t cp) {
        static const std::unordered_map<std::uint32_t, unsigned char> inverse = [] {
            std::unordered_map<std::uint32_t, unsigned char> map;
            for (int b = 0; b < 256; ++b)
                map.emplace(unicode::byte_to_code_point()[static_cast<std::size_t>(b)], static_cast<unsigned char>(b));
            return map;
        }();
        const auto it = inverse.find(cp);
        return it == inverse.end() ? std::nullopt : std::optional<unsigned char>(it->second);
    }

    void encode_text(std::string_view text, std::vector<std::int32_t>& ids) const {
        std::vector<std::string_view> words;
        pre_tokenize(text, split_digits_, words);
        for (const auto word : words) encode_word(word, ids);
    }

    /// BPE on one pre-tokenizer word.
    void encode_word(std::string_view word, std::vector<std::int32_t>& ids) const {
        std::vector<std::string> symbols;
        symbols.reserve(word.size());
        for (const char c : word) {
            std::string symbol;
            unicode::append_utf8(symbol, unicode::byte_to_code_point()[static_cast<unsigned char>(c)]);
            symbols.push_back(std::move(symbol));
        }
        std::string key;
        while (symbols.size() > 1) {
            std::int32_t best_rank = std::numeric_limits<std::int32_t>::max();
            std::size_t best = 0;
            for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
                key.assign(symbols[i]).append(" ").append(symbols[i + 1]);
                const auto it = merge_ranks_.find(key);
                if (it != merge_ranks_.end() && it->second < best_rank) {
                    best_rank = it->second;
                    best = i;
                }
            }
            if (best_rank == std::numeric_limits<std::int32_t>::max()) break;
            symbols[best] += symbols[best + 1];
            symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        }
        for (const auto& symbol : symbols) {
            if (const auto it = ids_.find(symbol); it != ids_.end()) {
                ids.push_back(it->second);
                continue;
            }
            // Not in the vocabulary: its bytes one by one.
            for (std::size_t pos = 0; pos < symbol.size();) {
                const auto decoded = unicode::decode_utf8(symbol, pos);
                pos += decoded.length;
                const auto byte = code_point_to_byte(decoded.cp);
                if (!byte) continue;
                if (byte_ids_[*byte] < 0)
                    throw TokenizerError("llm::BpeTokenizer: byte " + std::to_string(*byte) +
                                         " of the text has no token in the vocabulary");
                ids.push_back(byte_ids_[*byte]);
            }
        }
    }

    std::vector<std::string> pieces_;
    std::vector<TokenType> types_;
    std::unordered_map<std::string, std::int32_t> ids_;
    std::unordered_map<std::string, std::int32_t> merge_ranks_;
    std::array<std::int32_t, 256> byte_ids_{};  ///< each byte's token, -1 where the vocabulary has none
    std::vector<std::int32_t> specials_;        ///< control, user-defined and unknown tokens, longest first
    bool split_digits_ = true;
};

}  // namespace llm
