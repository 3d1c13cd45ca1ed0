#include "data/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/text.h"
#include "data/unicode.h"
#include "io/input_file.h"
#include "tensor/error.h"

namespace tfm::data {

using nlohmann::json;

namespace {

json read_json(const std::string& path, const std::string& what) { return io::read_json_file(path, int64_t{1} << 30, what); }

constexpr const char* kSpecialKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
constexpr size_t kSpecialCount = std::size(kSpecialKeys);

// A flag of an added token's description, true or false (HF's AddedToken defaults where missing).
bool token_flag(const json& description, const char* key, bool fallback, const std::string& origin) {
  if (!description.contains(key)) return fallback;
  TFM_CHECK(description[key].is_boolean(), origin << ": an added token's \"" << key << "\" must be true or false");
  return description[key].get<bool>();
}

// A token given as a string or as {"content": ..., ...} (an AddedToken's description).
std::string token_content(const json& token, const std::string& origin) {
  const json& content = token.is_object() && token.contains("content") ? token["content"] : token;
  TFM_CHECK(content.is_string() && !content.get<std::string>().empty(),
            origin << ": a token must be a non-empty string or an object with one as \"content\", got " << token.dump());
  return content.get<std::string>();
}

// The id in a key of added_tokens_decoder: decimal digits.
int parse_id(const std::string& key, const std::string& origin) {
  const bool digits = !key.empty() && key.size() <= 9 && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
  TFM_CHECK(digits, origin << ": added_tokens_decoder's keys must be token ids, got \"" << key << "\"");
  return std::stoi(key);
}

}  // namespace

TokenizerConfig TokenizerConfig::read(const std::string& path) {
  TokenizerConfig config;
  config.path_ = path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    config.json_ = std::make_shared<const nlohmann::json>(nlohmann::json::object());
    return config;
  }
  nlohmann::json content = read_json(path, "tokenizer configuration");
  TFM_CHECK(content.is_object(), path << ": not a JSON object of settings");
  config.json_ = std::make_shared<const nlohmann::json>(std::move(content));
  return config;
}

TokenizerConfig TokenizerConfig::from_json(nlohmann::json settings, const std::string& origin) {
  TokenizerConfig config;
  config.path_ = origin;
  config.json_ = std::make_shared<const nlohmann::json>(std::move(settings));
  return config;
}

bool TokenizerConfig::flag(const char* key, bool fallback) const { return optional_flag(key).value_or(fallback); }

std::optional<bool> TokenizerConfig::optional_flag(const char* key) const {
  if (!json_->contains(key) || (*json_)[key].is_null()) return std::nullopt;
  TFM_CHECK((*json_)[key].is_boolean(), path_ << ": \"" << key << "\" must be true, false or null");
  return (*json_)[key].get<bool>();
}

HfTokenizer::HfTokenizer(std::vector<std::string> pieces, const TokenizerConfig& config,
                         const std::vector<std::pair<SpecialToken, std::string>>& defaults)
    : config_(config), pieces_(std::move(pieces)), special_ids_(kSpecialCount), special_tokens_(kSpecialCount) {
  for (size_t id = 0; id < pieces_.size(); ++id) vocabulary_ids_[pieces_[id]] = static_cast<int>(id);
  vocabulary_size_ = pieces_.size();
  read_added_tokens(config);
  read_special_tokens(config, defaults);
  for (size_t id = vocabulary_size_; id < pieces_.size(); ++id)
    TFM_CHECK(added_token(static_cast<int>(id)), config.path() << ": no token has id " << id << " (added tokens must follow the vocabulary without gaps)");
  // Longest first: where two added tokens start at one place, the longer one is matched.
  std::stable_sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  clean_up_spaces_ = config.flag("clean_up_tokenization_spaces", true);
}

void HfTokenizer::add_token(const AddedToken& token, const std::string& origin) {
  TFM_CHECK(!added_token(token.id), origin << ": two added tokens have id " << token.id);
  if (static_cast<size_t>(token.id) >= pieces_.size()) pieces_.resize(static_cast<size_t>(token.id) + 1);
  pieces_[static_cast<size_t>(token.id)] = token.content;
  added_.push_back(token);
}

void HfTokenizer::read_added_tokens(const TokenizerConfig& config) {
  const json& config_json = config.json();
  if (!config_json.contains("added_tokens_decoder")) return;
  const json& decoder = config_json["added_tokens_decoder"];
  TFM_CHECK(decoder.is_object(), config.path() << ": added_tokens_decoder must be an object of ids and tokens");
  for (const auto& [key, description] : decoder.items()) {
    TFM_CHECK(description.is_object(), config.path() << ": added token " << key << " must be an object with its \"content\"");
    add_token({.content = token_content(description, config.path()),
               .id = parse_id(key, config.path()),
               .lstrip = token_flag(description, "lstrip", false, config.path()),
               .rstrip = token_flag(description, "rstrip", false, config.path()),
               .single_word = token_flag(description, "single_word", false, config.path()),
               .normalized = token_flag(description, "normalized", true, config.path()),
               .special = token_flag(description, "special", false, config.path())},
              config.path());
  }
}

