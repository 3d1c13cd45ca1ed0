#include "data/jinja_values.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data::jinja {

namespace {

// Keys no template can write (they start with U+0001), marking what Jinja holds as Python objects.
const char* const kNamespaceKey = "\x01namespace";
const char* const kFunctionKey = "\x01function";

std::u32string characters(const json& s) { return code_points(s.get_ref<const std::string&>(), "a string of the chat template"); }

std::string text_of(const json& v, const char* what) {
  if (!v.is_string()) fail(std::string(what) + " must be a string, got a " + type_name(v));
  return v.get<std::string>();
}

}  // namespace

void fail(const std::string& what) { throw Error("chat template: " + what); }

json undefined() { return json(json::value_t::discarded); }

json make_namespace(json attributes) { return json{{kNamespaceKey, std::move(attributes)}}; }
bool is_namespace(const json& v) { return v.is_object() && v.size() == 1 && v.contains(kNamespaceKey); }
json& namespace_attributes(json& ns) { return ns[kNamespaceKey]; }

json function_value(const std::string& name) { return json{{kFunctionKey, name}}; }
bool is_function(const json& v) { return v.is_object() && v.size() == 1 && v.contains(kFunctionKey); }

namespace {

// A mapping of the template's data (Python's dict), not a namespace or function held as one.
bool is_mapping(const json& v) { return v.is_object() && !is_namespace(v) && !is_function(v); }
bool is_sequence(const json& v) { return v.is_string() || v.is_array() || is_mapping(v); }

}  // namespace

json Args::at(size_t index, const char* name, const json& fallback) const {
  if (index < positional.size()) return positional[index];
  return keywords.contains(name) ? keywords[name] : fallback;
}

Args Args::from(size_t from) const {
  Args rest{.keywords = keywords};
  if (from < positional.size()) rest.positional.assign(positional.begin() + static_cast<std::ptrdiff_t>(from), positional.end());
  return rest;
}

// ---- Python's view of values ----

bool truthy(const json& v) {
  if (v.is_discarded() || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();  // lists, mappings
}

std::string type_name(const json& v) {
  if (v.is_discarded()) return "undefined";
  if (is_namespace(v)) return "namespace";
  return is_function(v) ? "function" : v.type_name();
}

namespace {

// \xNN, \uNNNN or \UNNNNNNNN, as Python's repr writes a character it does not print.
std::string escaped(char32_t c) {
  char buffer[12];
  std::snprintf(buffer, sizeof buffer, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", static_cast<unsigned>(c));
  return buffer;
}

// Python's str.isprintable() false: the categories C* and Z* but the space.
bool unprintable(char32_t c) {
  const unicode::Category category = unicode::category(c);
  return c != U' ' && (category == unicode::Category::kOther || category == unicode::Category::kSpaceSeparator || c == 0x2028 || c == 0x2029);
}

// repr(str): single quotes, or double ones where the text has a ' and no ".
std::string string_repr(const json& s) {
  const std::u32string text = characters(s);
  const char32_t quote = text.find(U'\'') != std::u32string::npos && text.find(U'"') == std::u32string::npos ? U'"' : U'\'';
  std::string out(1, static_cast<char>(quote));
  for (char32_t c : text) {
    if (c == U'\\' || c == quote) out += '\\', out += static_cast<char>(c);
    else if (c == U'\n') out += "\\n";
    else if (c == U'\r') out += "\\r";
    else if (c == U'\t') out += "\\t";
    else if (unprintable(c)) out += escaped(c);
    else append_utf8(out, c);
  }
  return out + static_cast<char>(quote);
}

// repr(value): what str() of a list or dict writes for each item.
std::string repr(const json& v) {
  if (v.is_string()) return string_repr(v);
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number()) return v.dump();
  if (v.is_discarded() || is_namespace(v) || is_function(v)) fail("printing a " + type_name(v) + " inside a list or mapping is not supported");
  std::string out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += out.empty() ? "" : ", ";
    out += v.is_array() ? repr(*it) : string_repr(it.key()) + ": " + repr(it.value());
  }
  return v.is_array() ? "[" + out + "]" : "{" + out + "}";
}

}  // namespace

