#pragma once
// Chat templates: the Jinja template in a tokenizer_config.json ("chat_template") that
// writes a conversation as the one text a chat model was trained on, rendered as
// transformers' apply_chat_template renders it (jinja2 with trim_blocks and lstrip_blocks,
// raise_exception, the special tokens and add_generation_prompt as variables).
//
// tfm interprets the Jinja that the templates of today's Llama, Mistral and Qwen2 checkpoints are
// written in (Llama 2, 3, 3.1, 3.2, Mistral v0.1, v0.3 and Nemo, Qwen2, 2.5 and 3 with their tools,
// TinyLlama/Zephyr, DeepSeek-R1-Distill-Llama): text, comments, whitespace control ({%- -%});
// {{ expression }}; {% if %}/{% elif %}/{% else %}; {% for x in ... if ... %} with {% else %},
// {% break %}, {% continue %} (transformers loads loopcontrols) and loop.index, index0, revindex,
// revindex0, first, last, length, previtem, nextitem; {% set x = ... %} scoped as Jinja scopes it and {% set ns.x = ... %}
// on a namespace(); transformers' {% generation %}. Expressions: literals (strings, numbers,
// true/false/none, lists, tuples as lists, mappings), variables, attributes, subscripts, slices with
// a step, + - * / // % ** ~, comparisons, in, and/or/not, "a if b else c", calls with positional and
// name=value arguments. Values keep Python's order of a mapping's keys, str() (lists and dicts as
// Python writes them) and ==. The functions range, namespace, dict, raise_exception and strftime_now
// (transformers': the caller may fix "now"); the filters default (d), first, last, items, join,
// length (count), list, lower, upper, map (a filter, or attribute= with default=), replace, reverse,
// select, reject, selectattr, rejectattr, string, trim, and tojson as transformers defines it
// (json.dumps with ensure_ascii false, indent, separators, sort_keys); the tests defined, undefined,
// none, boolean, true, false, integer, float, number, string, mapping, sequence, iterable, callable,
// odd, even, divisibleby and the comparisons (eq, equalto, ==, ne, lt, le, gt, ge, in, ...); the
// string methods strip, lstrip, rstrip, lower, upper, startswith, endswith, split, replace and the
// mapping methods get, items, keys, values. A filter, test, method or function tfm does not know is
// refused by name when the template reaches it (as jinja2 fails only then: a branch never taken
// costs nothing); syntax it cannot parse (macros, include, {% set %} blocks, recursive loops, ...) is
// refused by name when the template is read.
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tfm::data {

class TokenizerConfig;

class ChatTemplate {
 public:
  // Parses `source`; an unsupported construct or a syntax error is one line naming it.
  explicit ChatTemplate(const std::string& source);
  // The text of the template with `variables` (an object: messages, add_generation_prompt,
  // bos_token, ...), strftime_now giving `now` (the local time where none is given);
  // raise_exception and errors of evaluation are one line.
  std::string render(const nlohmann::ordered_json& variables) const;
  std::string render(const nlohmann::ordered_json& variables, const std::tm& now) const;

  struct Node;

 private:
  std::shared_ptr<const std::vector<Node>> body_;
};

// The configuration's chat_template: the string, or where it is a list of named templates, the
// one named "default".
std::string chat_template_source(const TokenizerConfig& config);

// transformers' apply_chat_template(messages, tools=..., tokenize=False, add_generation_prompt=...,
// **kwargs): the configuration's chat_template (chat_template_source), with tools and documents
// none, the special tokens it names, then `kwargs` (tools, date_string, ...: an object) as
// variables; `now` fixes what strftime_now sees.
std::string apply_chat_template(const TokenizerConfig& config, const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object(), const std::optional<std::tm>& now = std::nullopt);

}  // namespace tfm::data
