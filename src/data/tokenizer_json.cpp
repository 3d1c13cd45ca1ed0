#include "data/tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/unicode.h"
#include "io/input_file.h"
#include "tensor/error.h"

namespace tfm::data {

using nlohmann::json;

namespace {

constexpr const char* kFamilies = "(tfm reads the WordPiece and BPE tokenizers of BERT, GPT-2, Llama, Mistral and Qwen2)";

bool type_is(const json& component, const char* type) { return component.is_object() && component.value("type", json()) == type; }

// Whether a BPE is one that only the tokenizers library runs (Model::kBpe) rather than
// GPT-2's family, whose files say no more than vocab.json, merges.txt and
// tokenizer_config.json can: byte fallback, a normalizer, no pre-tokenizer, or a Split or
// Metaspace one.
bool is_pipeline(const json& root) {
  const json model = root.value("model", json()), pre = root.value("pre_tokenizer", json());
  if (!type_is(model, "BPE")) return false;
  const json steps = type_is(pre, "Sequence") ? pre.value("pretokenizers", json()) : json::array({pre});
  const bool cuts = steps.is_array() && std::any_of(steps.begin(), steps.end(), [](const json& step) {
    return type_is(step, "Split") || type_is(step, "Metaspace");
  });
  return model.value("byte_fallback", json(false)) == json(true) || !root.value("normalizer", json()).is_null() || pre.is_null() || cuts;
}

// Reads one tokenizer.json's components into a TokenizerJson. Each reader checks that its
// component says nothing tfm would not follow: an unknown type, key or setting is refused
// with its JSON path ("pre_tokenizer.pretokenizers[1].type"), as tfm cannot run it.
class Reader {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}

  void read(const json& root, const TokenizerConfig& config) {
    TFM_CHECK(root.is_object(), out_.path << ": not a JSON object (a tokenizer saved by Hugging Face's tokenizers library)");
    check_keys(root, "", {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"});
    expect(root, "", "version", "1.0");
    bpe_pipeline_ = is_pipeline(root);
    // truncation and padding are left out: transformers sets both anew for every call.
    read_model(member(root, "", "model"), "model");
    read_normalizer(root.value("normalizer", json()), "normalizer");
    read_pre_tokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer");
    read_post_processor(root.value("post_processor", json()), "post_processor");
    read_decoder(root.value("decoder", json()), "decoder");
    read_added_tokens(root.value("added_tokens", json::array()));
    out_.config = TokenizerConfig::from_json(merged_settings(config), out_.path);
  }

 private:
  [[noreturn]] void refuse(const std::string& at, const json& value) const {
    const std::string shown = value.dump();
    throw Error(out_.path + ": " + at + " " + (shown.size() > 100 ? shown.substr(0, 100) + "..." : shown) + " is not supported " + kFamilies);
  }
  static std::string join(const std::string& at, const std::string& key) { return at.empty() ? key : at + "." + key; }

  const json& member(const json& object, const std::string& at, const char* key) const {
    TFM_CHECK(object.contains(key), out_.path << ": " << join(at, key) << " is missing");
    return object[key];
  }
  // A component's type ("BertNormalizer"); null components have none.
  std::string type_of(const json& component, const std::string& at) const {
    TFM_CHECK(component.is_object() && component.contains("type") && component["type"].is_string(),
              out_.path << ": " << at << " must be an object with a \"type\", got " << component.dump().substr(0, 80));
    return component["type"].get<std::string>();
  }
  void check_keys(const json& component, const std::string& at, std::initializer_list<const char*> known) const {
    for (const auto& [key, value] : component.items()) {
      const std::string& name = key;  // (clang before 16 lets no lambda capture a structured binding)
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return name == k; })) refuse(join(at, name), value);
    }
  }
  // A setting that must have one of `allowed` values where it is present.
  void expect(const json& component, const std::string& at, const char* key, std::initializer_list<json> allowed) const {
    if (component.contains(key) && std::find(allowed.begin(), allowed.end(), component[key]) == allowed.end())
      refuse(join(at, key), component[key]);
  }
  void expect(const json& component, const std::string& at, const char* key, const json& allowed) const { expect(component, at, key, {allowed}); }
  bool flag(const json& component, const std::string& at, const char* key, bool fallback) const {
    if (!component.contains(key)) return fallback;
    TFM_CHECK(component[key].is_boolean(), out_.path << ": " << join(at, key) << " must be true or false, got " << component[key].dump());
    return component[key].get<bool>();
  }
  std::string string(const json& component, const std::string& at, const char* key) const {
    const json& value = member(component, at, key);
    TFM_CHECK(value.is_string(), out_.path << ": " << join(at, key) << " must be a string, got " << value.dump().substr(0, 80));
    return value.get<std::string>();
  }
  // A Sequence's list `key` of components, each read by `read` with its JSON path.
  template <class Read>
  void read_steps(const json& sequence, const std::string& at, const char* key, Read read) {
    check_keys(sequence, at, {"type", key});
    const json& steps = member(sequence, at, key);
    TFM_CHECK(steps.is_array(), out_.path << ": " << join(at, key) << " must be a list");
    for (size_t i = 0; i < steps.size(); ++i) read(steps[i], join(at, key) + "[" + std::to_string(i) + "]");
  }
  bool wordpiece() const { return out_.model == TokenizerJson::Model::kWordPiece; }
  // A one-character string setting (a Metaspace's replacement, a Strip's content).
  std::string character(const json& component, const std::string& at, const char* key) const {
    const std::string text = string(component, at, key);
    if (text.empty() || next_utf8(text, 0).length != text.size()) refuse(join(at, key), component[key]);
    return text;
  }
  // A Replace's pattern: {"String": text}, not empty (a Regex is refused).
  std::string literal(const json& step, const std::string& at) const {
    const json& pattern = member(step, at, "pattern");
    const bool text = pattern.is_object() && pattern.size() == 1 && pattern.contains("String") && pattern["String"].is_string();
    if (!text || pattern["String"].get<std::string>().empty()) refuse(join(at, "pattern"), pattern);
    return pattern["String"].get<std::string>();
  }
  size_t count(const json& component, const std::string& at, const char* key) const {
    const json& value = member(component, at, key);
    if (!value.is_number_unsigned()) refuse(join(at, key), value);
    return value.get<size_t>();
  }
  // A component of the other family (a WordPiece model's ByteLevel pre-tokenizer, ...).
  void require_family(bool wordpiece_family, const std::string& at, const std::string& type) const {
    if (wordpiece_family != wordpiece()) refuse(at + ".type", type);
  }

