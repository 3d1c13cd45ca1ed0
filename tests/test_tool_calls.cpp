// Tools in chat models (data/tool_calls, tfm::Generator): which format each shipped
// template teaches, replies of each format read back as calls (malformed ones left as
// text), the place a streamed call may begin; and a conversation with tools, calls and
// tool turns given to Qwen2.5's template as transformers' apply_chat_template(tools=...)
// gives it (tests/reference/make_hf_chat_fixtures.py: qwen25_tools_tiny).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <vector>
#include <nlohmann/json.hpp>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "data/tool_calls.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tfm/generator.h"

namespace tfm::data {
namespace {

using nlohmann::ordered_json;

ordered_json read_ordered(const std::string& path) { return ordered_json::parse(std::ifstream(path)); }

// name(arguments) per call, then "| content".
std::string calls_of(ToolCallFormat format, const std::string& reply) {
  const ParsedReply parsed = parse_tool_calls(format, reply);
  std::string out;
  for (const ToolCallText& call : parsed.calls) out += call.name + "(" + call.arguments + ") ";
  return out + "| " + parsed.content;
}

TEST(ToolCalls, EachShippedTemplateTeachesItsFormat) {
  const ordered_json fixtures = read_ordered(testing::fixture_path("hf/chat_templates.json"));
  std::map<std::string, ToolCallFormat> found;
  for (const ordered_json& t : fixtures["templates"]) found[t["name"]] = tool_call_format(t["template"].get<std::string>());
  const std::map<std::string, ToolCallFormat> expected = {
      {"Qwen2.5-7B-Instruct", ToolCallFormat::kHermes},         {"Qwen3-8B", ToolCallFormat::kHermes},
      {"Llama-3.1-8B-Instruct", ToolCallFormat::kLlama},        {"Llama-3.2-3B-Instruct", ToolCallFormat::kLlama},
      {"Mistral-7B-Instruct-v0.3", ToolCallFormat::kMistral},   {"Mistral-Nemo-Instruct-2407", ToolCallFormat::kMistral},
      {"TinyLlama-1.1B-Chat-v1.0", ToolCallFormat::kNone},      {"DeepSeek-R1-Distill-Llama-8B", ToolCallFormat::kNone}};
  EXPECT_EQ(found, expected);
}

TEST(ToolCalls, HermesBlocksAfterTheContent) {
  const ToolCallFormat f = ToolCallFormat::kHermes;
  EXPECT_EQ(calls_of(f, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"), "get_time({}) | ");
  EXPECT_EQ(calls_of(f, "Let me look.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"São Paulo\", \"a\": [1, 2]}}\n</tool_call>\n"
                        "<tool_call>\n{\"name\": \"t\", \"arguments\": {}}\n</tool_call>"),
            "w({\"city\":\"São Paulo\",\"a\":[1,2]}) t({}) | Let me look.\n");
  // The end token may come before the last closing tag; arguments written as a text stay as they are.
  EXPECT_EQ(calls_of(f, "<tool_call>\n{\"name\": \"t\", \"arguments\": \"{\\\"x\\\": 1}\"}"), "t({\"x\": 1}) | ");
  EXPECT_EQ(calls_of(f, "<tool_call>{\"name\": \"t\"}</tool_call>"), "t({}) | ");
  // What does not parse as a whole stays text.
  for (const char* text : {"Hello there.", "<tool_call>\n{\"name\": \"t\", \"arguments\": {}\n</tool_call>",
                           "<tool_call>\n{\"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"name\": 3}\n</tool_call>",
                           "<tool_call>\n{\"name\": \"t\", \"arguments\": [1]}\n</tool_call>",
                           "<tool_call>\n{\"name\": \"t\"}\n</tool_call> and more text", "<tool_call>\n</tool_call>", "<tool_call>"})
    EXPECT_EQ(calls_of(f, text), std::string("| ") + text) << text;
}

TEST(ToolCalls, LlamaJsonReply) {
  const ToolCallFormat f = ToolCallFormat::kLlama;
  EXPECT_EQ(calls_of(f, "{\"name\": \"get_current_weather\", \"parameters\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}"),
            "get_current_weather({\"location\":\"Paris\",\"unit\":\"celsius\"}) | ");
  EXPECT_EQ(calls_of(f, "\n {\"name\": \"t\", \"arguments\": {}} "), "t({}) | ");
  EXPECT_EQ(calls_of(f, "<|python_tag|>{\"name\": \"t\", \"parameters\": {\"q\": 1}}"), "t({\"q\":1}) | ");
  for (const char* text : {"The weather is fine.", "{\"name\": \"t\", \"parameters\": {}} Done.", "{\"parameters\": {}}",
                           "{\"name\": \"t\", \"parameters\": 3}", "{\"name\": \"t\", \"parameters\": {", "[{\"name\": \"t\"}]"})
    EXPECT_EQ(calls_of(f, text), std::string("| ") + text) << text;
}

TEST(ToolCalls, MistralList) {
  const ToolCallFormat f = ToolCallFormat::kMistral;
  EXPECT_EQ(calls_of(f, "[TOOL_CALLS] [{\"name\": \"w\", \"arguments\": {\"location\": \"Paris\"}}, {\"name\": \"t\", \"arguments\": {}}]"),
            "w({\"location\":\"Paris\"}) t({}) | ");
  // Where decoding dropped [TOOL_CALLS] as a special token: the list alone.
  EXPECT_EQ(calls_of(f, " [{\"name\": \"t\", \"arguments\": {}}]"), "t({}) | ");
  for (const char* text : {"Sure.", "[TOOL_CALLS] [{\"name\": \"t\", \"arguments\": {}}", "[TOOL_CALLS] []", "[1, 2]",
                           "[TOOL_CALLS] [{\"name\": \"t\"}, {\"arguments\": {}}]", "[TOOL_CALLS] {\"name\": \"t\"}"})
    EXPECT_EQ(calls_of(f, text), std::string("| ") + text) << text;
  EXPECT_EQ(calls_of(ToolCallFormat::kNone, "<tool_call>\n{\"name\": \"t\"}\n</tool_call>"), "| <tool_call>\n{\"name\": \"t\"}\n</tool_call>");
}

// A streamed reply holds back what may be a call: from the first opening tag (or its
// beginning at the end) in Hermes' format, the whole reply while it may be JSON in Llama's
// and Mistral's; and never more than it held before.
TEST(ToolCalls, WhereACallMayBegin) {
  EXPECT_EQ(tool_call_start(ToolCallFormat::kHermes, "Let me look."), 12u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kHermes, "Let me look.\n<tool"), 13u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kHermes, "Let me look.\n<tool_call>\n{\"na"), 13u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kHermes, "a <toolbox"), 10u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kHermes, "a <"), 2u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kLlama, " \n"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kLlama, " {\"name"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kLlama, "The {"), 5u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kLlama, "<|python"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kMistral, "[TOOL_"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kMistral, "[{\"name"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kMistral, "Sure [TOOL_CALLS]"), 17u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::kNone, "<tool_call>"), 11u);
}

