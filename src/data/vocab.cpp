#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <zlib.h>

#include <filesystem>

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

uint32_t crc_of(const std::string& bytes) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

}  // namespace

Vocab Vocab::load(const std::string& path) {
  Vocab v;
  v.sp_ = std::make_shared<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = v.sp_->Load(path);
  } catch (const std::exception& e) {  // the library throws on some malformed models (e.g. an empty piece)
    TFM_CHECK(false, path << ": not a valid SentencePiece model (" << e.what() << ")");
  }
  TFM_CHECK(status.ok(), path << ": not a valid SentencePiece model (" << status.ToString() << ")");
  TFM_CHECK(v.sp_->pad_id() == kPad && v.sp_->unk_id() == kUnk && v.sp_->bos_id() == kBos && v.sp_->eos_id() == kEos,
            path << ": special token ids must be pad 0, unk 1, bos 2, eos 3 (train the vocabulary with `tfm vocab`)");
  v.checksum_ = crc_of(v.sp_->serialized_model_proto());
  v.path_ = std::filesystem::absolute(path).lexically_normal().string();  // what checkpoints record: valid from any directory
  return v;
}

void Vocab::train(const std::vector<std::string>& sentences, const VocabOptions& o, const std::string& path) {
  TFM_CHECK(!sentences.empty(), "vocabulary: no training sentences");
  TFM_CHECK(o.model_type == "bpe" || o.model_type == "unigram", "vocabulary: model type must be bpe or unigram, not " << o.model_type);
  TFM_CHECK(o.size > 4, "vocabulary: size must exceed the 4 special tokens");
  std::vector<std::string> sample = sentences;
  if (static_cast<int64_t>(sample.size()) > o.max_sentences) {
    Rng rng(17);
    for (size_t i = sample.size() - 1; i > 0; --i) std::swap(sample[i], sample[rng.randint(0, static_cast<int64_t>(i) + 1)]);
    sample.resize(static_cast<size_t>(o.max_sentences));
  }
  VectorIterator it(sample);
  std::string proto;
  const std::unordered_map<std::string, std::string> args{
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
      {"minloglevel", "2"},
      {"num_threads", "2"},
  };
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  TFM_CHECK(status.ok(), "vocabulary training failed: " << status.ToString());
  io::write_file_atomic(path, proto);
}

std::vector<int> Vocab::encode(const std::string& text) const {
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  TFM_CHECK(status.ok(), "cannot tokenize: " << status.ToString());
  return ids;
}

std::string Vocab::decode(const std::vector<int>& ids) const {
  std::vector<int> plain;
  for (int id : ids)
    if (id != kPad && id != kBos && id != kEos) plain.push_back(id);
  std::string text;
  auto status = sp_->Decode(plain, &text);
  TFM_CHECK(status.ok(), "cannot detokenize: " << status.ToString());
  return text;
}

std::string Vocab::piece(int id) const { return sp_->IdToPiece(id); }
int Vocab::size() const { return sp_->GetPieceSize(); }

std::string locate_recorded_vocab(const std::string& recorded, const std::string& checkpoint, const std::string& flag) {
  namespace fs = std::filesystem;
  const fs::path beside = fs::path(checkpoint).parent_path() / fs::path(recorded).filename();
  std::error_code ec;
  if (fs::exists(recorded, ec)) return recorded;
  if (fs::exists(beside, ec)) return beside.string();
  throw Error(checkpoint + ": its vocabulary " + recorded + " is not there, nor at " + beside.string() + "; give the file with " + flag);
}

}  // namespace tfm::data
