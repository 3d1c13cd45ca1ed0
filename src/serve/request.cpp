#include "serve/request.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <vector>

namespace tfm::serve {

namespace {

std::string listing(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace

RequestBody::RequestBody(const std::string& body, std::initializer_list<std::string_view> known, bool lenient) : body_(body) {
  // A field given twice would take its last value silently (as nlohmann's parser does),
  // while another reader of the same body takes the first: refused.
  std::vector<std::set<std::string>> keys;  // of each object being read
  std::string repeated;
  const auto watch = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end) keys.pop_back();
    if (event == E::key && !keys.back().insert(parsed.get<std::string>()).second && repeated.empty()) repeated = parsed.get<std::string>();
    return true;
  };
  json_ = nlohmann::json::parse(body, watch, /*allow_exceptions=*/false);
  if (json_.is_discarded()) throw HttpError(400, "the body is not valid JSON");
  if (!repeated.empty()) throw HttpError(400, "the field '" + repeated + "' is given twice");
  if (!json_.is_object()) throw HttpError(400, "the body must be a JSON object");
  if (lenient) return;
  for (const auto& [name, value] : json_.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == name;
    if (!found) throw HttpError(400, "unknown field '" + name + "' (this endpoint reads: " + listing(known) + ")");
  }
}

const nlohmann::json* RequestBody::field(const char* name) const { return has(name) ? &json_[name] : nullptr; }

std::string RequestBody::text(const char* name, const std::string& fallback) const {
  const nlohmann::json* f = field(name);
  if (!f) return fallback;
  if (!f->is_string()) throw HttpError(400, std::string("'") + name + "' must be a string");
  return f->get<std::string>();
}

int64_t RequestBody::integer(const char* name, int64_t fallback, int64_t low, int64_t high) const {
  const nlohmann::json* f = field(name);
  if (!f) return fallback;
  const bool whole = f->is_number_integer() || (f->is_number_float() && std::trunc(f->get<double>()) == f->get<double>());
  if (!whole || f->get<double>() < static_cast<double>(low) || f->get<double>() > static_cast<double>(high))
    throw HttpError(400, std::string("'") + name + "' must be a whole number from " + std::to_string(low) + " to " +
                             std::to_string(high) + ", got " + f->dump());
  return f->get<int64_t>();
}

double RequestBody::number(const char* name, double fallback, double low, double high) const {
  const nlohmann::json* f = field(name);
  if (!f) return fallback;
  if (!f->is_number() || !(f->get<double>() >= low && f->get<double>() <= high)) {
    std::ostringstream range;
    range << "'" << name << "' must be a number from " << low << " to " << high << ", got " << f->dump();
    throw HttpError(400, range.str());
  }
  return f->get<double>();
}

bool RequestBody::flag(const char* name, bool fallback) const {
  const nlohmann::json* f = field(name);
  if (!f) return fallback;
  if (!f->is_boolean()) throw HttpError(400, std::string("'") + name + "' must be true or false");
  return f->get<bool>();
}

std::vector<std::string> RequestBody::texts(const char* name, int64_t max_items, bool single_ok) const {
  const nlohmann::json* f = field(name);
  if (!f) throw HttpError(400, std::string("'") + name + "' is missing");
  if (single_ok && f->is_string()) return {f->get<std::string>()};
  if (!f->is_array() || f->empty()) throw HttpError(400, std::string("'") + name + "' must be a non-empty list of strings");
  if (static_cast<int64_t>(f->size()) > max_items)
    throw HttpError(400, std::string("'") + name + "' has " + std::to_string(f->size()) + " entries; at most " +
                             std::to_string(max_items) + " per request (--max-items)");
  std::vector<std::string> out;
  for (const nlohmann::json& e : *f) {
    if (!e.is_string()) throw HttpError(400, std::string("'") + name + "' must hold strings only");
    out.push_back(e.get<std::string>());
  }
  return out;
}

namespace {

// A chat message's content: a string, or the text of a list of text parts (an
// assistant's that calls tools, or a tool's: null or absent too, an empty text).
std::string message_content(const nlohmann::ordered_json& m, size_t index) {
  const std::string where = "message " + std::to_string(index + 1) + "'s content";
  const nlohmann::ordered_json content = m.value("content", nlohmann::ordered_json());
  if (content.is_null() && (m.contains("tool_calls") || m["role"] == "tool")) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw HttpError(400, where + " must be a string or a list of text parts");
  std::string text;
  for (const nlohmann::ordered_json& part : content) {
    const bool is_text = part.is_object() && part.value("type", nlohmann::ordered_json()) == "text" && part.contains("text") && part["text"].is_string();
    if (!is_text) throw HttpError(400, where + " holds a part that is not text (tfm's models read text only)");
    text += part["text"].get<std::string>();
  }
  return text;
}

// A string field of a message's part, or "" where it is absent or null.
std::string string_field(const nlohmann::ordered_json& o, const char* name, const std::string& where) {
  const nlohmann::ordered_json f = o.value(name, nlohmann::ordered_json());
  if (f.is_null()) return "";
  if (!f.is_string()) throw HttpError(400, where + "'s '" + name + "' must be a string");
  return f.get<std::string>();
}

// An assistant's tool_calls: OpenAI's [{"id": ..., "type": "function", "function": {"name": ..., "arguments": "{...}"}}]
// (arguments as an object too, written as its JSON text).
std::vector<ToolCall> message_tool_calls(const nlohmann::ordered_json& m, size_t index) {
  const std::string where = "message " + std::to_string(index + 1) + "'s tool call";
  const nlohmann::ordered_json calls = m.value("tool_calls", nlohmann::ordered_json());
  if (calls.is_null()) return {};
  if (!calls.is_array()) throw HttpError(400, "message " + std::to_string(index + 1) + "'s 'tool_calls' must be a list");
  std::vector<ToolCall> out;
  for (const nlohmann::ordered_json& call : calls) {
    if (!call.is_object() || call.value("type", nlohmann::ordered_json("function")) != "function" || !call.contains("function") ||
        !call["function"].is_object())
      throw HttpError(400, where + " must be an object of \"type\": \"function\" and a \"function\" object");
    const nlohmann::ordered_json& f = call["function"];
    const nlohmann::ordered_json arguments = f.value("arguments", nlohmann::ordered_json("{}"));
    if (!arguments.is_string() && !arguments.is_object()) throw HttpError(400, where + "'s arguments must be a JSON text (or an object)");
    const std::string name = string_field(f, "name", where);
    if (name.empty()) throw HttpError(400, where + " names no function");
    out.push_back({string_field(call, "id", where), name, arguments.is_string() ? arguments.get<std::string>() : arguments.dump()});
  }
  return out;
}

}  // namespace

nlohmann::json RequestBody::object(const char* name) const {
  const nlohmann::json* f = field(name);
  if (!f) return nlohmann::json::object();
  if (!f->is_object()) throw HttpError(400, std::string("'") + name + "' must be an object");
  return *f;
}

nlohmann::ordered_json RequestBody::ordered(const char* name) const {
  return has(name) ? nlohmann::ordered_json::parse(body_)[name] : nlohmann::ordered_json();
}

Chat RequestBody::messages(const char* name, int64_t max_items) const {
  if (!field(name)) throw HttpError(400, std::string("'") + name + "' is missing");
  const nlohmann::ordered_json f = ordered(name);
  if (!f.is_array() || f.empty()) throw HttpError(400, std::string("'") + name + "' must be a non-empty list of messages");
  if (static_cast<int64_t>(f.size()) > max_items)
    throw HttpError(400, std::string("'") + name + "' has " + std::to_string(f.size()) + " messages; at most " + std::to_string(max_items) +
                             " per request (--max-items)");
  Chat chat;
  for (size_t i = 0; i < f.size(); ++i) {
    const nlohmann::ordered_json& m = f[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw HttpError(400, "message " + std::to_string(i + 1) + " must be an object with a \"role\" (a string) and a \"content\"");
    const std::string where = "message " + std::to_string(i + 1), role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")  // (OpenAI's roles)
      throw HttpError(400, where + "'s role \"" + role + "\" is none of \"system\", \"developer\", \"user\", \"assistant\" and \"tool\"");
    chat.push_back({role, message_content(m, i), message_tool_calls(m, i), string_field(m, "tool_call_id", where),
                    string_field(m, "name", where)});
  }
  return chat;
}

std::string RequestBody::tools(const char* name, int64_t max_items) const {
  if (!field(name)) return "";
  const nlohmann::ordered_json f = ordered(name);
  if (!f.is_array() || static_cast<int64_t>(f.size()) > max_items)
    throw HttpError(400, std::string("'") + name + "' must be a list of at most " + std::to_string(max_items) + " tools (--max-items)");
  for (const nlohmann::ordered_json& tool : f) {
    const bool function = tool.is_object() && tool.value("type", nlohmann::ordered_json()) == "function" && tool.contains("function") &&
                          tool["function"].is_object() && tool["function"].value("name", nlohmann::ordered_json()).is_string();
    if (!function) throw HttpError(400, std::string("'") + name + "' must hold {\"type\": \"function\", \"function\": {\"name\": ..., ...}} objects");
  }
  return f.empty() ? "" : f.dump();  // (OpenAI's clients send [] for none, which Mistral's templates would write as tools)
}

std::vector<std::string> RequestBody::stop_strings(const char* name, int64_t max_items) const {
  const nlohmann::json* f = field(name);
  if (!f || *f == "" || *f == nlohmann::json::array()) return {};
  std::vector<std::string> out = f->is_string() ? std::vector<std::string>{f->get<std::string>()} : std::vector<std::string>{};
  if (!f->is_string()) {
    if (!f->is_array() || static_cast<int64_t>(f->size()) > max_items)
      throw HttpError(400, std::string("'") + name + "' must be a string or a list of at most " + std::to_string(max_items) + " strings");
    for (const nlohmann::json& e : *f) {
      if (!e.is_string() || e == "") throw HttpError(400, std::string("'") + name + "' must hold non-empty strings only");
      out.push_back(e.get<std::string>());
    }
  }
  return out;
}

void RequestBody::only(const char* name, std::initializer_list<nlohmann::json> allowed, const char* why) const {
  const nlohmann::json* f = field(name);
  if (f && std::find(allowed.begin(), allowed.end(), *f) == allowed.end())
    throw HttpError(400, std::string("'") + name + "' is not supported: " + why);
}

}  // namespace tfm::serve