std::string to_text(const json& v) {
  if (v.is_discarded()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (is_namespace(v) || is_function(v)) fail("printing a " + type_name(v) + " is not supported");
  return repr(v);
}

// Python's ==: mappings equal whatever their order.
bool equal(const json& a, const json& b) {
  if (a.is_discarded() || b.is_discarded()) return a.is_discarded() && b.is_discarded();
  if (a.is_object() && b.is_object())
    return a.size() == b.size() && std::all_of(a.items().begin(), a.items().end(), [&](const auto& entry) {
             return b.contains(entry.key()) && equal(entry.value(), b[entry.key()]);
           });
  if (a.is_array() && b.is_array()) return std::equal(a.begin(), a.end(), b.begin(), b.end(), equal);
  return a == b;
}

int64_t integer(const json& v, const char* what) {
  if (!v.is_number_integer()) fail(std::string(what) + " must be an integer, got a " + type_name(v));
  return v.get<int64_t>();
}

// Python's s[start:stop:step] of a list or string (its PySlice_AdjustIndices).
json slice(const json& v, const json& start, const json& stop, const json& step) {
  if (!v.is_array() && !v.is_string()) fail("slicing a " + type_name(v) + " is not supported");
  const std::u32string chars = v.is_string() ? characters(v) : U"";
  const int64_t n = static_cast<int64_t>(v.is_string() ? chars.size() : v.size());
  const int64_t by = step.is_null() ? 1 : integer(step, "a slice's step");
  if (by == 0) fail("a slice's step cannot be zero");
  const auto bound = [&](const json& b, int64_t fallback) {
    if (b.is_null()) return fallback;
    const int64_t i = integer(b, "a slice's bound");
    return by > 0 ? std::clamp(i < 0 ? i + n : i, int64_t{0}, n) : std::clamp(i < 0 ? i + n : i, int64_t{-1}, n - 1);
  };
  const int64_t to = bound(stop, by > 0 ? n : -1);
  std::u32string text;
  json list = json::array();
  for (int64_t i = bound(start, by > 0 ? 0 : n - 1); by > 0 ? i < to : i > to; i += by) {
    if (v.is_string()) text += chars[static_cast<size_t>(i)];
    else list.push_back(v[static_cast<size_t>(i)]);
  }
  return v.is_string() ? json(to_utf8(text)) : list;
}

// value[key]: a mapping's entry, a list's or string's item (negative from the end); Undefined where there is none.
json item(const json& v, const json& key) {
  if (v.is_discarded()) fail("an undefined value has no items");
  if (v.is_object() && key.is_string()) return v.contains(key.get<std::string>()) ? v[key.get<std::string>()] : undefined();
  if (!(v.is_array() || v.is_string()) || !key.is_number_integer()) return undefined();
  const json one = slice(v, key, key.get<int64_t>() == -1 ? json() : json(key.get<int64_t>() + 1), nullptr);
  return one.empty() ? undefined() : v.is_array() ? one[0] : one;
}

json attribute(const json& v, const std::string& name) {
  if (v.is_discarded()) fail("an undefined value has no attribute " + name);
  if (is_namespace(v)) return item(v[kNamespaceKey], name);
  return is_mapping(v) ? item(v, name) : undefined();
}

json iteration(const json& v) {
  if (v.is_discarded()) return json::array();  // Jinja iterates over Undefined as over nothing
  if (v.is_array()) return v;
  json items = json::array();
  if (v.is_string())
    for (char32_t c : characters(v)) items.push_back(to_utf8(std::u32string(1, c)));
  else if (is_mapping(v))
    for (const auto& entry : v.items()) items.push_back(entry.key());
  else
    fail("iterating over a " + type_name(v) + " is not supported");
  return items;
}

namespace {

json arithmetic(const std::string& op, const json& a, const json& b) {
  if (!a.is_number() || !b.is_number()) fail("cannot compute a " + type_name(a) + " " + op + " a " + type_name(b));
  const bool integers = a.is_number_integer() && b.is_number_integer();
  if (op == "**") {
    if (integers && b.get<int64_t>() >= 0) return static_cast<int64_t>(std::llround(std::pow(a.get<double>(), b.get<double>())));
    return std::pow(a.get<double>(), b.get<double>());
  }
  if (op == "/" || !integers) {
    const double x = a.get<double>(), y = b.get<double>();
    if (y == 0 && (op == "/" || op == "//" || op == "%")) fail("division by zero");
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/") return x / y;
    if (op == "//") return std::floor(x / y);
    return x - y * std::floor(x / y);  // %: the divisor's sign, as Python's
  }
  const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (y == 0) fail("division by zero");
  const int64_t floor = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);  // Python's //, toward -infinity
  return op == "//" ? floor : x - y * floor;
}

bool contains(const json& container, const json& x) {
  if (container.is_discarded()) return false;  // Undefined iterates as nothing
  if (container.is_string() && x.is_string()) return container.get<std::string>().find(x.get<std::string>()) != std::string::npos;
  if (container.is_array()) return std::any_of(container.begin(), container.end(), [&](const json& y) { return equal(x, y); });
  if (is_mapping(container) && x.is_string()) return container.contains(x.get<std::string>());
  fail("'in' a " + type_name(container) + " is not supported");
}

}  // namespace

