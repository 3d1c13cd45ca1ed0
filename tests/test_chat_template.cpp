// Chat templates (data/chat_template): the templates that Llama 2, Mistral, Llama 3 and
// Qwen2 ship, applied to conversations, against transformers' apply_chat_template
// (tests/reference/make_hf_bpe_tokenizers.py wrote them); the templates of today's Llama,
// Mistral and Qwen2 checkpoints, with and without tools, and the Jinja they are written in,
// template by template, against jinja2 as today's transformers runs it
// (tests/reference/make_chat_templates.py); and the constructs tfm does not interpret,
// refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/chat_template.h"
#include "data/hf_tokenizer.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tensor/error.h"

namespace tfm::data {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using tfm::testing::error_of;

json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }
// Mappings in the order they were written, as Python's dicts keep them (tojson, items()).
ordered_json read_ordered(const std::string& path) { return ordered_json::parse(std::ifstream(path)); }
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

// The "now" of the references: strftime_now's date.
std::tm reference_now() {
  std::tm now{};
  now.tm_year = 2025 - 1900, now.tm_mon = 2, now.tm_mday = 4, now.tm_hour = 5, now.tm_min = 6, now.tm_sec = 7;
  return now;
}

TEST(ChatTemplate, RendersJinjaAsJinja2) {
  const ordered_json cases = read_ordered(fixture("jinja_cases.json"));
  ASSERT_GT(cases.size(), 45u);
  for (const ordered_json& c : cases)
    EXPECT_EQ(ChatTemplate(c["template"].get<std::string>()).render(c["variables"], reference_now()), c["text"].get<std::string>()) << c["template"];
}

// The template of each popular checkpoint, quoted exactly, applied as apply_chat_template applies it
// (tools, Llama 3.1's date_string, custom_tools, builtin_tools, ... as keyword arguments): the same
// text, the same raise_exception message, or (where jinja2 fails otherwise: a string + None) a failure.
TEST(ChatTemplate, RendersTodaysCheckpointsTemplatesAsTransformers) {
  const ordered_json fixtures = read_ordered(fixture("chat_templates.json"));
  ASSERT_EQ(fixtures["now"], "2025-03-04T05:06:07");
  ASSERT_EQ(fixtures["templates"].size(), 8u);
  for (const ordered_json& t : fixtures["templates"]) {
    json settings = t["special_tokens"];
    settings["chat_template"] = t["template"];
    const TokenizerConfig config = TokenizerConfig::from_json(settings, t["name"].get<std::string>());
    ASSERT_GE(t["cases"].size(), 18u);
    for (const ordered_json& c : t["cases"]) {
      const auto apply = [&] { return apply_chat_template(config, c["messages"], c["add_generation_prompt"].get<bool>(), c["kwargs"], reference_now()); };
      if (c.contains("text")) EXPECT_EQ(apply(), c["text"].get<std::string>()) << t["name"] << " " << c.dump();
      else if (c.contains("error")) EXPECT_EQ(error_of(apply), "chat template: " + c["error"].get<std::string>()) << t["name"] << " " << c.dump();
      else EXPECT_THROW(apply(), Error) << t["name"] << " " << c.dump();
    }
  }
}

TEST(ChatTemplate, RefusesSyntaxItDoesNotInterpretByNameWhenRead) {
  const std::pair<const char*, const char*> cases[] = {
      {"{% macro m() %}{% endmacro %}", "{% macro %} is not supported"},
      {"{% include 'x' %}", "{% include %} is not supported"},
      {"{% set x %}a{% endset %}", "{% set %} blocks ({% endset %}) are not supported"},
      {"{% set a, b = 1, 2 %}", "{% set %} with several targets is not supported"},
      {"{% for x in xs recursive %}{% endfor %}", "{% for ... recursive %} is not supported"},
      {"{{ f(x=1, 2) }}", "a positional argument after a keyword argument"},
      {"{% if x %}", "{% endif %} is missing"},
      {"{% endfor %}", "{% endfor %} has no statement it ends"},
      {"{{ 'a }}", "a tag is not closed"},
      {"{{ a b }}", "unexpected 'b'"},
      {"{{ x(1) (2) }}", "calling a value is not supported"},
      {"{{ '\\d' }}", "the escape \\d in a string is not supported"},
  };
  for (const auto& [source, message] : cases) {
    const std::string text = source;  // (clang before 16 cannot capture a structured binding)
    EXPECT_EQ(error_of([&] { ChatTemplate{text}; }), std::string("chat template: ") + message) << source;
  }
}

