#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/fairseq_languages.h"
#include "data/hf_tokenizer.h"
#include "data/unicode.h"
#include "io/input_file.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

// CRC-32 of `bytes`, continuing `crc`.
uint32_t crc_of(const std::string& bytes, uint32_t crc = 0) {
  return static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

// Whether a vocab.json token is a language label, as MarianTokenizer's supported_language_codes.
bool is_language_label(const std::string& token) { return token.starts_with(">>") && token.ends_with("<<"); }

}  // namespace

LabelSplit split_language_label(std::string_view text) {
  LabelSplit out;
  // A match starting at i ends at its line's last "<<" if that starts at i + 3 or later
  // (one character at least between the two); each line's last "<<" is found once.
  size_t line_end = 0, last_close = std::string_view::npos;
  for (size_t i = 0; i < text.size();) {
    if (i == 0 || i > line_end) {
      line_end = std::min(text.find('\n', i), text.size());
      last_close = line_end >= 2 ? text.rfind("<<", line_end - 2) : std::string_view::npos;
    }
    const bool match = text.compare(i, 2, ">>") == 0 && last_close != std::string_view::npos && last_close >= i + 3;
    if (!match) {
      out.rest += text[i++];
      continue;
    }
    if (i == 0) out.label = text.substr(0, last_close + 2);
    i = last_close + 2;
  }
  return out;
}

Vocab Vocab::load_model(const std::string& path) {
  io::check_input_file(path, int64_t{1} << 28, "SentencePiece model");  // not /dev/zero, a FIFO or gigabytes
  Vocab v;
  v.sp_ = std::make_shared<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = v.sp_->Load(path);
  } catch (const std::exception& e) {  // the library throws on some malformed models (e.g. an empty piece)
    TFM_CHECK(false, path << ": not a valid SentencePiece model (" << e.what() << ")");
  }
  TFM_CHECK(status.ok(), path << ": not a valid SentencePiece model (" << status.ToString() << ")");
  v.checksum_ = crc_of(v.sp_->serialized_model_proto());
  v.path_ = std::filesystem::absolute(path).lexically_normal().string();  // what checkpoints record: valid from any directory
  return v;
}

Vocab Vocab::load(const std::string& path) {
  Vocab v = load_model(path);
  TFM_CHECK(v.sp_->pad_id() == kPad && v.sp_->unk_id() == kUnk && v.sp_->bos_id() == kBos && v.sp_->eos_id() == kEos,
            path << ": special token ids must be pad 0, unk 1, bos 2, eos 3 (train the vocabulary with `tfm vocab`)");
  return v;
}

Vocab Vocab::load_mapped(const std::string& spm_path, const std::string& vocab_json_path) {
  Vocab v = load_model(spm_path);
  auto mapping = std::make_shared<Mapping>();
  mapping->pieces = read_vocab_json(vocab_json_path);
  for (size_t id = 0; id < mapping->pieces.size(); ++id) {
    mapping->ids[mapping->pieces[id]] = static_cast<int>(id);
    v.checksum_ = crc_of(mapping->pieces[id] + '\n', v.checksum_);
    if (is_language_label(mapping->pieces[id])) mapping->labels.push_back(mapping->pieces[id]);
  }
  const auto id_of = [&](const std::string& token) {
    const auto it = mapping->ids.find(token);
    TFM_CHECK(it != mapping->ids.end(), vocab_json_path << ": has no " << token << ", which a Marian vocabulary needs");
    return it->second;
  };
  const int eos = id_of("</s>");
  v.specials_ = {.pad = id_of("<pad>"), .unk = id_of("<unk>"), .bos = eos, .eos = eos};
  v.mapping_ = std::move(mapping);
  v.mapping_path_ = std::filesystem::absolute(vocab_json_path).string();  // a record that works from any directory
  return v;
}