json binary(const std::string& op, const json& a, const json& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "~") return to_text(a) + to_text(b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    if (!(a.is_number() && b.is_number()) && !(a.is_string() && b.is_string())) fail("cannot compare a " + type_name(a) + " with a " + type_name(b));
    return op == "<" ? a < b : op == "<=" ? a <= b : op == ">" ? a > b : a >= b;
  }
  if (op == "+" && ((a.is_string() && b.is_string()) || (a.is_array() && b.is_array()))) {
    if (a.is_string()) return a.get<std::string>() + b.get<std::string>();
    json both = a;
    both.insert(both.end(), b.begin(), b.end());
    return both;
  }
  if (op == "*" && (a.is_string() || b.is_string()) && (a.is_number_integer() || b.is_number_integer())) {
    const json& text = a.is_string() ? a : b;
    std::string repeated;
    for (int64_t k = 0; k < (a.is_string() ? b : a).get<int64_t>(); ++k) repeated += text.get_ref<const std::string&>();
    return repeated;
  }
  if (op == "%" && a.is_string()) fail("string formatting with % is not supported");
  return arithmetic(op, a, b);
}

// ---- Methods of strings and mappings ----

namespace {

// Python's str.strip(chars), lstrip, rstrip; whitespace as str.isspace without `chars`.
std::string strip(const json& s, const json& chars, bool left, bool right) {
  if (!s.is_string()) fail("strip of a " + type_name(s) + " is not supported");
  if (chars.is_null() || chars.is_discarded()) {
    std::string_view text = s.get_ref<const std::string&>();
    text = left ? lstrip_space(text) : text;
    return std::string(right ? rstrip_space(text) : text);
  }
  const std::u32string text = characters(s), set = characters(json(text_of(chars, "strip's characters")));
  const auto in_set = [&](char32_t c) { return set.find(c) != std::u32string::npos; };
  size_t begin = 0, end = text.size();
  while (left && begin < end && in_set(text[begin])) ++begin;
  while (right && end > begin && in_set(text[end - 1])) --end;
  return to_utf8(text.substr(begin, end - begin));
}

// Python's str.split(sep, maxsplit) at `sep`.
json split_at(const std::string& text, const std::string& sep, int64_t maxsplit) {
  if (sep.empty()) fail("split with an empty separator");
  json parts = json::array();
  size_t start = 0;
  for (size_t at = text.find(sep); at != std::string::npos && (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit); at = text.find(sep, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + sep.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

// Python's str.split(None, maxsplit): at runs of whitespace; the rest, once maxsplit is reached, as one part.
json split_at_spaces(const std::u32string& text, int64_t maxsplit) {
  json parts = json::array();
  size_t i = 0;
  const auto skip_spaces = [&] {
    while (i < text.size() && unicode::is_python_space(text[i])) ++i;
  };
  for (skip_spaces(); i < text.size(); skip_spaces()) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(to_utf8(text.substr(i)));
      break;
    }
    const size_t start = i;
    while (i < text.size() && !unicode::is_python_space(text[i])) ++i;
    parts.push_back(to_utf8(text.substr(start, i - start)));
  }
  return parts;
}

json split(const json& s, const Args& a) {
  if (!s.is_string()) fail("split of a " + type_name(s) + " is not supported");
  const json separator = a.at(0, "sep", nullptr);
  const int64_t maxsplit = integer(a.at(1, "maxsplit", -1), "split's maxsplit");
  if (separator.is_null()) return split_at_spaces(characters(s), maxsplit);
  return split_at(s.get<std::string>(), text_of(separator, "split's separator"), maxsplit);
}

std::string replace(const std::string& text, const json& old_text, const json& new_text, int64_t count) {
  const std::string from = text_of(old_text, "replace's old text"), to = text_of(new_text, "replace's new text");
  if (from.empty()) fail("replace of an empty text is not supported");
  std::string out;
  size_t start = 0;
  for (size_t at = text.find(from); at != std::string::npos && count != 0; at = text.find(from, start), --count) {
    out += text.substr(start, at - start) + to;
    start = at + from.size();
  }
  return out + text.substr(start);
}

std::string upper(const json& s) {
  std::string text = text_of(s, "upper's value");
  if (!std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    fail("upper of a text beyond ASCII is not supported");
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string lower(const json& s) { return to_utf8(unicode::lower(characters(json(text_of(s, "lower's value"))))); }

// str.startswith / endswith, of a string or a tuple of them.
bool affix(const std::string& text, const json& affixes, bool prefix) {
  if (affixes.is_array()) return std::any_of(affixes.begin(), affixes.end(), [&](const json& a) { return affix(text, a, prefix); });
  const std::string a = text_of(affixes, prefix ? "startswith's prefix" : "endswith's suffix");
  return prefix ? text.starts_with(a) : text.ends_with(a);
}

json items_of(const json& mapping) {
  json pairs = json::array();
  for (const auto& entry : mapping.items()) pairs.push_back(json::array({entry.key(), entry.value()}));
  return pairs;
}

json mapping_method(const std::string& name, const json& self, const Args& a) {
  if (name == "get") {
    const json found = item(self, a.at(0, "key", undefined()));
    return found.is_discarded() ? a.at(1, "default", nullptr) : found;
  }
  if (name == "items") return items_of(self);
  json out = json::array();
  if (name == "keys") return iteration(self);
  if (name != "values") fail("the method " + name + " of a mapping is not supported");
  for (const auto& entry : self.items()) out.push_back(entry.value());
  return out;
}

}  // namespace

json method(const std::string& name, const json& self, const Args& a) {
  if (is_mapping(self)) return mapping_method(name, self, a);
  if (!self.is_string()) fail("the method " + name + " of a " + type_name(self) + " is not supported");
  const std::string& text = self.get_ref<const std::string&>();
  if (name == "strip" || name == "lstrip" || name == "rstrip") return strip(self, a.at(0, "chars", nullptr), name != "rstrip", name != "lstrip");
  if (name == "lower") return lower(self);
  if (name == "upper") return upper(self);
  if (name == "startswith" || name == "endswith") return affix(text, a.at(0, "prefix", undefined()), name == "startswith");
  if (name == "split") return split(self, a);
  if (name == "replace") return replace(text, a.at(0, "old", undefined()), a.at(1, "new", undefined()), integer(a.at(2, "count", -1), "replace's count"));
  fail("the method " + name + " of a string is not supported");
}

// ---- tojson, as transformers defines it: json.dumps(value, ensure_ascii, indent, separators, sort_keys) ----

namespace {

struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent{};  // None: one line
  std::string item_separator{}, key_separator = ": ";
  bool sort_keys = false;
};

JsonStyle json_style(const Args& a) {
  JsonStyle style{.ensure_ascii = truthy(a.at(0, "ensure_ascii", false)), .sort_keys = truthy(a.at(3, "sort_keys", false))};
  const json indent = a.at(1, "indent", nullptr), separators = a.at(2, "separators", nullptr);
  if (indent.is_number_integer()) style.indent = std::string(static_cast<size_t>(std::max<int64_t>(indent.get<int64_t>(), 0)), ' ');
  else if (indent.is_string()) style.indent = indent.get<std::string>();
  else if (!indent.is_null()) fail("tojson's indent must be a number or a string");
  style.item_separator = style.indent ? "," : ", ";  // json.dumps's defaults
  if (separators.is_array() && separators.size() == 2 && separators[0].is_string() && separators[1].is_string())
    style.item_separator = separators[0].get<std::string>(), style.key_separator = separators[1].get<std::string>();
  else if (!separators.is_null()) fail("tojson's separators must be two strings");
  return style;
}

void dump(const json& v, const JsonStyle& style, const std::string& margin, std::string& out) {
  if (v.is_discarded()) fail("tojson of an undefined value is not supported");
  if (is_namespace(v) || is_function(v)) fail("tojson of a " + type_name(v) + " is not supported");
  if (!v.is_structured() || v.empty()) {
    out += v.is_array() ? "[]" : v.is_object() ? "{}" : v.dump(-1, ' ', style.ensure_ascii);
    return;
  }
  std::vector<std::pair<std::string, const json*>> entries;  // a list's items have no key
  for (auto it = v.begin(); it != v.end(); ++it) entries.emplace_back(v.is_object() ? it.key() : "", &*it);
  if (v.is_object() && style.sort_keys) std::stable_sort(entries.begin(), entries.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  const std::string inner = style.indent ? margin + *style.indent : margin;
  out += v.is_array() ? '[' : '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    out += i ? style.item_separator : "";
    out += style.indent ? "\n" + inner : "";
    if (v.is_object()) out += json(entries[i].first).dump(-1, ' ', style.ensure_ascii) + style.key_separator;
    dump(*entries[i].second, style, inner, out);
  }
  out += style.indent ? "\n" + margin : "";
  out += v.is_array() ? ']' : '}';
}

std::string tojson(const json& v, const Args& a) {
  std::string out;
  dump(v, json_style(a), "", out);
  return out;
}

// ---- Filters over lists ----

// item.a.b, as Jinja's attribute arguments (selectattr, map) name it: dotted, a number an index.
json attribute_path(json v, const json& path) {
  const std::string text = text_of(path, "an attribute's name");
  for (const json& part : split_at(text, ".", -1)) {
    const std::string& name = part.get_ref<const std::string&>();
    const bool index = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    v = index ? item(v, std::stoll(name)) : attribute(v, name);
  }
  return v;
}

// select/reject(test, *args) and selectattr/rejectattr(attribute, test, *args): the items whose test (of
// their attribute) is `keep`; without a test, whose value's truth is.
json select(const json& v, const Args& a, bool by_attribute, bool keep) {
  const size_t test_at = by_attribute ? 1 : 0;
  json kept = json::array();
  for (const json& x : iteration(v)) {
    const json subject = by_attribute ? attribute_path(x, a.at(0, "attribute", undefined())) : x;
    const bool passed = a.positional.size() > test_at ? test(text_of(a.positional[test_at], "a test's name"), subject, a.from(test_at + 1)) : truthy(subject);
    if (passed == keep) kept.push_back(x);
  }
  return kept;
}

// map(attribute=..., default=...) or map(filter, *args).
json map(const json& v, const Args& a) {
  json mapped = json::array();
  const bool by_attribute = a.keywords.contains("attribute");
  if (!by_attribute && a.positional.empty()) fail("map takes a filter's name or attribute=");
  const json fallback = a.keywords.value("default", undefined());
  for (const json& x : iteration(v)) {
    const json y = by_attribute ? attribute_path(x, a.keywords["attribute"]) : filter(text_of(a.positional[0], "a filter's name"), x, a.from(1));
    mapped.push_back(y.is_discarded() && !fallback.is_discarded() ? fallback : y);
  }
  return mapped;
}

json reverse(const json& v) {
  if (v.is_string()) {
    std::u32string text = characters(v);
    std::reverse(text.begin(), text.end());
    return to_utf8(text);
  }
  json items = iteration(v);
  std::reverse(items.begin(), items.end());
  return items;
}

json length(const json& v) {
  if (v.is_discarded()) return 0;
  if (v.is_string()) return characters(v).size();
  if (!v.is_array() && !is_mapping(v)) fail("length of a " + type_name(v) + " is not supported");
  return v.size();
}

json first_or_last(const json& v, bool first) {
  const json items = iteration(v);
  return items.empty() ? undefined() : first ? items.front() : items.back();
}

json join(const json& v, const json& separator) {
  std::string joined;
  const json items = iteration(v);
  for (size_t i = 0; i < items.size(); ++i) joined += (i ? to_text(separator) : "") + to_text(items[i]);
  return joined;
}

json items(const json& v) {
  if (v.is_discarded()) return json::array();
  if (!is_mapping(v)) fail("items of a " + type_name(v) + " is not supported");
  return items_of(v);
}

// default(default_value='', boolean=False): the value, or the default where it is undefined (or false, with boolean).
json default_value(const json& v, const Args& a) {
  return v.is_discarded() || (truthy(a.at(1, "boolean", false)) && !truthy(v)) ? a.at(0, "default_value", "") : v;
}

using Filter = json (*)(const json& v, const Args& a);

const std::map<std::string, Filter, std::less<>> kFilters = {
    {"default", default_value},
    {"d", default_value},
    {"first", [](const json& v, const Args&) { return first_or_last(v, true); }},
    {"last", [](const json& v, const Args&) { return first_or_last(v, false); }},
    {"items", [](const json& v, const Args&) { return items(v); }},
    {"join", [](const json& v, const Args& a) { return join(v, a.at(0, "d", "")); }},
    {"length", [](const json& v, const Args&) { return length(v); }},
    {"count", [](const json& v, const Args&) { return length(v); }},
    {"list", [](const json& v, const Args&) { return iteration(v); }},
    {"lower", [](const json& v, const Args&) { return json(lower(json(to_text(v)))); }},
    {"upper", [](const json& v, const Args&) { return json(upper(json(to_text(v)))); }},
    {"map", [](const json& v, const Args& a) { return map(v, a); }},
    {"replace", [](const json& v, const Args& a) {
       return json(replace(to_text(v), json(to_text(a.at(0, "old", undefined()))), json(to_text(a.at(1, "new", undefined()))), integer(a.at(2, "count", -1), "replace's count")));
     }},
    {"reverse", [](const json& v, const Args&) { return reverse(v); }},
    {"select", [](const json& v, const Args& a) { return select(v, a, false, true); }},
    {"reject", [](const json& v, const Args& a) { return select(v, a, false, false); }},
    {"selectattr", [](const json& v, const Args& a) { return select(v, a, true, true); }},
    {"rejectattr", [](const json& v, const Args& a) { return select(v, a, true, false); }},
    {"string", [](const json& v, const Args&) { return json(to_text(v)); }},
    {"tojson", [](const json& v, const Args& a) { return json(tojson(v, a)); }},
    {"trim", [](const json& v, const Args& a) { return json(strip(json(to_text(v)), a.at(0, "chars", nullptr), true, true)); }},
};

// ---- Tests ----

bool parity(const json& v, int64_t remainder) { return ((integer(v, "odd's or even's value") % 2) + 2) % 2 == remainder; }

using Test = bool (*)(const json& v, const Args& a);

// Jinja's comparison tests, by each of their names, as the operator they apply.
const std::map<std::string, std::string, std::less<>> kComparisons = {
    {"==", "=="}, {"eq", "=="}, {"equalto", "=="}, {"!=", "!="}, {"ne", "!="}, {"<", "<"}, {"lt", "<"}, {"lessthan", "<"}, {"<=", "<="}, {"le", "<="},
    {">", ">"}, {"gt", ">"}, {"greaterthan", ">"}, {">=", ">="}, {"ge", ">="}, {"in", "in"}};

const std::map<std::string, Test, std::less<>> kTests = {
    {"defined", [](const json& v, const Args&) { return !v.is_discarded(); }},
    {"undefined", [](const json& v, const Args&) { return v.is_discarded(); }},
    {"none", [](const json& v, const Args&) { return v.is_null(); }},
    {"boolean", [](const json& v, const Args&) { return v.is_boolean(); }},
    {"true", [](const json& v, const Args&) { return v.is_boolean() && v.get<bool>(); }},
    {"false", [](const json& v, const Args&) { return v.is_boolean() && !v.get<bool>(); }},
    {"integer", [](const json& v, const Args&) { return v.is_number_integer(); }},
    {"float", [](const json& v, const Args&) { return v.is_number_float(); }},
    {"number", [](const json& v, const Args&) { return v.is_number() || v.is_boolean(); }},  // Python's bool is a number
    {"string", [](const json& v, const Args&) { return v.is_string(); }},
    {"mapping", [](const json& v, const Args&) { return is_mapping(v); }},
    {"sequence", [](const json& v, const Args&) { return is_sequence(v); }},
    {"iterable", [](const json& v, const Args&) { return is_sequence(v); }},
    {"callable", [](const json& v, const Args&) { return is_function(v); }},
    {"odd", [](const json& v, const Args&) { return parity(v, 1); }},
    {"even", [](const json& v, const Args&) { return parity(v, 0); }},
    {"divisibleby", [](const json& v, const Args& a) { return integer(v, "divisibleby's value") % integer(a.at(0, "num", undefined()), "divisibleby's number") == 0; }},
};

}  // namespace

json filter(const std::string& name, const json& v, const Args& args) {
  const auto found = kFilters.find(name);
  if (found == kFilters.end()) fail("the filter " + name + " is not supported");
  return found->second(v, args);
}

bool test(const std::string& name, const json& v, const Args& args) {
  if (const auto comparison = kComparisons.find(name); comparison != kComparisons.end())
    return truthy(binary(comparison->second, v, args.at(0, "other", undefined())));
  const auto found = kTests.find(name);
  if (found == kTests.end()) fail("the test " + name + " is not supported");
  return found->second(v, args);
}

}  // namespace tfm::data::jinja