  void read_model(const json& model, const std::string& at);
  void read_merges(const json& merges, const std::string& at);
  void read_normalizer(const json& normalizer, const std::string& at);
  void read_normalizers(const json& sequence, const std::string& at);
  void read_edits(const json& normalizer, const std::string& at);
  void read_edit(const json& step, const std::string& at);
  void read_pipeline_pre_tokenizer(const json& pre_tokenizer, const std::string& at);
  void read_pipeline_step(const json& step, const std::string& at);
  BpePipeline::Metaspace read_metaspace(const json& step, const std::string& at) const;
  void read_pipeline_decoder(const json& decoder, const std::string& at);
  void read_decode_step(const json& step, const std::string& at);
  void read_pre_tokenizer(const json& pre_tokenizer, const std::string& at);
  void read_post_processor(const json& processor, const std::string& at);
  void read_template(const json& processor, const std::string& at);
  std::vector<std::string> pair_token(const json& processor, const std::string& at, const char* key);
  std::vector<std::pair<std::string, int>> template_tokens(const json& specials, const json& name, const std::string& at) const;
  void read_decoder(const json& decoder, const std::string& at);
  void read_added_tokens(const json& tokens);
  json merged_settings(const TokenizerConfig& config) const;

  TokenizerJson& out_;
  // tokenizer_config.json's keys that tokenizer.json implies, by who wins where both say one:
  json settings_ = json::object();        // tokenizer_config.json (unk_token, clean_up_tokenization_spaces)
  json class_settings_ = json::object();  // the tokenizer class (a BertNormalizer's, a ByteLevel pre-tokenizer's)
  json pipeline_ = json::object();        // tokenizer.json (a Sequence's, which no class replaces)
  json added_ = json::object();           // added_tokens_decoder
  json special_ = json::array();          // the added tokens marked special
  bool saw_pre_tokenizer_ = false;
  bool bpe_pipeline_ = false;  // a BPE that only the tokenizers library runs (is_pipeline)
  std::vector<std::pair<std::string, int>> framing_ids_;  // the post-processor's tokens with the ids it gives them
};