// A multilingual vocabulary: `mapping` (the pieces by id) with a token for each of
// `codes`, the specials <s> <pad> </s> <unk> (fairseq's).
Vocab Vocab::with_languages(Vocab v, std::shared_ptr<Mapping> mapping, const std::vector<std::string>& codes,
                            std::string (*token_of)(const std::string& code), const std::string& origin) {
  for (size_t id = 0; id < mapping->pieces.size(); ++id) {
    mapping->ids[mapping->pieces[id]] = static_cast<int>(id);
    v.checksum_ = crc_of(mapping->pieces[id] + '\n', v.checksum_);
  }
  for (const std::string& code : codes) {
    const auto it = mapping->ids.find(token_of(code));
    TFM_CHECK(it != mapping->ids.end(), origin << ": has no token for the language " << code);
    mapping->languages.push_back(code), mapping->language_ids[code] = it->second;
  }
  mapping->language.assign(mapping->pieces.size(), false);
  for (const auto& [code, id] : mapping->language_ids) mapping->language[static_cast<size_t>(id)] = true;
  const auto id_of = [&](const std::string& token) {
    const auto it = mapping->ids.find(token);
    TFM_CHECK(it != mapping->ids.end(), origin << ": has no " << token << ", which a fairseq vocabulary needs");
    return it->second;
  };
  v.specials_ = {.pad = id_of("<pad>"), .unk = id_of("<unk>"), .bos = id_of("<s>"), .eos = id_of("</s>")};
  mapping->fairseq = true;
  v.mapping_ = std::move(mapping);
  return v;
}

Vocab Vocab::load_m2m100(const std::string& spm_path, const std::string& vocab_json_path, const std::string& language_codes) {
  TFM_CHECK(language_codes == "m2m100" || language_codes == "wmt21",
            vocab_json_path << ": language_codes '" << language_codes << "' is not m2m100 or wmt21 (transformers' M2M100Tokenizer takes those)");
  const std::vector<std::string>& codes = language_codes == "m2m100" ? m2m100_languages() : wmt21_languages();
  auto mapping = std::make_shared<Mapping>();
  mapping->pieces = read_vocab_json(vocab_json_path);
  for (const std::string& code : codes) mapping->pieces.push_back("__" + code + "__");
  for (const char* word : {"madeupword0000", "madeupword0001", "madeupword0002", "madeupword0003", "madeupword0004", "madeupword0005",
                           "madeupword0006", "madeupword0007"})
    mapping->pieces.push_back(word);  // (fairseq's padding of the vocabulary to a multiple of 8)
  Vocab v = load_model(spm_path);
  v.mapping_path_ = std::filesystem::absolute(vocab_json_path).string();
  return with_languages(std::move(v), std::move(mapping), codes, [](const std::string& code) { return "__" + code + "__"; }, vocab_json_path);
}

Vocab Vocab::load_nllb(const std::string& spm_path, const std::vector<std::pair<int, std::string>>& added) {
  return load_shifted(spm_path, added, nllb_languages());
}

Vocab Vocab::load_mbart50(const std::string& spm_path, const std::vector<std::pair<int, std::string>>& added) {
  return load_shifted(spm_path, added, mbart50_languages());
}

Vocab Vocab::load_shifted(const std::string& spm_path, const std::vector<std::pair<int, std::string>>& added,
                          const std::vector<std::string>& codes) {
  Vocab v = load_model(spm_path);
  auto mapping = std::make_shared<Mapping>();
  const int pieces = v.sp_->GetPieceSize();
  mapping->pieces = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int id = 3; id < pieces; ++id) mapping->pieces.push_back(v.sp_->IdToPiece(id));  // (the model's 0-2: its own unk, bos, eos)
  if (added.empty()) {  // the languages' order after the pieces, then <mask>
    for (const std::string& code : codes) mapping->pieces.push_back(code);
    mapping->pieces.push_back("<mask>");
  }
  for (const auto& [id, content] : added) {
    TFM_CHECK(id >= 0 && id < static_cast<int>(mapping->pieces.size() + added.size()), spm_path << ": an added token's id " << id << " is past the vocabulary");
    if (id >= static_cast<int>(mapping->pieces.size())) mapping->pieces.resize(static_cast<size_t>(id) + 1);
    mapping->pieces[static_cast<size_t>(id)] = content;
  }
  for (size_t id = 0; id < mapping->pieces.size(); ++id)
    TFM_CHECK(!mapping->pieces[id].empty(), spm_path << ": the added tokens leave id " << id << " without a token");
  return with_languages(std::move(v), std::move(mapping), codes, [](const std::string& code) { return code; }, spm_path);
}

