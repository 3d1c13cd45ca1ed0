#include "data/tool_calls.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tfm::data {

namespace {

using json = nlohmann::ordered_json;  // (the model's order of the arguments' keys)

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>", kMistralMark = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";  // Llama 3.1's, which may come before a call (not special to decoding)
constexpr std::string_view kSpace = " \t\r\n";

std::string_view trimmed(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// {"name": "...", "<arguments_key>": {...}} as a call; nothing where it is not one. Arguments
// given as a string are kept as they are (some models write the JSON text themselves).
std::optional<ToolCallText> call_of(const json& j, const char* arguments_key) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const json arguments = j.value(arguments_key, json::object());
  if (!arguments.is_object() && !arguments.is_string()) return std::nullopt;
  return ToolCallText{j["name"].get<std::string>(), arguments.is_string() ? arguments.get<std::string>() : arguments.dump(-1, ' ', false)};
}

json parsed(std::string_view text) { return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false); }

std::optional<ToolCallText> llama_call(const json& j) {
  if (j.is_object() && j.contains("parameters")) return call_of(j, "parameters");
  return call_of(j, "arguments");
}

ParsedReply hermes(const std::string& reply) {
  const size_t first = reply.find(kHermesOpen);
  if (first == std::string::npos) return {reply, {}};
  ParsedReply out{reply.substr(0, first), {}};
  for (size_t at = first; at < reply.size();) {
    const std::string_view rest = std::string_view(reply).substr(at);
    if (trimmed(rest).empty()) break;
    if (!trimmed(rest).starts_with(kHermesOpen)) return {reply, {}};  // text after the calls
    const size_t open = reply.find(kHermesOpen, at) + kHermesOpen.size(), close = reply.find(kHermesClose, open);
    const std::optional<ToolCallText> call = call_of(parsed(std::string_view(reply).substr(open, close - open)), "arguments");
    if (!call) return {reply, {}};
    out.calls.push_back(*call);
    at = close == std::string::npos ? reply.size() : close + kHermesClose.size();
  }
  return out;
}

ParsedReply llama(const std::string& reply) {
  std::string_view object = trimmed(reply);
  if (object.starts_with(kPythonTag)) object.remove_prefix(kPythonTag.size());
  const std::optional<ToolCallText> call = llama_call(parsed(object));
  if (!call) return {reply, {}};
  return {"", {*call}};
}

ParsedReply mistral(const std::string& reply) {
  std::string_view list = trimmed(reply);
  if (list.starts_with(kMistralMark)) list.remove_prefix(kMistralMark.size());
  const json calls = parsed(list);
  if (!calls.is_array() || calls.empty()) return {reply, {}};
  ParsedReply out;
  for (const json& j : calls) {
    const std::optional<ToolCallText> call = call_of(j, "arguments");
    if (!call) return {reply, {}};
    out.calls.push_back(*call);
  }
  return out;
}

// Whether `reply`, white space aside, is empty or begins as `start` does (or with one of its beginnings).
bool begins_like(const std::string& reply, std::string_view start) {
  const std::string_view t = trimmed(reply);
  return t.empty() || t.starts_with(start.substr(0, std::min(start.size(), t.size())));
}

}  // namespace

ToolCallFormat tool_call_format(const std::string& chat_template) {
  if (chat_template.find(kHermesOpen) != std::string::npos) return ToolCallFormat::kHermes;
  if (chat_template.find(kMistralMark) != std::string::npos) return ToolCallFormat::kMistral;
  if (chat_template.find("\"parameters\"") != std::string::npos) return ToolCallFormat::kLlama;  // '{"name": ..., "parameters": ...}'
  return ToolCallFormat::kNone;
}

ParsedReply parse_tool_calls(ToolCallFormat format, const std::string& reply) {
  switch (format) {
    case ToolCallFormat::kHermes: return hermes(reply);
    case ToolCallFormat::kLlama: return llama(reply);
    case ToolCallFormat::kMistral: return mistral(reply);
    case ToolCallFormat::kNone: break;
  }
  return {reply, {}};
}

size_t tool_call_start(ToolCallFormat format, const std::string& reply) {
  switch (format) {
    case ToolCallFormat::kHermes: {
      const size_t open = reply.find(kHermesOpen);
      if (open != std::string::npos) return open;
      for (size_t n = std::min(kHermesOpen.size() - 1, reply.size()); n > 0; --n)  // an opening tag's first characters
        if (std::string_view(reply).ends_with(kHermesOpen.substr(0, n))) return reply.size() - n;
      return reply.size();
    }
    case ToolCallFormat::kLlama: return begins_like(reply, "{") || begins_like(reply, kPythonTag) ? 0 : reply.size();
    case ToolCallFormat::kMistral: return begins_like(reply, "[") ? 0 : reply.size();  // [TOOL_CALLS], or the list alone
    case ToolCallFormat::kNone: break;
  }
  return reply.size();
}

}  // namespace tfm::data