void Reader::read_model(const json& model, const std::string& at) {
  const std::string type = type_of(model, at);
  if (type == "WordPiece") {
    out_.model = TokenizerJson::Model::kWordPiece;
    check_keys(model, at, {"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"});
    settings_["unk_token"] = string(model, at, "unk_token");
    if (model.contains("continuing_subword_prefix")) out_.settings.continuing_prefix = string(model, at, "continuing_subword_prefix");
    const json& max_chars = model.value("max_input_chars_per_word", json(100));
    if (!max_chars.is_number_unsigned() || max_chars.get<uint64_t>() == 0) refuse(join(at, "max_input_chars_per_word"), max_chars);
    out_.settings.max_word_characters = max_chars.get<size_t>();
  } else if (type == "BPE") {
    out_.model = bpe_pipeline_ ? TokenizerJson::Model::kBpe : TokenizerJson::Model::kByteLevelBpe;
    check_keys(model, at, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", "byte_fallback",
                           "ignore_merges", "vocab", "merges"});
    for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) expect(model, at, key, {json(), json("")});
    if (!bpe_pipeline_)
      for (const char* key : {"fuse_unk", "byte_fallback", "ignore_merges"}) expect(model, at, key, false);
    BpePipeline& pipeline = out_.pipeline;
    pipeline.byte_fallback = flag(model, at, "byte_fallback", false);
    pipeline.fuse_unk = flag(model, at, "fuse_unk", false);
    pipeline.ignore_merges = flag(model, at, "ignore_merges", false);
    if (model.contains("unk_token") && !model["unk_token"].is_null()) {
      pipeline.unk_token = string(model, at, "unk_token");
      settings_["unk_token"] = *pipeline.unk_token;
    }
    read_merges(member(model, at, "merges"), join(at, "merges"));
  } else {
    refuse(at + ".type", type);
  }
  out_.pieces = vocabulary_from_json(member(model, at, "vocab"), out_.path + ": " + join(at, "vocab"));
}

// Merges as tokenizers saves them: "first second" strings (up to 0.19) or [first, second] pairs.
void Reader::read_merges(const json& merges, const std::string& at) {
  TFM_CHECK(merges.is_array(), out_.path << ": " << at << " must be a list of merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string text = m.is_string() ? m.get<std::string>() : "";
    const bool as_string = std::count(text.begin(), text.end(), ' ') == 1 && text.front() != ' ' && text.back() != ' ';
    const bool as_pair = m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string();
    TFM_CHECK(as_string || as_pair, out_.path << ": " << at << "[" << i << "] must be \"first second\" or [\"first\", \"second\"], got "
                                              << m.dump().substr(0, 80));
    const std::string key = as_string ? text : m[0].get<std::string>() + " " + m[1].get<std::string>();
    out_.merge_ranks[key] = static_cast<int>(i);  // a merge listed twice ranks by its later place, as the older merges.txt
  }
}

// WordPiece's normalizer: BertNormalizer, or a Sequence of the steps it is made of.
// Byte-level BPE reads raw text (normalizer null), as GPT-2's and RoBERTa's.
void Reader::read_normalizer(const json& normalizer, const std::string& at) {
  if (bpe_pipeline_) return read_edits(normalizer, at);
  if (normalizer.is_null()) {  // none: text as it is
    if (!wordpiece()) return;
    pipeline_.update({{"do_lower_case", false}, {"strip_accents", false}, {"tokenize_chinese_chars", false}});
    out_.settings.clean_text = false;
    return;
  }
  const std::string type = type_of(normalizer, at);
  if (type == "Sequence") {
    require_family(true, at, type);
    read_normalizers(normalizer, at);
    return;
  }
  if (type != "BertNormalizer") refuse(at + ".type", type);
  require_family(true, at, type);
  check_keys(normalizer, at, {"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"});
  out_.settings.clean_text = flag(normalizer, at, "clean_text", true);
  const json strip = normalizer.value("strip_accents", json());
  TFM_CHECK(strip.is_null() || strip.is_boolean(), out_.path << ": " << join(at, "strip_accents") << " must be true, false or null");
  class_settings_.update({{"do_lower_case", flag(normalizer, at, "lowercase", true)},
                          {"strip_accents", strip},
                          {"tokenize_chinese_chars", flag(normalizer, at, "handle_chinese_chars", true)}});
}