Vocab Vocab::load_fairseq(const std::string& kind, const std::string& spm_path, const std::string& vocab_json_path,
                          const std::string& tokenizer_config_path) {
  const TokenizerConfig config = TokenizerConfig::read(tokenizer_config_path);
  const nlohmann::json& settings = config.json();
  auto recorded = [&](Vocab v) {
    v.fairseq_kind_ = kind, v.tokenizer_config_path_ = std::filesystem::absolute(tokenizer_config_path).string();
    return v;
  };
  if (kind == "m2m100") return recorded(load_m2m100(spm_path, vocab_json_path, settings.value("language_codes", std::string("m2m100"))));
  TFM_CHECK(kind == "nllb" || kind == "mbart50", tokenizer_config_path << ": tokenizer '" << kind << "' is not m2m100, nllb or mbart50");
  std::vector<std::pair<int, std::string>> added;
  const nlohmann::json decoder = settings.value("added_tokens_decoder", nlohmann::json::object());
  for (const auto& [id, token] : decoder.items()) {
    TFM_CHECK(token.is_object() && token.contains("content") && token["content"].is_string(),
              tokenizer_config_path << ": added_tokens_decoder[" << id << "] has no content");
    try {
      added.emplace_back(std::stoi(id), token["content"].get<std::string>());
    } catch (const std::exception&) {
      throw Error(tokenizer_config_path + ": added_tokens_decoder's key '" + id + "' is not an id");
    }
  }
  return recorded(kind == "nllb" ? load_nllb(spm_path, added) : load_mbart50(spm_path, added));
}

std::optional<int> Vocab::language_token(const std::string& code, const std::string& option) const {
  if (multilingual()) {
    TFM_CHECK(!code.empty(), "the model translates between many languages: give the source's and the target's (" << option << ")");
    return language_id(code);
  }
  if (!code.empty()) language_id(code);  // refused, by name
  return std::nullopt;
}

int Vocab::language_id(const std::string& code) const {
  TFM_CHECK(multilingual(), "the model translates between the languages it was trained on: it takes no language ('" << code << "')");
  const auto it = mapping_->language_ids.find(code);
  if (it != mapping_->language_ids.end()) return it->second;
  const std::vector<std::string>& codes = mapping_->languages;
  std::string listed;
  for (size_t i = 0; i < std::min<size_t>(codes.size(), 12); ++i) listed += (i ? ", " : "") + codes[i];
  throw Error("'" + code + "' is not a language of this model; its languages: " + listed + (codes.size() > 12 ? ", ..." : "") + " (" +
              std::to_string(codes.size()) + " in all)");
}

std::vector<int> Vocab::encode(const std::string& text) const {
  if (mapping_) return encode_mapped(text);
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  TFM_CHECK(status.ok(), "cannot tokenize: " << status.ToString());
  return ids;
}

std::string Vocab::decode(const std::vector<int>& ids) const {
  if (mapping_) return decode_mapped(ids);
  std::vector<int> plain;
  for (int id : ids)
    if (id != kPad && id != kBos && id != kEos) plain.push_back(id);
  std::string text;
  auto status = sp_->Decode(plain, &text);
  TFM_CHECK(status.ok(), "cannot detokenize: " << status.ToString());
  return text;
}

// MarianTokenizer's ids: the language label, then the model's pieces of the rest looked up
// in vocab.json.
std::vector<int> Vocab::encode_mapped(const std::string& text) const {
  const LabelSplit split = mapping_->fairseq ? LabelSplit{"", text} : split_language_label(text);
  std::vector<std::string> pieces;
  auto status = sp_->Encode(split.rest, &pieces);
  TFM_CHECK(status.ok(), "cannot tokenize: " << status.ToString());
  std::vector<int> ids;
  if (!split.label.empty()) ids.push_back(label_id(split.label));
  for (const std::string& piece : pieces) {
    const auto it = mapping_->ids.find(piece);
    ids.push_back(it == mapping_->ids.end() ? specials_.unk : it->second);
  }
  return ids;
}