// What streaming relies on, for every reply and format: the place a call may begin never
// moves back as the reply grows, and where the whole reply holds calls, what went out before
// that place is a part of its content (none of a call was sent as text).
TEST(ToolCalls, AStreamNeverSendsPartOfACall) {
  const std::vector<std::string> replies = {
      "Let me look.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"t\"}\n</tool_call>",
      "<tool_call>\n{\"name\": \"t\", \"arguments\": {}}", "a <toolbox> <tool_call>{\"name\": \"t\"}</tool_call>",
      " {\"name\": \"t\", \"parameters\": {\"q\": \"<tool_call>\"}}", "<|python_tag|>{\"name\": \"t\", \"parameters\": {}}",
      "\n[TOOL_CALLS] [{\"name\": \"t\", \"arguments\": {}}]", "[{\"name\": \"t\", \"arguments\": {\"x\": [1, 2]}}]",
      "Sure: {\"name\": \"t\"}", "[TOOL_CALLS] [{\"name\": \"t\"", "   ", ""};
  for (const ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama, ToolCallFormat::kMistral, ToolCallFormat::kNone})
    for (const std::string& reply : replies) {
      size_t held = 0;
      for (size_t n = 0; n <= reply.size(); ++n) {
        const size_t start = tool_call_start(f, reply.substr(0, n));
        EXPECT_GE(start, held) << reply.substr(0, n);
        EXPECT_LE(start, n);
        held = start;
      }
      const ParsedReply parsed = parse_tool_calls(f, reply);
      EXPECT_EQ(reply.compare(0, parsed.content.size(), parsed.content), 0) << reply;
      if (!parsed.calls.empty()) EXPECT_LE(held, parsed.content.size()) << reply;
      else EXPECT_EQ(parsed.content, reply);
    }
}