// The special tokens that the configuration names (or the tokenizer class, where the
// configuration does not mention them; null means none) and additional_special_tokens.
// One that is not an added token yet becomes one, with its vocabulary id, as HF adds them.
void HfTokenizer::read_special_tokens(const TokenizerConfig& config, const std::vector<std::pair<SpecialToken, std::string>>& defaults) {
  const json& config_json = config.json();
  std::vector<json> named(kSpecialCount);
  for (const auto& [which, content] : defaults) named[static_cast<size_t>(which)] = content;
  for (size_t k = 0; k < kSpecialCount; ++k)
    if (config_json.contains(kSpecialKeys[k])) named[k] = config_json[kSpecialKeys[k]];
  std::vector<json> all = named;
  if (config_json.contains("additional_special_tokens")) {
    const json& more = config_json["additional_special_tokens"];
    TFM_CHECK(more.is_array(), config.path() << ": additional_special_tokens must be a list of tokens");
    all.insert(all.end(), more.begin(), more.end());
  }
  std::vector<int> special_ids, additional_ids;
  for (size_t k = 0; k < all.size(); ++k) {
    if (all[k].is_null()) continue;
    const std::string content = token_content(all[k], config.path());
    int id = -1;
    const auto added = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& t) { return t.content == content; });
    if (added != added_.end()) {
      id = added->id;
    } else {
      const auto it = vocabulary_ids_.find(content);
      TFM_CHECK(it != vocabulary_ids_.end(), config.path() << ": the special token " << content << " is neither in the vocabulary nor an added token");
      id = it->second;
      add_token({.content = content,
                 .id = id,
                 .lstrip = all[k].is_object() && token_flag(all[k], "lstrip", false, config.path()),
                 .rstrip = all[k].is_object() && token_flag(all[k], "rstrip", false, config.path()),
                 .single_word = all[k].is_object() && token_flag(all[k], "single_word", false, config.path()),
                 .special = true},
                config.path());
    }
    if (k < kSpecialCount) special_ids_[k] = id, special_tokens_[k] = content;
    special_ids.push_back(id);
    if (k >= kSpecialCount) additional_ids.push_back(id);
  }
  special_.assign(pieces_.size(), false);
  for (int id : special_ids) special_[static_cast<size_t>(id)] = true;
  // PreTrainedTokenizer._decode's "legacy added tokens", which stand apart in decoded text:
  // the added tokens that are not special, and additional special ones beyond the vocabulary.
  apart_.assign(pieces_.size(), false);
  for (const AddedToken& t : added_) apart_[static_cast<size_t>(t.id)] = !special_[static_cast<size_t>(t.id)];
  for (int id : additional_ids)
    if (static_cast<size_t>(id) >= vocabulary_size_) apart_[static_cast<size_t>(id)] = true;
}

const HfTokenizer::AddedToken* HfTokenizer::added_token(int id) const {
  const auto it = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& t) { return t.id == id; });
  return it == added_.end() ? nullptr : &*it;
}

const std::string& HfTokenizer::piece(int id) const {
  TFM_CHECK(id >= 0 && id < size(), "token id " << id << " is outside the vocabulary (0 to " << size() - 1 << ")");
  return pieces_[static_cast<size_t>(id)];
}

bool HfTokenizer::is_special(int id) const { return id >= 0 && id < size() && special_[static_cast<size_t>(id)]; }

const std::string& HfTokenizer::special_token(SpecialToken which) const { return special_tokens_[static_cast<size_t>(which)]; }

int HfTokenizer::id(const std::string& token) const {
  const auto added = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& t) { return t.content == token; });
  if (added != added_.end()) return added->id;
  const auto it = vocabulary_ids_.find(token);
  if (it != vocabulary_ids_.end()) return it->second;
  const std::optional<int> unknown = special_id(SpecialToken::kUnk);
  TFM_CHECK(unknown, "the token " << token << " is not in the vocabulary, which has no unknown token");
  return *unknown;
}

// Added tokens that `accept` takes, each at the first place it occurs, the longest where
// several start at one place; the text around them in between (without empty stretches).
template <class Accept>
std::vector<HfTokenizer::Segment> HfTokenizer::find_added_tokens(std::string_view text, Accept accept) const {
  std::vector<Segment> segments;
  size_t plain = 0;  // where the text since the last added token starts
  for (size_t pos = 0; pos < text.size();) {
    const auto match = std::find_if(added_.begin(), added_.end(),
                                    [&](const AddedToken& t) { return accept(t) && text.substr(pos).starts_with(t.content); });
    if (match == added_.end()) {
      ++pos;
      continue;
    }
    if (pos > plain) segments.push_back({std::string(text.substr(plain, pos - plain))});
    segments.push_back({match->content, &*match});
    pos += match->content.size();
    plain = pos;
  }
  if (plain < text.size()) segments.push_back({std::string(text.substr(plain))});
  return segments;
}

