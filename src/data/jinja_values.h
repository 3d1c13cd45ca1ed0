#pragma once
// The values of a chat template (data/chat_template) as Jinja, run from Python by transformers, treats
// them: Python's truthiness, equality, str() and arithmetic; Undefined; namespace() objects; and the
// filters, tests and methods that tfm interprets, each as jinja2 (or, for tojson, transformers) defines
// it. A name tfm does not interpret is refused by name when a template reaches it, as jinja2 fails only then.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tfm::data::jinja {

// Ordered, as Python's dicts are: tojson and items() keep the order a mapping was written in.
using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& what);

// Jinja's Undefined (a missing variable, key or item): false, printed as nothing, equal only to itself.
json undefined();

// namespace(...): a mapping whose attributes {% set ns.attribute = ... %} may change, told apart from
// the template's mappings by a key no template can write.
json make_namespace(json attributes);
bool is_namespace(const json& v);
json& namespace_attributes(json& ns);

// A global function (range, namespace, ...) as a value: defined, callable, not printable.
json function_value(const std::string& name);
bool is_function(const json& v);

// A call's arguments: Python binds each parameter to its position or its name.
struct Args {
  std::vector<json> positional{};
  json keywords = json::object();
  // The parameter at `index`, or named `name`; `fallback` where neither is given.
  json at(size_t index, const char* name, const json& fallback) const;
  // The arguments from `from` on, as another call's.
  Args from(size_t from) const;
};

bool truthy(const json& v);
std::string type_name(const json& v);
std::string to_text(const json& v);  // str(value), as {{ }} prints it
bool equal(const json& a, const json& b);
int64_t integer(const json& v, const char* what);

json slice(const json& v, const json& start, const json& stop, const json& step);
json item(const json& v, const json& key);         // value[key]
json attribute(const json& v, const std::string& name);  // value.name
json iteration(const json& v);                     // the items a for loop or a filter goes through
json binary(const std::string& op, const json& a, const json& b);

json method(const std::string& name, const json& self, const Args& args);
json filter(const std::string& name, const json& v, const Args& args);
bool test(const std::string& name, const json& v, const Args& args);

}  // namespace tfm::data::jinja