// The conversation as OpenAI's messages (calls' arguments as JSON text), as tfm takes it.
Chat chat_of(const ordered_json& messages) {
  Chat chat;
  for (const ordered_json& m : messages) {
    ChatMessage message{m["role"].get<std::string>(), m["content"].get<std::string>(), {}, m.value("tool_call_id", ""), m.value("name", "")};
    for (const ordered_json& call : m.value("tool_calls", ordered_json::array()))
      message.tool_calls.push_back({call["id"].get<std::string>(), call["function"]["name"].get<std::string>(), call["function"]["arguments"].dump()});
    chat.push_back(message);
  }
  return chat;
}

// Qwen2.5's template with tools, an assistant's two calls and the tools' answers: the ids of
// transformers' apply_chat_template(messages, tools=tools, add_generation_prompt=True), and
// greedy generation from them as transformers' generate().
TEST(ToolCalls, ToolsAndToolTurnsGiveTransformersPrompt) {
  const std::string dir = testing::fixture_path("hf/qwen25_tools_tiny");
  const ordered_json reference = read_ordered(dir + "/reference.json");
  const Tokenizer tokenizer = Tokenizer::hugging_face("bpe", dir);
  EXPECT_EQ(tokenizer.encode_chat(reference["messages"], reference["tools"]), reference["input_ids"].get<std::vector<int>>());
  EXPECT_EQ(tokenizer.tool_call_format(), ToolCallFormat::kHermes);

  const Generator generator(dir);
  const Prompt prompt(chat_of(reference["messages"]), reference["tools"].dump());
  EXPECT_EQ(generator.count_tokens(prompt), static_cast<int64_t>(reference["input_ids"].size()));
  GenerationOptions greedy;
  greedy.temperature = 0, greedy.max_new_tokens = reference["max_new_tokens"].get<int64_t>();
  EXPECT_EQ(generator.generate(prompt, greedy), reference["new_text"].get<std::string>());
  // Without tools, the template writes no tools' section: fewer tokens.
  EXPECT_LT(generator.count_tokens(Prompt(chat_of(reference["messages"]))), generator.count_tokens(prompt));
  EXPECT_EQ(testing::error_of([&] { generator.count_tokens(Prompt(chat_of(reference["messages"]), "{\"a\": 1}")); }),
            "the tools must be a JSON list (OpenAI's [{\"type\": \"function\", \"function\": {...}}, ...])");
  // A tool OpenAI would refuse (no function, no name) is refused, not written as nothing.
  for (const char* tools : {"[{\"type\": \"function\"}]", "[{\"type\": \"function\", \"function\": {\"description\": \"x\"}}]", "[3]"})
    EXPECT_EQ(testing::error_of([&] { generator.count_tokens(Prompt(chat_of(reference["messages"]), tools)); }),
              "tool 1 of the list is not {\"type\": \"function\", \"function\": {\"name\": ..., ...}}")
        << tools;
  const testing::TempDir tmp;
  const std::string bad = tmp.path("tools.json");
  testing::write_file(bad, "[{\"type\": \"function\", \"function\": {\"name\": \"t\"}}, {\"type\": \"function\"}]");
  const testing::CliResult refused = testing::run_command("printf 'Hi\\n' | " TFM_BINARY " chat --model " + dir + " --tools " + bad + " 2>&1");
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.output, "tfm: error: --tools " + bad + ": tool 2 of the list is not {\"type\": \"function\", \"function\": {\"name\": ..., ...}}\n");
}

