#pragma once
// Tool calls in a chat model's reply, read in the format the model's chat template teaches it
// (what vLLM's tool parsers read for these families):
//   Hermes (Qwen2.5, Qwen3): blocks of `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`,
//     one per call, after any text (the content); the last block may lack its closing tag (the
//     end token came first). Anything but white space after the first block leaves the reply text.
//   Llama 3.1 / 3.2: the whole reply one JSON object {"name": ..., "parameters": {...}} ("arguments"
//     is read too), one call, after <|python_tag|> where the model writes one.
//   Mistral (v0.3, Nemo): `[TOOL_CALLS]` and a JSON list of {"name": ..., "arguments": {...}}; where
//     decoding dropped [TOOL_CALLS] as a special token, the list alone as the whole reply.
// A reply that does not parse as a whole stays text: no call is made of part of it.
#include <cstddef>
#include <string>
#include <vector>

namespace tfm::data {

enum class ToolCallFormat { kNone, kHermes, kLlama, kMistral };

// The one place where a model's format is decided: from its chat template's text, by what it
// writes for a call (a template none of these match: kNone, its replies are always text).
ToolCallFormat tool_call_format(const std::string& chat_template);

struct ToolCallText {
  std::string name, arguments;  // arguments: a JSON object's text, as OpenAI returns it
};

struct ParsedReply {
  std::string content;  // the text before the calls (the whole reply where there are none)
  std::vector<ToolCallText> calls;
};

ParsedReply parse_tool_calls(ToolCallFormat format, const std::string& reply);

// Where in a reply generated so far a tool call may begin: what comes before can be shown
// as text while the rest is held back until the reply is complete (its length: nothing to
// hold back). It only grows as the reply does, up to where a call begins.
size_t tool_call_start(ToolCallFormat format, const std::string& reply);

}  // namespace tfm::data
