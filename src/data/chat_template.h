#pragma once
// Chat templates: the Jinja template in a tokenizer_config.json ("chat_template") that
// writes a conversation as the one text a chat model was trained on, rendered as
// transformers' apply_chat_template renders it (jinja2 with trim_blocks and lstrip_blocks,
// raise_exception, the special tokens and add_generation_prompt as variables).
//
// tfm interprets the part of Jinja that the templates of Llama 2, Llama 3, Mistral and
// Qwen2 are written in: text, comments, whitespace control ({%- -%}); {{ expression }};
// {% if %}/{% elif %}/{% else %}, {% for x in ... %} (loop.index, index0, revindex,
// revindex0, first, last, length) and {% set x = ... %}, scoped as Jinja scopes them;
// expressions of literals (strings, numbers, true/false/none, lists), variables,
// attributes and subscripts, slices, + - * / // % ~, comparisons, in, and/or/not,
// "a if b else c", the tests defined/undefined/none/string/number/mapping/sequence/
// boolean, the filters trim, length, count, upper, lower, first, last, join, default,
// string, the string methods strip, lstrip, rstrip, upper, lower, startswith, endswith,
// split, replace, the mapping methods items, keys, values, get, and the functions
// raise_exception and range. Anything else (macros, include, namespace(), other
// filters, ...) is refused by name when the template is read.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tfm::data {

class TokenizerConfig;

class ChatTemplate {
 public:
  // Parses `source`; an unsupported construct or a syntax error is one line naming it.
  explicit ChatTemplate(const std::string& source);
  // The text of the template with `variables` (an object: messages, add_generation_prompt,
  // bos_token, ...); raise_exception and errors of evaluation are one line.
  std::string render(const nlohmann::json& variables) const;

  struct Node;

 private:
  std::shared_ptr<const std::vector<Node>> body_;
};

// transformers' apply_chat_template(messages, tokenize=False, add_generation_prompt=...):
// the configuration's chat_template (or, where it is a list of named templates, the one
// named "default"), with the special tokens it names as variables.
std::string apply_chat_template(const TokenizerConfig& config, const nlohmann::json& messages, bool add_generation_prompt);

}  // namespace tfm::data
