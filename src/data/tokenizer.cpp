#include "data/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/byte_bpe.h"
#include "data/chat_template.h"
#include "data/text.h"
#include "data/wordpiece.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::string text;
  for (const std::string& line : read_lines(path)) text += line + "\n";  // read_lines validates UTF-8
  return text;
}

Tokenizer Tokenizer::characters(const std::string& text) {
  std::vector<std::string> chars = utf8_characters(text);
  std::sort(chars.begin(), chars.end());  // byte order of UTF-8 is code-point order
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
  TFM_CHECK(!chars.empty(), "cannot build a character vocabulary from empty text");
  Tokenizer t;
  t.chars_ = std::move(chars);
  return t;
}

Tokenizer Tokenizer::sentencepiece(const std::string& model_path) {
  Tokenizer t;
  t.spm_ = std::make_shared<Vocab>(Vocab::load(model_path));
  return t;
}

Tokenizer Tokenizer::hugging_face(const std::string& type, const std::string& dir) {
  Tokenizer t;
  if (type == "byte_bpe") t.hf_ = std::make_shared<ByteLevelBpe>(ByteLevelBpe::load(dir));
  else if (type == "wordpiece") t.hf_ = std::make_shared<WordPiece>(WordPiece::load(dir));
  else if (type == "bpe") t.hf_ = std::make_shared<BpeTokenizer>(BpeTokenizer::load(dir));
  else throw Error("unknown Hugging Face tokenizer '" + type + "' (byte_bpe, wordpiece or bpe)");
  t.hf_type_ = type, t.hf_dir_ = std::filesystem::absolute(dir).string();  // a record that works from any directory
  return t;
}

const std::string& Tokenizer::sentencepiece_path() const {
  TFM_CHECK(spm_, "the tokenizer is not SentencePiece");
  return spm_->path();
}

std::string Tokenizer::describe() const {
  if (hf_) return hf_type_ == "byte_bpe" ? "byte-level BPE" : hf_type_ == "bpe" ? "BPE (tokenizer.json)" : "WordPiece";
  return spm_ ? "SentencePiece" : "characters";
}

std::string Tokenizer::record() const {
  if (hf_ && !ends_.empty()) return json{{"type", hf_type_}, {"path", hf_dir_}, {"ends", ends_}}.dump();
  if (hf_) return json{{"type", hf_type_}, {"path", hf_dir_}}.dump();
  if (spm_) return json{{"type", "sentencepiece"}, {"path", spm_->path()}, {"crc32", spm_->checksum()}}.dump();
  return json{{"type", "characters"}, {"characters", chars_}}.dump();
}

Tokenizer Tokenizer::from_record(const std::string& text, const std::string& origin, const std::string& spm_path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string type = j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
  const bool chars = type == "characters" && j.contains("characters") && j["characters"].is_array();
  const bool spm = type == "sentencepiece" && j.contains("path") && j["path"].is_string() &&
                   j.contains("crc32") && j["crc32"].is_number_unsigned();
  const bool hf = (type == "byte_bpe" || type == "wordpiece" || type == "bpe") && j.contains("path") && j["path"].is_string();
  TFM_CHECK(chars || spm || hf, origin << ": the tokenizer record in the metadata is malformed");
  TFM_CHECK(!hf || spm_path.empty(), origin << ": reads its own tokenizer (" << type << ", " << j["path"].get<std::string>()
                                            << "); the vocabulary " << spm_path << " does not apply to it (leave the vocabulary out)");
  if (hf) {
    Tokenizer t = hugging_face(type, j["path"].get<std::string>());
    const json ends = j.value("ends", json::array());
    const bool ids = ends.is_array() && std::all_of(ends.begin(), ends.end(), [](const json& e) { return e.is_number_integer(); });
    TFM_CHECK(ids, origin << ": the tokenizer record's end tokens are malformed");
    t.set_ends(ends.get<std::vector<int>>());
    return t;
  }
  TFM_CHECK(spm || spm_path.empty(), origin << ": reads characters, not SentencePiece pieces; the vocabulary " << spm_path
                                            << " does not apply to it (leave the vocabulary out)");
  if (spm) {
    const uint32_t crc32 = j["crc32"].get<uint32_t>();
    Tokenizer t;
    t.spm_ = std::make_shared<Vocab>(spm_path.empty() ? load_recorded_vocab(j["path"].get<std::string>(), crc32, origin,
                                                                            "the file with --vocab (ModelOptions::vocab in the library)")
                                                      : Vocab::load(spm_path));
    TFM_CHECK(t.spm_->checksum() == crc32, origin << ": was trained with another SentencePiece model than " << t.spm_->path());
    return t;
  }
  // encode() looks characters up by binary search: they must be distinct and in order, as characters() makes them.
  Tokenizer t;
  for (const json& c : j["characters"]) {
    TFM_CHECK(c.is_string() && utf8_characters(c.get<std::string>()).size() == 1, origin << ": the tokenizer record in the metadata is malformed");
    TFM_CHECK(t.chars_.empty() || t.chars_.back() < c.get<std::string>(),
              origin << ": the tokenizer record lists " << c.dump() << " twice or out of order");
    t.chars_.push_back(c.get<std::string>());
  }
  TFM_CHECK(!t.chars_.empty(), origin << ": the tokenizer record holds no characters");
  return t;
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  if (hf_) return hf_->encode(text);
  std::vector<int> ids;
  if (spm_) {
    size_t start = 0;
    while (start <= text.size()) {
      const size_t end = std::min(text.find('\n', start), text.size());
      std::vector<int> line = spm_->encode(text.substr(start, end - start));
      ids.insert(ids.end(), line.begin(), line.end());
      if (end < text.size()) ids.push_back(kEos);
      start = end + 1;
    }
    return ids;
  }
  for (const std::string& c : utf8_characters(text)) {
    auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
    ids.push_back(it != chars_.end() && *it == c ? kFirstChar + static_cast<int>(it - chars_.begin()) : kUnk);
  }
  return ids;
}