// As jinja2, which fails only when it runs them: a branch never taken costs nothing.
TEST(ChatTemplate, RefusesNamesItDoesNotInterpretWhenReached) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ x | wordcount }}", "the filter wordcount is not supported"},
      {"{{ x is sameas(1) }}", "the test sameas is not supported"},
      {"{{ 'a'.title() }}", "the method title of a string is not supported"},
      {"{{ d.pop('k') }}", "the method pop of a mapping is not supported"},
      {"{{ f(x=1) }}", "the function f is not supported"},
      {"{% set d.a = 1 %}", "{% set d.a %} needs d to be a namespace()"},
      {"{{ 'é' | upper }}", "upper of a text beyond ASCII is not supported"},
  };
  for (const auto& [source, message] : cases) {
    const std::string text = source;
    const ChatTemplate chat_template(text);
    EXPECT_EQ(error_of([&] { chat_template.render({{"x", 1}, {"d", {{"k", 1}}}}); }), std::string("chat template: ") + message) << source;
    EXPECT_EQ(ChatTemplate("{% if false %}" + text + "{% endif %}ok").render(json::object()), "ok") << source;
  }
}

TEST(ChatTemplate, ErrorsOfEvaluationAreOneLine) {
  EXPECT_EQ(error_of([] { ChatTemplate("{{ raise_exception('no system') }}").render(json::object()); }), "chat template: no system");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ 'a' + 1 }}").render(json::object()); }), "chat template: cannot compute a string + a number");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ x.y }}").render(json::object()); }), "chat template: an undefined value has no attribute y");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ namespace() }}").render(json::object()); }), "chat template: printing a namespace is not supported");
  EXPECT_EQ(error_of([] { ChatTemplate("{{ x | tojson }}").render(json::object()); }), "chat template: tojson of an undefined value is not supported");
}

// datetime.now() where the caller fixes no "now": today's date, as the C library writes it.
TEST(ChatTemplate, StrftimeNowIsTheLocalTimeUnlessFixed) {
  const std::time_t seconds = std::time(nullptr);
  std::tm local{};
  localtime_r(&seconds, &local);
  char year[8];
  std::strftime(year, sizeof year, "%Y", &local);
  EXPECT_EQ(ChatTemplate("{{ strftime_now('%Y') }}").render(json::object()), year);
  EXPECT_EQ(ChatTemplate("{{ strftime_now('%d %b %Y, %A') }}").render(json::object(), reference_now()), "04 Mar 2025, Tuesday");
}

// tools and documents are none unless given, as transformers passes them; keyword arguments come last.
TEST(ChatTemplate, KeywordArgumentsOfApplyChatTemplate) {
  const TokenizerConfig config = TokenizerConfig::from_json(
      {{"chat_template", "{{ tools is none }},{{ documents is none }},{{ bos_token }},{{ date_string }}"}, {"bos_token", "<s>"}}, "config");
  const ordered_json messages = ordered_json::array();
  EXPECT_EQ(apply_chat_template(config, messages, false), "True,True,<s>,");
  EXPECT_EQ(apply_chat_template(config, messages, false, {{"tools", {1}}, {"bos_token", "B"}, {"date_string", "d"}}), "False,True,B,d");
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
