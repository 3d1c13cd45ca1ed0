#include "data/byte_bpe.h"

#include <filesystem>
#include <sstream>

#include "data/byte_level.h"
#include "data/text.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

// merges.txt: one merge a line, "first second", the first merges first; a first line
// "#version: ..." is a header. The rank of a merge listed twice is its later line's, as HF's.
MergeRanks read_merges(const std::string& path) {
  const std::vector<std::string> lines = read_lines(path);
  MergeRanks ranks;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 0 && lines[i].starts_with("#version")) continue;
    std::istringstream words(lines[i]);
    std::string first, second, extra;
    const bool pair = (words >> first >> second) && !(words >> extra);
    TFM_CHECK(pair, path << ":" << i + 1 << ": expected two symbols separated by a space, got \"" << lines[i] << "\"");
    ranks[first + " " + second] = static_cast<int>(i);
  }
  return ranks;
}

}  // namespace

ByteLevelBpe ByteLevelBpe::load(const std::string& dir) {
  if (std::optional<TokenizerJson> file = TokenizerJson::read(dir)) {
    TFM_CHECK(file->model != TokenizerJson::Model::kWordPiece, file->path << ": model.type \"WordPiece\" is not GPT-2's tokenizer (byte-level BPE)");
    TFM_CHECK(file->model == TokenizerJson::Model::kByteLevelBpe, file->path << ": a BPE with byte fallback, a normalizer, or a Split or Metaspace "
                                                                            "pre-tokenizer (Llama's, Mistral's, Qwen2's) is not GPT-2's tokenizer");
    return ByteLevelBpe(std::move(file->pieces), file->config, std::move(file->merge_ranks), file->settings);
  }
  const std::filesystem::path d(dir);
  return ByteLevelBpe(read_vocab_json((d / "vocab.json").string()), TokenizerConfig::read((d / "tokenizer_config.json").string()),
                      read_merges((d / "merges.txt").string()), {});
}

ByteLevelBpe::ByteLevelBpe(std::vector<std::string> pieces, const TokenizerConfig& config, MergeRanks ranks, const TokenizerSettings& settings)
    : HfTokenizer(std::move(pieces), config,
                  {{SpecialToken::kBos, "<|endoftext|>"}, {SpecialToken::kEos, "<|endoftext|>"}, {SpecialToken::kUnk, "<|endoftext|>"}}),
      ranks_(std::move(ranks)),
      add_prefix_space_(config.flag("add_prefix_space", false)),
      add_bos_token_(config.flag("add_bos_token", false)),
      use_regex_(settings.use_regex),
      cache_(std::make_shared<WordCache>()) {
  TFM_CHECK(!add_bos_token_ || special_id(SpecialToken::kBos), config.path() << ": add_bos_token is true, but there is no bos_token");
  if (!settings.before) return;
  // GPT2TokenizerFast leaves add_bos_token to the post-processor, GPT2Tokenizer does not:
  // where they would differ, neither is taken.
  TFM_CHECK(!add_bos_token_ || (!settings.before->empty() && settings.before->front() == special_token(SpecialToken::kBos)),
            config.path() << ": tokenizer_config.json's add_bos_token is true, but tokenizer.json's post-processor adds no "
                          << special_token(SpecialToken::kBos) << " (make it a TemplateProcessing that does, or set add_bos_token false)");
  set_frame(*settings.before, *settings.after);
}

std::string ByteLevelBpe::prepare(std::string_view text) const {
  std::string prepared(add_prefix_space_ ? " " : "");
  return prepared.append(text);
}

std::vector<std::string> ByteLevelBpe::add_special_tokens(std::vector<std::string> tokens) const {
  if (add_bos_token_) tokens.insert(tokens.begin(), special_token(SpecialToken::kBos));
  return tokens;
}

std::vector<std::string> ByteLevelBpe::tokenize_plain(std::string_view text, bool /*at_start*/) const {
  std::vector<std::string> tokens;
  // Without the pattern, the text is one word.
  for (const std::string& word : use_regex_ ? split_words(WordPattern::kGpt2, text) : std::vector<std::string>{std::string(text)}) {
    const auto merge = [&](const std::string& symbols) { return bpe_merge(utf8_characters(symbols), ranks_); };
    for (std::string& token : cache_->get(to_byte_level(word), merge)) tokens.push_back(std::move(token));
  }
  return tokens;
}

// The tokens' symbols back to bytes, decoded as Python's bytes.decode("utf-8", "replace").
std::string ByteLevelBpe::join_tokens(const std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const std::string& token : tokens) {
    const std::optional<std::string> token_bytes = from_byte_level(token);
    TFM_CHECK(token_bytes, "cannot decode the token \"" << token << "\": it is not byte-level text");
    bytes += *token_bytes;
  }
  return replace_invalid_utf8(bytes);
}

}  // namespace tfm::data