std::vector<int> Tokenizer::sentence(const std::string& text, int64_t max_len, bool* truncated) const {
  std::vector<int> ids = encode(text);
  const bool wordpiece = hf_type_ == "wordpiece";  // [CLS] ... [SEP] already
  if (!wordpiece) ids.insert(ids.begin(), cls_id());
  const int64_t end = wordpiece ? max_len - 1 : max_len;  // where [SEP] goes back
  const bool cut = static_cast<int64_t>(ids.size()) > max_len;
  if (cut) {
    const int sep = ids.back();
    ids.resize(static_cast<size_t>(end));
    if (wordpiece) ids.push_back(sep);
  }
  if (truncated) *truncated = cut;
  return ids;
}

int Tokenizer::end_of_text() const { return hf_ ? hf_->special_id(SpecialToken::kEos).value_or(-1) : -1; }

std::vector<int> Tokenizer::ends() const {
  if (!ends_.empty()) return ends_;
  return end_of_text() >= 0 ? std::vector<int>{end_of_text()} : std::vector<int>{};
}

void Tokenizer::set_ends(std::vector<int> ends) {
  for (int id : ends) TFM_CHECK(id >= 0 && id < size(), "the end token " << id << " is outside the tokenizer's " << size() << " tokens");
  ends_ = std::move(ends);
}

bool Tokenizer::has_chat_template() const { return hf_ && hf_->config().json().contains("chat_template"); }

std::vector<int> Tokenizer::encode_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools) const {
  TFM_CHECK(has_chat_template(), "the model's tokenizer has no chat template (tokenizer_config.json's chat_template); give it a text to continue");
  const nlohmann::ordered_json kwargs = tools.is_null() ? nlohmann::ordered_json::object() : nlohmann::ordered_json{{"tools", tools}};
  return hf_->encode(apply_chat_template(hf_->config(), messages, /*add_generation_prompt=*/true, kwargs), /*add_special=*/false);
}

ToolCallFormat Tokenizer::tool_call_format() const {
  if (!has_chat_template()) return ToolCallFormat::kNone;
  try {
    return data::tool_call_format(chat_template_source(hf_->config()));
  } catch (const Error&) {  // named templates without a "default": the model still loads, a conversation is refused saying why
    return ToolCallFormat::kNone;
  }
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  if (hf_) return hf_->decode(ids, /*skip_special=*/true);
  std::string out;
  if (spm_) {
    std::vector<int> line;
    for (int id : ids) {
      if (id == kEos) {
        out += spm_->decode(line) + "\n";
        line.clear();
      } else if (!is_special(id)) {
        line.push_back(id);
      }
    }
    return out + spm_->decode(line);
  }
  for (int id : ids)
    if (id >= kFirstChar && id < size()) out += chars_[static_cast<size_t>(id - kFirstChar)];
  return out;
}

std::string Tokenizer::piece(int id) const {
  if (hf_) return id >= 0 && id < size() ? hf_->piece(id) : "[?]";
  if (id == mask_id()) return "[MASK]";
  if (is_special(id) || id < 0 || id >= size()) {
    static const char* const kNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
    return id >= 0 && id < 4 ? kNames[id] : "[?]";
  }
  return spm_ ? spm_->piece(id) : chars_[static_cast<size_t>(id - kFirstChar)];
}

int Tokenizer::size() const {
  if (hf_) return hf_->size();
  return spm_ ? spm_->size() + 1 : kFirstChar + static_cast<int>(chars_.size());
}

int Tokenizer::mask_id() const {
  if (hf_) return hf_->special_id(SpecialToken::kMask).value_or(-1);
  return spm_ ? spm_->size() : kMask;
}

int Tokenizer::cls_id() const { return hf_ ? hf_->special_id(SpecialToken::kCls).value_or(kBos) : kBos; }

int Tokenizer::unk_id() const { return hf_ ? hf_->special_id(SpecialToken::kUnk).value_or(-1) : kUnk; }

int Tokenizer::line_break_id() const {
  if (hf_) return hf_->special_id(SpecialToken::kBos).value_or(hf_->special_id(SpecialToken::kCls).value_or(0));
  if (spm_) return kEos;
  auto it = std::lower_bound(chars_.begin(), chars_.end(), std::string("\n"));
  return it != chars_.end() && *it == "\n" ? kFirstChar + static_cast<int>(it - chars_.begin()) : kBos;
}

bool Tokenizer::is_special(int id) const {
  if (hf_) return hf_->is_special(id);
  return spm_ ? id < 4 || id == mask_id() : id < kFirstChar;
}

}  // namespace tfm::data