// MarianTokenizer reads a label vocab.json lacks as <unk>, and the model then translates
// into a language of its choosing: refused here, with the labels there are.
int Vocab::label_id(const std::string& label) const {
  const auto it = mapping_->ids.find(label);
  if (it != mapping_->ids.end()) return it->second;
  const std::vector<std::string>& labels = mapping_->labels;
  TFM_CHECK(!labels.empty(), "'" << label << "' is not a language label of this model, which has none (it translates into one language): "
                                 << "remove it from the text");
  std::string listed;
  for (size_t i = 0; i < std::min<size_t>(labels.size(), 10); ++i) listed += (i ? ", " : "") + labels[i];
  throw Error("'" + label + "' is not a language label of this model; its labels: " + listed + (labels.size() > 10 ? ", ..." : "") + " (" +
              std::to_string(labels.size()) + " in all)");
}

// MarianTokenizer.decode(ids, skip_special_tokens=True): the pieces of the other ids
// decoded by the model (SentencePiece leaves a piece it lacks as it is, a source-side
// piece in a target text, say, and HF then turns its "▁" into a space), stripped of
// whitespace at both ends, then HF's clean-up of spaces before punctuation.
std::string Vocab::decode_mapped(const std::vector<int>& ids) const {
  std::vector<std::string> pieces;
  for (int id : ids)
    if (id != specials_.eos && id != specials_.unk && id != specials_.pad && id != specials_.bos && !is_language(id)) pieces.push_back(piece(id));
  std::string text;
  auto status = sp_->Decode(pieces, &text);
  TFM_CHECK(status.ok(), "cannot detokenize: " << status.ToString());
  static const std::string_view kUnderline = "\u2581";
  std::string spaced;
  for (size_t at = 0; at < text.size();)
    if (text.compare(at, kUnderline.size(), kUnderline) == 0) spaced += ' ', at += kUnderline.size();
    else spaced += text[at++];
  return clean_up_tokenization(std::string(strip_space(spaced)));
}

bool Vocab::is_language(int id) const { return multilingual() && id >= 0 && id < size() && mapping_->language[static_cast<size_t>(id)]; }

std::string Vocab::piece(int id) const {
  if (!mapping_) return sp_->IdToPiece(id);
  TFM_CHECK(id >= 0 && id < size(), "token id " << id << " is outside the vocabulary (0 to " << size() - 1 << ")");
  return mapping_->pieces[static_cast<size_t>(id)];
}

int Vocab::size() const { return mapping_ ? static_cast<int>(mapping_->pieces.size()) : sp_->GetPieceSize(); }

Vocab load_recorded_vocab(const std::string& recorded, uint32_t crc32, const std::string& checkpoint, const std::string& how_to_give) {
  namespace fs = std::filesystem;
  const fs::path name = fs::path(recorded).filename();
  std::vector<fs::path> places{fs::path(checkpoint).parent_path() / name};
  std::error_code ec;
  const fs::path target = fs::canonical(checkpoint, ec);
  if (!ec) places.push_back(target.parent_path() / name);
  places.push_back(recorded);
  std::string tried;
  for (const fs::path& place : places) {
    if (tried.find(place.string() + " ") != std::string::npos) continue;  // the same place twice
    const bool there = fs::is_regular_file(place, ec), exists = fs::exists(place, ec);
    if (there) {
      try {
        Vocab v = Vocab::load(place.string());
        if (v.checksum() == crc32) return v;
      } catch (const Error&) {  // unreadable or not a SentencePiece model: another file of that name
      }
    }
    if (!tried.empty()) tried += ", ";
    tried += place.string();
    tried += there ? " (another vocabulary)" : exists ? " (not a regular file)" : " (missing)";
  }
  throw Error(checkpoint + ": the vocabulary it was trained with is at none of " + tried + "; give " + how_to_give);
}

}  // namespace tfm::data