// A Sequence's steps, as BertTokenizer's settings: Lowercase; NFD followed (later) by
// StripAccents, which together strip accents; NFC, which BertTokenizer applies anyway.
// An NFD without StripAccents would leave the text decomposed, which BertTokenizer never does.
void Reader::read_normalizers(const json& sequence, const std::string& at) {
  bool lower = false, nfd = false, strip = false;
  read_steps(sequence, at, "normalizers", [&](const json& step, const std::string& step_at) {
    const std::string type = type_of(step, step_at);
    if (type == "Lowercase") lower = true;
    else if (type == "NFD") nfd = true;
    else if (type == "StripAccents" && nfd) strip = true;
    else if (type != "NFC") refuse(step_at + ".type", type);
    check_keys(step, step_at, {"type"});
  });
  if (nfd && !strip) refuse(at, "NFD without StripAccents");
  pipeline_.update({{"do_lower_case", lower}, {"strip_accents", strip}, {"tokenize_chinese_chars", false}});
  out_.settings.clean_text = false;
}

// BertPreTokenizer (WordPiece; WhitespaceSplit beside it changes nothing) or ByteLevel
// (byte-level BPE), alone or in a Sequence.
void Reader::read_pre_tokenizer(const json& pre_tokenizer, const std::string& at) {
  if (bpe_pipeline_) return read_pipeline_pre_tokenizer(pre_tokenizer, at);
  if (pre_tokenizer.is_null()) refuse(at, pre_tokenizer);
  const std::string type = type_of(pre_tokenizer, at);
  if (type == "Sequence") {
    read_steps(pre_tokenizer, at, "pretokenizers", [&](const json& step, const std::string& step_at) { read_pre_tokenizer(step, step_at); });
    if (!saw_pre_tokenizer_) refuse(at, pre_tokenizer);
    return;
  }
  if (type == "BertPreTokenizer" || (type == "WhitespaceSplit" && wordpiece())) {
    require_family(true, at, type);
    check_keys(pre_tokenizer, at, {"type"});
    saw_pre_tokenizer_ = saw_pre_tokenizer_ || type == "BertPreTokenizer";
    return;
  }
  if (type != "ByteLevel" || saw_pre_tokenizer_) refuse(at + ".type", type);
  require_family(false, at, type);
  check_keys(pre_tokenizer, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});  // trim_offsets: offsets only
  (at == "pre_tokenizer" ? class_settings_ : pipeline_)["add_prefix_space"] = flag(pre_tokenizer, at, "add_prefix_space", true);
  out_.settings.use_regex = flag(pre_tokenizer, at, "use_regex", true);
  saw_pre_tokenizer_ = true;
}

// ---- A BPE that only the tokenizers library runs ----

// Its normalizer: none, or NFC, Prepend and Replace, alone or in a Sequence.
void Reader::read_edits(const json& normalizer, const std::string& at) {
  if (normalizer.is_null()) return;
  if (type_of(normalizer, at) != "Sequence") return read_edit(normalizer, at);
  read_steps(normalizer, at, "normalizers", [&](const json& step, const std::string& step_at) { read_edit(step, step_at); });
}

void Reader::read_edit(const json& step, const std::string& at) {
  using Kind = BpePipeline::Edit::Kind;
  const std::string type = type_of(step, at);
  if (type == "NFC") {
    check_keys(step, at, {"type"});
    out_.pipeline.normalizer.push_back({Kind::kNfc, "", ""});
  } else if (type == "Prepend") {
    check_keys(step, at, {"type", "prepend"});
    out_.pipeline.normalizer.push_back({Kind::kPrepend, string(step, at, "prepend"), ""});
  } else if (type == "Replace") {
    check_keys(step, at, {"type", "pattern", "content"});
    out_.pipeline.normalizer.push_back({Kind::kReplace, literal(step, at), string(step, at, "content")});
  } else {
    refuse(at + ".type", type);
  }
}

// Its pre-tokenizer: none (the text is one word); Metaspace; or a Split by one of the
// patterns tfm knows and ByteLevel, alone or in a Sequence in that order (no pattern is
// written for byte-level characters).
void Reader::read_pipeline_pre_tokenizer(const json& pre_tokenizer, const std::string& at) {
  if (pre_tokenizer.is_null()) return;
  if (type_of(pre_tokenizer, at) != "Sequence") return read_pipeline_step(pre_tokenizer, at);
  read_steps(pre_tokenizer, at, "pretokenizers", [&](const json& step, const std::string& step_at) { read_pipeline_step(step, step_at); });
}

