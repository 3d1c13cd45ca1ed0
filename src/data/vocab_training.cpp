// Training a SentencePiece vocabulary (`tfm vocab`): in a file of its own, so that a
// program that only loads vocabularies (libtfm.so) does not link SentencePiece's trainer.
#include <sentencepiece_trainer.h>

#include <chrono>
#include <iomanip>
#include <regex>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "data/vocab.h"
#include "io/output_file.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::data {

namespace {

// Feeds in-memory sentences to the SentencePiece trainer.
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

// SentencePiece silently drops sentences over max_sentence_length bytes (4192 by default),
// and its BPE trainer aborts the process on words of 65,536 characters or more.
constexpr size_t kMaxSentenceBytes = 4096;

// Appends `line` to `out` in pieces of at most kMaxSentenceBytes, cut at a space where
// there is one (BPE and unigram split at spaces anyway), else between UTF-8 characters,
// so that long lines count instead of vanishing.
void append_sentence_pieces(std::string_view line, std::vector<std::string>& out) {
  while (line.size() > kMaxSentenceBytes) {
    size_t cut = line.rfind(' ', kMaxSentenceBytes);
    if (cut == std::string_view::npos || cut == 0)
      for (cut = kMaxSentenceBytes; (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80;) --cut;
    out.emplace_back(line.substr(0, cut));
    line.remove_prefix(cut);
  }
  out.emplace_back(line);
}

// SentencePiece's failures in tfm's words: the vocabulary sizes that work, named by
// `tfm vocab`'s flag, instead of its source locations and its own option names.
std::string training_failure(const std::string& message, const VocabOptions& o) {
  std::smatch m;
  std::ostringstream os;
  if (std::regex_search(message, m, std::regex(R"(smaller than required_chars\. \d+ vs (\d+))")))
    os << "a vocabulary of " << o.size << " pieces is too small for " << o.origin << ": its " << std::stoll(m[1]) - 4
       << " distinct characters and the 4 special tokens need --size " << m[1] << " or more";
  else if (std::regex_search(message, m, std::regex(R"(Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+))")))
    os << "a vocabulary of " << o.size << " pieces is too large for " << o.origin << ", which yields at most " << m[1]
       << "; use --size " << m[1] << " or less, or more text";
  else if (message.find("!sentences_.empty()") != std::string::npos)
    os << "no text in " << o.origin << " is left to train a vocabulary on after Unicode normalization (only blank characters?)";
  else
    os << "vocabulary training on " << o.origin << " failed: SentencePiece says " << message;
  return os.str();
}

// The lines with text (SentencePiece would skip the blank ones), a random sample of
// o.max_sentences when there are more.
std::vector<std::string> training_lines(const std::vector<std::string>& sentences, const VocabOptions& o) {
  std::vector<std::string> lines;
  for (const std::string& s : sentences)
    if (s.find_first_not_of(" \t") != std::string::npos) lines.push_back(s);
  TFM_CHECK(!lines.empty(), "no non-empty lines in " << o.origin << " to train a vocabulary on");
  if (static_cast<int64_t>(lines.size()) > o.max_sentences) {
    Rng rng(17);
    for (size_t i = lines.size() - 1; i > 0; --i) std::swap(lines[i], lines[rng.randint(0, static_cast<int64_t>(i) + 1)]);
    lines.resize(static_cast<size_t>(o.max_sentences));
  }
  return lines;
}

}  // namespace

void Vocab::train(const std::vector<std::string>& sentences, const VocabOptions& o, const std::string& path) {
  TFM_CHECK(o.model_type == "bpe" || o.model_type == "unigram", "vocabulary: model type must be bpe or unigram, not " << o.model_type);
  TFM_CHECK(o.size > 4, "vocabulary: size must exceed the 4 special tokens");
  const std::vector<std::string> lines = training_lines(sentences, o);
  std::vector<std::string> pieces;
  for (const std::string& line : lines) append_sentence_pieces(line, pieces);
  if (o.progress)
    *o.progress << "training a " << o.size << "-piece " << o.model_type << " vocabulary on " << lines.size()
                << (lines.size() == 1 ? " sentence" : " sentences") << " of " << o.origin << "..." << std::endl;
  const auto start = std::chrono::steady_clock::now();
  VectorIterator it(pieces);
  std::string proto;
  const std::unordered_map<std::string, std::string> args{
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
      {"minloglevel", "2"},
      {"num_threads", "2"},
  };
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  TFM_CHECK(status.ok(), training_failure(status.message(), o));
  io::write_file_atomic(path, proto);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.progress) *o.progress << "trained in " << std::fixed << std::setprecision(1) << seconds << " s" << std::defaultfloat << std::endl;
}

}  // namespace tfm::data