// The generator reads its model's format, and names each call afresh.
TEST(ToolCalls, GeneratorReadsItsModelsFormat) {
  const Generator generator(testing::fixture_path("hf/qwen25_tools_tiny"));
  const ChatReply reply = generator.parse_tool_calls("Sure.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.content, "Sure.\n");
  EXPECT_EQ(reply.tool_calls[0].name, "get_time");
  EXPECT_EQ(reply.tool_calls[0].arguments, "{}");
  EXPECT_EQ(reply.tool_calls[0].id.size(), 9u);
  EXPECT_TRUE(std::all_of(reply.tool_calls[0].id.begin(), reply.tool_calls[0].id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }));
  EXPECT_EQ(generator.tool_call_start("Sure.\n<tool_call>"), 6u);
  const Generator chatml(testing::fixture_path("hf/qwen2_chat_tiny"));  // Qwen2's template teaches no calls
  EXPECT_TRUE(chatml.parse_tool_calls("<tool_call>\n{\"name\": \"t\"}\n</tool_call>").tool_calls.empty());
}

// The ids tfm gives calls are ones Mistral's templates take back (they refuse any but 9 characters).
TEST(ToolCalls, MistralsTemplateTakesTheCallsBack) {
  const Generator generator(testing::fixture_path("hf/qwen25_tools_tiny"));
  const ToolCall call = generator.parse_tool_calls("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>").tool_calls.at(0);
  const ordered_json fixtures = read_ordered(testing::fixture_path("hf/chat_templates.json"));
  for (const ordered_json& t : fixtures["templates"]) {
    if (!t["name"].get<std::string>().starts_with("Mistral")) continue;
    nlohmann::json settings = t["special_tokens"];
    settings["chat_template"] = t["template"];
    const TokenizerConfig config = TokenizerConfig::from_json(settings, t["name"].get<std::string>());
    const ordered_json messages = {
        {{"role", "user"}, {"content", "Time?"}},
        {{"role", "assistant"}, {"content", ""}, {"tool_calls", {{{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ordered_json::object()}}}}}}},
        {{"role", "tool"}, {"tool_call_id", call.id}, {"content", "12:00"}}};
    EXPECT_NE(apply_chat_template(config, messages, true, {{"tools", read_ordered(testing::fixture_path("hf/qwen25_tools_tiny/tools.json"))}})
                  .find("\"id\": \"" + call.id + "\""),
              std::string::npos)
        << t["name"];
  }
}

// A model made to call a tool (qwen25_tool_caller_tiny): its greedy reply is transformers'
// and reads back as the call; `tfm chat --tools` shows it, and `/tool` answers it.
TEST(ToolCalls, AModelThatCallsAToolIsReadBack) {
  const std::string dir = testing::fixture_path("hf/qwen25_tool_caller_tiny");
  const ordered_json reference = read_ordered(dir + "/reference.json");
  const Generator generator(dir);
  const Prompt prompt(chat_of(reference["messages"]), reference["tools"].dump());
  EXPECT_EQ(generator.count_tokens(prompt), static_cast<int64_t>(reference["input_ids"].size()));
  GenerationOptions greedy;
  greedy.temperature = 0;
  const std::string text = generator.generate(prompt, greedy);
  EXPECT_EQ(text, reference["new_text"].get<std::string>());
  const ChatReply reply = generator.parse_tool_calls(text);
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.content, "");
  EXPECT_EQ(reply.tool_calls[0].name, "get_current_weather");
  EXPECT_EQ(reply.tool_calls[0].arguments, "{\"location\":\"Paris\"}");

  auto chat = [&](const std::string& lines) {
    return testing::run_command("printf '" + lines + "' | " TFM_BINARY " chat --model " + dir + " --tools " + dir + "/tools.json --temperature 0 2>&1");
  };
  const testing::CliResult answered = chat("How warm is it in Paris?\\n/tool 21\\n");
  EXPECT_EQ(answered.code, 0) << answered.output;
  EXPECT_EQ(answered.output, text + "\n" + text + "\n");  // (it calls again: it always does)
  const testing::CliResult unasked = chat("/tool 21\\n");
  EXPECT_NE(unasked.code, 0);
  EXPECT_NE(unasked.output.find("/tool answers the model's tool calls, and none is waiting for an answer"), std::string::npos) << unasked.output;
}

}  // namespace
}  // namespace tfm::data