void Reader::read_pipeline_step(const json& step, const std::string& at) {
  BpePipeline& p = out_.pipeline;
  const std::string type = type_of(step, at);
  const bool first = !p.pattern && !p.byte_level && !p.metaspace;
  if (type == "Split" && first) {
    check_keys(step, at, {"type", "pattern", "behavior", "invert"});
    if (member(step, at, "behavior") != "Isolated") refuse(join(at, "behavior"), step["behavior"]);
    expect(step, at, "invert", false);
    const json& pattern = member(step, at, "pattern");
    const bool regex = pattern.is_object() && pattern.size() == 1 && pattern.contains("Regex") && pattern["Regex"].is_string();
    p.pattern = regex ? word_pattern(pattern["Regex"].get<std::string>()) : std::nullopt;
    if (!p.pattern) refuse(join(at, "pattern"), pattern);
  } else if (type == "ByteLevel" && !p.byte_level && !p.metaspace) {
    check_keys(step, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});  // trim_offsets: offsets only
    expect(step, at, "add_prefix_space", false);
    if (flag(step, at, "use_regex", true)) {  // GPT-2's pattern, where no Split came first
      if (p.pattern) refuse(join(at, "use_regex"), true);
      p.pattern = WordPattern::kGpt2;
    }
    p.byte_level = true;
  } else if (type == "Metaspace" && first) {
    p.metaspace = read_metaspace(step, at);
  } else {
    refuse(at + ".type", type);
  }
}

// Metaspace as tokenizers saves it from 0.19 (prepend_scheme, split) and before
// (add_prefix_space, false only with prepend_scheme "never", as tokenizers checks; str_rep).
BpePipeline::Metaspace Reader::read_metaspace(const json& step, const std::string& at) const {
  using Prepend = BpePipeline::Metaspace::Prepend;
  check_keys(step, at, {"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep"});
  BpePipeline::Metaspace m;
  m.replacement = character(step, at, "replacement");
  const json scheme = step.value("prepend_scheme", json("always"));
  if (scheme == "first") m.prepend = Prepend::kFirst;
  else if (scheme == "never") m.prepend = Prepend::kNever;
  else if (scheme != "always") refuse(join(at, "prepend_scheme"), scheme);
  if (!flag(step, at, "add_prefix_space", true) && m.prepend != Prepend::kNever) refuse(join(at, "add_prefix_space"), false);
  m.split = flag(step, at, "split", true);
  return m;
}

// Its decoder: Replace, ByteFallback, Fuse, Strip, Metaspace and ByteLevel, alone or in a Sequence.
void Reader::read_pipeline_decoder(const json& decoder, const std::string& at) {
  if (type_of(decoder, at) != "Sequence") return read_decode_step(decoder, at);
  read_steps(decoder, at, "decoders", [&](const json& step, const std::string& step_at) { read_decode_step(step, step_at); });
}