// PreTrainedTokenizer.tokenize's split: an added token with lstrip (rstrip) takes the
// whitespace of the text on its left (right); a single_word one with a neighbour that is
// not a space there is no token but text, joined to that neighbour (the left first).
std::vector<HfTokenizer::Segment> HfTokenizer::split_on_added_tokens(std::string_view text) const {
  std::vector<Segment> segments = find_added_tokens(text, [](const AddedToken&) { return true; });
  for (size_t i = 0; i < segments.size(); ++i) {
    const AddedToken* token = segments[i].token;
    if (!token) continue;
    Segment* left = i > 0 ? &segments[i - 1] : nullptr;
    Segment* right = i + 1 < segments.size() ? &segments[i + 1] : nullptr;
    // The neighbours as they were before stripping, which single_word looks at (as HF's).
    const std::string left_text = left ? left->text : "", right_text = right ? right->text : "";
    if (token->rstrip && right && !right->token) right->text = std::string(lstrip_space(right->text));
    if (token->lstrip && left && !left->token) left->text = std::string(rstrip_space(left->text));
    if (token->single_word && !left_text.empty() && !left_text.ends_with(' ')) {
      *left = {left->text + token->content};
      segments[i] = {""};
    } else if (token->single_word && !right_text.empty() && !right_text.starts_with(' ')) {
      *right = {token->content + right->text};
      segments[i] = {""};
    }
  }
  std::erase_if(segments, [](const Segment& s) { return s.text.empty(); });
  return segments;
}

std::string HfTokenizer::lower_outside_added_tokens(std::string_view text) const {
  const auto keeps_case = [&](const AddedToken& t) { return is_special(t.id) || (!t.special && t.normalized); };
  std::string out;
  for (const Segment& s : find_added_tokens(text, keeps_case))
    out += s.token ? s.text : to_utf8(unicode::lower(code_points(s.text, "the text to tokenize")));
  return out;
}

std::vector<std::string> HfTokenizer::tokens(const std::string& text, bool add_special) const {
  check_utf8(text, "the text to tokenize");
  const std::string prepared = prepare(text);
  std::vector<std::string> out;
  const std::vector<Segment> segments = split_on_added_tokens(prepared);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].token) {
      out.push_back(segments[i].token->content);
      continue;
    }
    for (std::string& token : tokenize_plain(segments[i].text, /*at_start=*/i == 0)) out.push_back(std::move(token));
  }
  if (!add_special) return out;
  if (!frame_) return add_special_tokens(std::move(out));
  out.insert(out.begin(), frame_->first.begin(), frame_->first.end());
  out.insert(out.end(), frame_->second.begin(), frame_->second.end());
  return out;
}

void HfTokenizer::set_frame(std::vector<std::string> before, std::vector<std::string> after) {
  for (const std::vector<std::string>* tokens : {&before, &after})
    for (const std::string& token : *tokens)
      TFM_CHECK(in_vocabulary(token) || std::any_of(added_.begin(), added_.end(), [&](const AddedToken& t) { return t.content == token; }),
                "the token " << token << " that frames every text is not in the vocabulary");
  frame_.emplace(std::move(before), std::move(after));
}

std::vector<int> HfTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int> ids;
  for (const std::string& token : tokens(text, add_special)) ids.push_back(id(token));
  return ids;
}

// PreTrainedTokenizer._decode: the model joins runs of its tokens; added tokens that are
// not special (and additional special ones beyond the vocabulary) stand apart; the parts
// are joined with spaces.
std::string HfTokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  std::vector<std::string> parts, run;
  for (int id : ids) {
    const std::string& token = piece(id);
    if (skip_special && is_special(id)) continue;
    if (!apart_[static_cast<size_t>(id)]) {
      run.push_back(token);
      continue;
    }
    std::string joined = run.empty() ? "" : join_tokens(run);
    if (!joined.empty()) parts.push_back(std::move(joined));
    run.clear();
    parts.push_back(token);
  }
  if (!run.empty()) parts.push_back(join_tokens(run));
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? " " : "") + parts[i];
  return clean_up_spaces_ ? clean_up_tokenization(std::move(text)) : text;
}

std::string replace_all(const std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, start)) {
    out.append(text, start, at - start).append(to);
    start = at + from.size();
  }
  return out.append(text, start);
}

std::string clean_up_tokenization(std::string text) {
  static constexpr std::pair<std::string_view, std::string_view> kJoins[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kJoins) text = replace_all(text, from, to);
  return text;
}

std::vector<std::string> read_vocab_json(const std::string& path) { return vocabulary_from_json(read_json(path, "vocabulary"), path); }

std::vector<std::string> vocabulary_from_json(const json& vocab, const std::string& path) {
  TFM_CHECK(vocab.is_object(), path << ": not a JSON object of tokens and their ids");
  std::vector<std::string> pieces(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    const bool in_range = id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < static_cast<int64_t>(pieces.size());
    TFM_CHECK(in_range, path << ": the id of \"" << token << "\" is " << id.dump() << "; ids must be 0 to " << pieces.size() - 1 << ", each once");
    const size_t index = id.get<size_t>();
    TFM_CHECK(!seen[index], path << ": \"" << pieces[index] << "\" and \"" << token << "\" both have id " << index);
    seen[index] = true;
    pieces[index] = token;
  }
  return pieces;
}

}  // namespace tfm::data
