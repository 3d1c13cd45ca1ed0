// Chat templates (data/chat_template): the templates that Llama 2, Mistral, Llama 3 and
// Qwen2 ship, applied to conversations, against transformers' apply_chat_template; the
// Jinja they are written in, template by template, against jinja2 as transformers runs
// it (tests/reference/make_hf_bpe_tokenizers.py wrote both); and the constructs tfm does
// not interpret, refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/chat_template.h"
#include "data/hf_tokenizer.h"
#include "support/fixture.h"
#include "support/process.h"

namespace tfm::data {
namespace {

using nlohmann::json;
using tfm::testing::error_of;

json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }
std::string fixture(const std::string& name) { return tfm::testing::fixture_path("hf/" + name); }

class ChatTemplateOfModel : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatTemplateOfModel, GivesTransformersText) {
  const std::string dir = fixture(GetParam());
  const TokenizerConfig config = TokenizerConfig::read(dir + "/tokenizer_config.json");
  const json cases = read_json(dir + "/reference.json")["chat_cases"];
  ASSERT_EQ(cases.size(), 8u);
  for (const json& c : cases) {
    const auto apply = [&] { return apply_chat_template(config, c["messages"], c["add_generation_prompt"].get<bool>()); };
    if (c.contains("error")) EXPECT_EQ(error_of(apply), "chat template: " + c["error"].get<std::string>()) << c.dump();
    else EXPECT_EQ(apply(), c["text"].get<std::string>()) << c.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTemplateOfModel, ::testing::Values("llama2_json", "mistral_json", "llama3_json", "qwen2_json"),
                         [](const auto& info) { return std::string(info.param); });

TEST(ChatTemplate, RendersJinjaAsJinja2) {
  const json cases = read_json(fixture("jinja_cases.json"));
  ASSERT_GT(cases.size(), 30u);
  for (const json& c : cases) EXPECT_EQ(ChatTemplate(c["template"].get<std::string>()).render(c["variables"]), c["text"].get<std::string>()) << c["template"];
}

TEST(ChatTemplate, RefusesWhatItDoesNotInterpretByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"{% macro m() %}{% endmacro %}", "{% macro %} is not supported"},
      {"{% include 'x' %}", "{% include %} is not supported"},
      {"{% set ns = namespace(a=1) %}", "the function namespace is not supported"},
      {"{% set ns.a = 1 %}", "{% set ns.attribute %} (namespace()) is not supported"},
      {"{{ x | tojson }}", "the filter tojson is not supported"},
      {"{{ x is divisibleby(3) }}", "the test divisibleby is not supported"},
      {"{{ x.items() }}", "the method items is not supported"},
      {"{% for x in xs if x %}{% endfor %}", "{% for ... if %} is not supported"},
      {"{% for x in xs %}{% else %}{% endfor %}", "{% for %} with {% else %} is not supported"},
      {"{{ {'a': 1} }}", "mapping literals are not supported"},
      {"{{ xs[::2] }}", "slices with a step are not supported"},
      {"{{ f(x=1) }}", "the function f is not supported"},
      {"{{ range(stop=1) }}", "keyword arguments (stop=) are not supported"},
      {"{% if x %}", "{% endif %} is missing"},
      {"{% endfor %}", "{% endfor %} has no statement it ends"},
      {"{{ 'a }}", "a tag is not closed"},
      {"{{ 2 ** 3 }}", "unexpected '**'"},
      {"{{ '\\d' }}", "the escape \\d in a string is not supported"},
  };
  for (const auto& [source, message] : cases) {
    const std::string text = source;  // (clang before 16 cannot capture a structured binding)
    EXPECT_EQ(error_of([&] { ChatTemplate{text}; }), std::string("chat template: ") + message) << source;
  }
}

TEST(ChatTemplate, ErrorsOfEvaluationAreOneLine) {
  EXPECT_EQ(error_of([] { ChatTemplate("{{ raise_exception('no system') }}").render(json::object()); }), "chat template: no system");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ 'a' + 1 }}").render(json::object()); }), "chat template: cannot compute a string + a number");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ x.y }}").render(json::object()); }), "chat template: an undefined value has no attribute y");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ xs }}").render({{"xs", {1}}}); }), "chat template: printing array values is not supported");
}

TEST(ChatTemplate, ConfigurationWithoutATemplateOrWithNamedOnes) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  const TokenizerConfig none = TokenizerConfig::from_json(json::object(), "config");
  EXPECT_EQ(error_of([&] { apply_chat_template(none, messages, false); }),
            "config: no chat_template (a string, or a list of named templates with one named \"default\")");
  const TokenizerConfig named = TokenizerConfig::from_json(
      {{"chat_template", {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "{{ bos_token }}{{ messages[0].content }}"}}}},
       {"bos_token", {{"content", "<s>"}, {"special", true}}}},
      "config");
  EXPECT_EQ(apply_chat_template(named, messages, false), "<s>hi");
}

}  // namespace
}  // namespace tfm::data