void Reader::read_decode_step(const json& step, const std::string& at) {
  using Kind = BpePipeline::Decode::Kind;
  const std::string type = type_of(step, at);
  BpePipeline::Decode d{};
  if (type == "Replace") {
    check_keys(step, at, {"type", "pattern", "content"});
    d = {.kind = Kind::kReplace, .text = literal(step, at), .by = string(step, at, "content")};
  } else if (type == "ByteFallback" || type == "Fuse") {
    check_keys(step, at, {"type"});
    d.kind = type == "Fuse" ? Kind::kFuse : Kind::kByteFallback;
  } else if (type == "Strip") {
    check_keys(step, at, {"type", "content", "start", "stop"});
    d = {.kind = Kind::kStrip, .text = character(step, at, "content"), .start = count(step, at, "start"), .stop = count(step, at, "stop")};
  } else if (type == "Metaspace") {
    const BpePipeline::Metaspace m = read_metaspace(step, at);
    d = {.kind = Kind::kMetaspace, .text = m.replacement, .never = m.prepend == BpePipeline::Metaspace::Prepend::kNever};
  } else if (type == "ByteLevel") {
    check_keys(step, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    d.kind = Kind::kByteLevel;
  } else {
    refuse(at + ".type", type);
  }
  out_.pipeline.decoder.push_back(std::move(d));
}

// The tokens around every text: none (null, ByteLevel), [CLS] $A [SEP] (BertProcessing,
// RobertaProcessing's <s> $A </s>), a TemplateProcessing's single template, or a Sequence's.
void Reader::read_post_processor(const json& processor, const std::string& at) {
  if (!out_.settings.before) out_.settings.before.emplace(), out_.settings.after.emplace();
  if (processor.is_null()) return;
  const std::string type = type_of(processor, at);
  if (type == "Sequence") {
    read_steps(processor, at, "processors", [&](const json& step, const std::string& step_at) { read_post_processor(step, step_at); });
  } else if (type == "ByteLevel") {  // offsets only
    require_family(false, at, type);
    check_keys(processor, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    check_keys(processor, at, {"type", "sep", "cls", "trim_offsets", "add_prefix_space"});
    if (type == "BertProcessing") check_keys(processor, at, {"type", "sep", "cls"});
    const std::vector<std::string> cls = pair_token(processor, at, "cls"), sep = pair_token(processor, at, "sep");
    out_.settings.before->insert(out_.settings.before->end(), cls.begin(), cls.end());
    out_.settings.after->insert(out_.settings.after->begin(), sep.begin(), sep.end());
  } else if (type == "TemplateProcessing") {
    read_template(processor, at);
  } else {
    refuse(at + ".type", type);
  }
}

// BertProcessing's "cls": ["[CLS]", 101].
std::vector<std::string> Reader::pair_token(const json& processor, const std::string& at, const char* key) {
  const json& pair = member(processor, at, key);
  TFM_CHECK(pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_number_integer(),
            out_.path << ": " << join(at, key) << " must be [token, id], got " << pair.dump().substr(0, 80));
  framing_ids_.emplace_back(pair[0].get<std::string>(), pair[1].get<int>());
  return {pair[0].get<std::string>()};
}

// TemplateProcessing: "single" is the one text's template, special tokens and the
// sequence $A; "pair" (two texts) is not a case tfm has.
void Reader::read_template(const json& processor, const std::string& at) {
  check_keys(processor, at, {"type", "single", "pair", "special_tokens"});
  const json& single = member(processor, at, "single");
  const json& specials = processor.value("special_tokens", json::object());
  TFM_CHECK(single.is_array(), out_.path << ": " << join(at, "single") << " must be a list of pieces");
  bool sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string piece_at = join(at, "single") + "[" + std::to_string(i) + "]";
    const json& piece = single[i];
    const bool is_sequence = piece.is_object() && piece.size() == 1 && piece.contains("Sequence");
    const bool is_special = piece.is_object() && piece.size() == 1 && piece.contains("SpecialToken");
    if (is_sequence && !sequence && piece["Sequence"] == json{{"id", "A"}, {"type_id", 0}}) {
      sequence = true;
      continue;
    }
    if (!is_special || !piece["SpecialToken"].is_object() || !piece["SpecialToken"].contains("id")) refuse(piece_at, piece);
    for (const auto& [token, id] : template_tokens(specials, piece["SpecialToken"]["id"], join(at, "special_tokens"))) {
      (sequence ? *out_.settings.after : *out_.settings.before).push_back(token);
      framing_ids_.emplace_back(token, id);
    }
  }
  if (!sequence) refuse(join(at, "single"), single);
}

// A TemplateProcessing's special token: {"id": name, "ids": [...], "tokens": [...]}.
std::vector<std::pair<std::string, int>> Reader::template_tokens(const json& specials, const json& name, const std::string& at) const {
  const json& special = specials.is_object() && name.is_string() && specials.contains(name.get<std::string>()) ? specials[name.get<std::string>()] : json();
  TFM_CHECK(special.is_object(), out_.path << ": " << at << " lacks " << name.dump() << ", which the template names");
  const json tokens = special.value("tokens", json()), ids = special.value("ids", json());
  const auto all = [](const json& list, auto is) { return list.is_array() && std::all_of(list.begin(), list.end(), is); };
  TFM_CHECK(all(tokens, [](const json& t) { return t.is_string(); }) && all(ids, [](const json& i) { return i.is_number_integer(); }) &&
                tokens.size() == ids.size(),
            out_.path << ": " << at << "." << name.get<std::string>() << " must have as many \"tokens\" (strings) as \"ids\" (integers)");
  std::vector<std::pair<std::string, int>> out;
  for (size_t k = 0; k < tokens.size(); ++k) out.emplace_back(tokens[k].get<std::string>(), ids[k].get<int>());
  return out;
}

// WordPiece's decoder (its prefix the model's) or ByteLevel's: what the tokenizers join
// tokens with already. A decoder's cleanup is transformers' clean_up_tokenization_spaces.
void Reader::read_decoder(const json& decoder, const std::string& at) {
  if (decoder.is_null()) refuse(at, decoder);
  if (bpe_pipeline_) return read_pipeline_decoder(decoder, at);
  const std::string type = type_of(decoder, at);
  if (type == "WordPiece") {
    require_family(true, at, type);
    check_keys(decoder, at, {"type", "prefix", "cleanup"});
    if (decoder.contains("prefix") && decoder["prefix"] != out_.settings.continuing_prefix) refuse(join(at, "prefix"), decoder["prefix"]);
    settings_["clean_up_tokenization_spaces"] = flag(decoder, at, "cleanup", true);
  } else if (type == "ByteLevel") {
    require_family(false, at, type);
    check_keys(decoder, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  } else {
    refuse(at + ".type", type);
  }
}

// added_tokens: tokenizer_config.json's added_tokens_decoder, in a list with their ids.
// Those marked special are what decoding skips, as the fast tokenizers' decode does.
void Reader::read_added_tokens(const json& tokens) {
  TFM_CHECK(tokens.is_array(), out_.path << ": added_tokens must be a list of tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    json token = tokens[i];
    TFM_CHECK(token.is_object() && token.contains("id") && token["id"].is_number_unsigned(),
              out_.path << ": " << at << " must be an object with its \"id\"");
    check_keys(token, at, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    // The tokenizers library looks for a "normalized" token in the normalized text, tfm in
    // the text as given: the same where no normalizer changes it.
    if (bpe_pipeline_ && !out_.pipeline.normalizer.empty() && flag(token, at, "normalized", false)) refuse(at + ".normalized", true);
    const std::string id = std::to_string(token["id"].get<uint64_t>());
    token.erase("id");
    const std::string content = string(token, at, "content");
    if (flag(token, at, "special", false)) special_.push_back(content);
    added_[id] = std::move(token);
  }
}

// The settings of tokenizer_config.json and tokenizer.json together, as transformers'
// fast classes combine them (the added tokens are tokenizer.json's, the fast tokenizer's
// own); the post-processor's tokens checked against the ids the tokenizer gives them.
json Reader::merged_settings(const TokenizerConfig& config) const {
  json merged = settings_;
  merged.update(config.json());
  // BertTokenizerFast, GPT2TokenizerFast and RobertaTokenizerFast (what transformers loads
  // a BERT's, GPT-2's or RoBERTa's directory with) replace a BertNormalizer's lowercase,
  // strip_accents and handle_chinese_chars, and a ByteLevel pre-tokenizer's
  // add_prefix_space, by tokenizer_config.json's settings or the class's defaults;
  // PreTrainedTokenizerFast keeps them, and no class changes a Sequence.
  if (config.json().value("tokenizer_class", json()) == "PreTrainedTokenizerFast") merged.update(class_settings_);
  merged.update(pipeline_);
  merged["added_tokens_decoder"] = added_;
  json more = merged.value("additional_special_tokens", json::array());
  TFM_CHECK(more.is_array(), config.path() << ": additional_special_tokens must be a list of tokens");
  for (const json& token : special_)
    if (std::find(more.begin(), more.end(), token) == more.end()) more.push_back(token);
  merged["additional_special_tokens"] = more;
  for (const auto& [token, id] : framing_ids_) {
    const std::string key = std::to_string(id);
    const bool added = added_.contains(key) && added_[key].value("content", "") == token;
    const bool in_vocabulary = id >= 0 && static_cast<size_t>(id) < out_.pieces.size() && out_.pieces[static_cast<size_t>(id)] == token;
    TFM_CHECK(added || in_vocabulary, out_.path << ": the post-processor gives " << token << " the id " << id << ", which is not that token's");
  }
  return merged;
}

}  // namespace

std::optional<TokenizerJson> TokenizerJson::read(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  TokenizerJson out;
  out.path = file.string();
  const json root = io::read_json_file(out.path, int64_t{1} << 30, "tokenizer");
  Reader(out).read(root, TokenizerConfig::read((std::filesystem::path(dir) / "tokenizer_config.json").string()));
  return out;
}

std::string tokenizer_file(const std::string& dir, const std::string& older) {
  const std::filesystem::path d(dir);
  std::error_code ec;
  return (std::filesystem::exists(d / "tokenizer.json", ec) ? d / "tokenizer.json" : d / older).string();
}

}  // namespace tfm::data
