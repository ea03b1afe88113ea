// The chat template of a GGUF file (tokenizer.chat_template, a Jinja template), recognised rather than
// interpreted, as llama.cpp's built-in templates are: a ChatML template (one that writes
// "<|im_start|>") formats a user prompt as
//
//   [<|im_start|>system\n SYSTEM <|im_end|>\n]  <|im_start|>user\n PROMPT <|im_end|>\n  <|im_start|>assistant\n
//
// where SYSTEM is the default system message the template writes when the conversation has none (the
// text of its literal '<|im_start|>system\n...<|im_end|>'), if it has one. Other templates are refused.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <lowbit/io/gguf.hpp>

namespace llm {

/// A chat template this runner can apply to one user message.
class ChatTemplate {
public:
    /// Reads tokenizer.chat_template. Throws std::invalid_argument naming the file when it is missing
    /// or not ChatML.
    static ChatTemplate from_gguf(const lowbit::GgufFile& file, const std::string& label) {
        const auto it = file.metadata().find("tokenizer.chat_template");
        if (it == file.metadata().end() || it->second.type() != lowbit::GgufType::string)
            throw std::invalid_argument(label + ": tokenizer.chat_template is missing; run without --chat");
        const std::string& source = it->second.as_string();
        if (source.find("<|im_start|>") == std::string::npos)
            throw std::invalid_argument(
                label + ": tokenizer.chat_template is not ChatML (no <|im_start|>); run without --chat");
        ChatTemplate chat;
        const std::string open = "<|im_start|>system\n";
        if (const auto begin = source.find(open); begin != std::string::npos) {
            const auto text = begin + open.size();
            const auto end = source.find("<|im_end|>", text);
            const auto literal = source.substr(text, end == std::string::npos ? 0 : end - text);
            // A literal only: a template that splices a variable in ("' + ...") has no default text.
            if (end != std::string::npos && literal.find('\'') == std::string::npos &&
                literal.find("{{") == std::string::npos)
                chat.default_system_ = literal;
        }
        return chat;
    }

    /// The text to tokenize (with special tokens parsed) for one user message, ending where the
    /// assistant's reply starts.
    std::string apply(const std::string& user) const {
        std::string text;
        if (default_system_) text += "<|im_start|>system\n" + *default_system_ + "<|im_end|>\n";
        return text + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    }

    const std::optional<std::string>& default_system() const noexcept { return default_system_; }

private:
    std::optional<std::string> default_system_;
};

}  // namespace llm
