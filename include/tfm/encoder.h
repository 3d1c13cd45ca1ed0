#pragma once
// tfm::Encoder: a BERT-style encoder (from `tfm bert train`, or a Hugging Face BERT
// directory): sentence vectors, as `tfm embed` writes them, and a classifier's labels of
// sentences or of their words, as `tfm classify` prints them.
//
//   tfm::Encoder encoder("runs/bert/best.safetensors");
//   tfm::Embeddings e = encoder.embed({"To be, or not to be", "that is the question"});
//   // e.values: [e.count, e.dim], row-major
//
//   tfm::Encoder sentiment("models/bert-sst2");           // a BertForSequenceClassification
//   tfm::SentenceLabels s = sentiment.classify({"a gripping film"});
//   // sentiment.labels()[s.labels[0]]: "POSITIVE"; s.probabilities: [count, classes]
//
//   tfm::Encoder ner("models/bert-ner");                  // a BertForTokenClassification
//   tfm::TaggedSentence t = ner.tag({"Ada Lovelace lived in London"})[0];
//   // t.entities: {"PER", "Ada Lovelace", ...}, {"LOC", "London", ...}
//
// Safe to call from many threads at once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/attention.h"
#include "tfm/model_options.h"

#include "tfm/export.h"

namespace tfm {

struct Embeddings {
  int64_t count = 0, dim = 0;
  std::vector<float> values;  // [count, dim], row-major
  int64_t truncated = 0;      // sentences longer than the model's input, cut to fit
};

// A sentence classifier's verdicts (a BERT whose head is "sequence").
struct SentenceLabels {
  int64_t count = 0, classes = 0;
  std::vector<float> probabilities;  // [count, classes]: a softmax over the labels, or (multi_label) each label's sigmoid
  std::vector<int64_t> labels;       // the most likely label of each sentence
  int64_t truncated = 0;             // sentences longer than the model's input, cut to fit
};

// A token classifier's verdicts on one sentence (a BERT whose head is "token"), by word:
// a word's label is its first piece's (transformers' aggregation "first").
struct TaggedWord {
  std::string text;
  int64_t label = 0;
  float probability = 0;
};
// Words grouped as B-/I- labels say (IOB2; a label without a prefix, or an I- that does
// not continue its type, starts an entity too); "O" is outside every entity.
struct Entity {
  std::string type;                 // the label without its B-/I- prefix: "PER"
  std::string text;                 // its words, as the tokenizer decodes them
  int64_t first_word = 0, end_word = 0;  // words [first_word, end_word) of the sentence
  float score = 0;                  // the mean of its words' probabilities
};
struct TaggedSentence {
  std::vector<TaggedWord> words;
  std::vector<Entity> entities;
  bool truncated = false;
};

class TFM_API Encoder {
 public:
  // Loads the checkpoint; throws std::runtime_error with one line saying what is wrong.
  explicit Encoder(const std::string& checkpoint, const ModelOptions& options = {});
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // One vector per sentence, pooled as sentence-transformers does: "mean" or "max" over
  // every token the model read ([CLS] and [SEP] included), or the "cls" vector; "" takes
  // the model's own (a sentence-transformers directory's Pooling module, else "mean").
  // Scaled to length 1 where `normalize`, or where the model has a Normalize module.
  Embeddings embed(const std::vector<std::string>& sentences, const std::string& pool = "", bool normalize = false) const;
  // A classifier's verdicts: sentences' labels (head "sequence"), words' labels and
  // entities (head "token"); another head is a clear error.
  SentenceLabels classify(const std::vector<std::string>& sentences) const;
  std::vector<TaggedSentence> tag(const std::vector<std::string>& sentences) const;
  // "mlm" (a masked language model), "none" (a bare encoder), "sequence" or "token".
  std::string head() const;
  const std::vector<std::string>& labels() const;  // a classifier's labels in id order (empty otherwise)
  bool multi_label() const;                        // a sequence classifier scoring each label apart
  // Every layer's and head's attention over the sentence's tokens ([CLS] first, then
  // at most max_tokens()), on the calling thread.
  TextAttention attention(const std::string& sentence) const;
  int64_t dim() const;
  int64_t max_tokens() const;  // a sentence's tokens past this many are cut off

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
