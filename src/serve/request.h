#pragma once
// A request's JSON body read field by field: each field checked for its type and range,
// unknown fields refused (a misspelt "beams" must not silently mean the default), and
// every problem an HttpError that becomes the response's status and message.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/http.h"
#include "tfm/generator.h"

namespace tfm::serve {

class RequestBody {
 public:
  // Parses `body` (400 if it is not a JSON object). `known` lists every field the
  // endpoint reads; `lenient`: other fields are ignored rather than refused (the
  // OpenAI-compatible endpoint, whose clients send fields of their own).
  RequestBody(const std::string& body, std::initializer_list<std::string_view> known, bool lenient = false);

  bool has(const char* name) const { return json_.contains(name) && !json_[name].is_null(); }
  std::string text(const char* name, const std::string& fallback) const;
  int64_t integer(const char* name, int64_t fallback, int64_t low, int64_t high) const;
  double number(const char* name, double fallback, double low, double high) const;
  bool flag(const char* name, bool fallback) const;
  // A list of strings of 1 to `max_items` entries; a single string is a list of one where `single_ok`.
  std::vector<std::string> texts(const char* name, int64_t max_items, bool single_ok = false) const;
  // OpenAI's `stop`: absent, null, "" or [] (none), a string, or a list of up to `max_items` non-empty strings.
  std::vector<std::string> stop_strings(const char* name, int64_t max_items) const;
  // An object field (absent or null: an empty object).
  nlohmann::json object(const char* name) const;
  // OpenAI's chat `messages`: 1 to `max_items` objects of a "role" and a "content" (a
  // string, or a list of {"type": "text", "text": ...} parts, joined; null where an assistant
  // calls tools), an assistant's "tool_calls", a tool's "tool_call_id" and "name"; other keys ignored.
  Chat messages(const char* name, int64_t max_items) const;
  // OpenAI's chat `tools`: a list of at most `max_items` {"type": "function", "function":
  // {"name": ..., ...}}, as the JSON text given (its keys in their order); "" where absent or empty.
  std::string tools(const char* name, int64_t max_items) const;
  // A field that must be absent, null or one of `allowed` (an OpenAI option tfm does not offer).
  void only(const char* name, std::initializer_list<nlohmann::json> allowed, const char* why) const;

 private:
  std::string body_;
  nlohmann::json json_;
  // A field with its objects' keys in the order given (json_ sorts them), which a chat template shows.
  nlohmann::ordered_json ordered(const char* name) const;
  const nlohmann::json* field(const char* name) const;
};

}  // namespace tfm::serve
