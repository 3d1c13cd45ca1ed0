#include "tfm/encoder.h"

#include <algorithm>
#include <cmath>

#include "api/inference.h"
#include "autograd/autograd.h"
#include "data/text.h"
#include "decode/embedding.h"
#include "decode/entities.h"
#include "ops/convert.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "tensor/error.h"

namespace tfm {

struct Encoder::Impl : api::FamilyModel<models::BERT> {
  decode::SentenceEmbedding embedding;
  std::vector<std::string> labels;
  Impl(const std::string& path, const ModelOptions& o)
      : FamilyModel(path, "bert", "an encoder from `tfm bert train` or a Hugging Face BERT (a ViT's images: tfm embed --image, tfm vit eval)", o,
                    data::Tokenizer::kPad),
        embedding(decode::recorded_sentence_embedding(checkpoint.file.metadata, path)),
        labels(model.config().classifies_text() ? decode::recorded_text_labels(checkpoint.file.metadata, model.config().classes, path)
                                                : std::vector<std::string>{}) {}

  // The ids the model reads of each sentence ([CLS] first, within its input and a
  // sentence-transformers max_seq_length), each checked first as the translator and the
  // generator check text.
  std::vector<std::vector<int>> read(const std::vector<std::string>& sentences, int64_t& truncated, std::vector<bool>* cut = nullptr) const {
    for (size_t i = 0; i < sentences.size(); ++i) {
      const char* problem = data::text_problem(sentences[i]);
      TFM_CHECK(!problem, "sentence " << i + 1 << ": " << problem);
    }
    const int64_t limit = std::min(model.config().max_len, embedding.max_tokens.value_or(model.config().max_len));
    std::vector<std::vector<int>> ids;
    for (const std::string& s : sentences) {
      bool was_cut = false;
      ids.push_back(checkpoint.tokenizer->sentence(s, limit, &was_cut));
      truncated += was_cut;
      if (cut) cut->push_back(was_cut);
    }
    return ids;
  }

  // The classifier's probabilities of one sentence: [classes] (sequence) or [len, classes]
  // (token), each row a softmax, or each label's sigmoid (multi_label).
  std::vector<float> probabilities(const std::vector<int>& ids) {
    autograd::NoGradGuard no_grad;
    const int64_t len = static_cast<int64_t>(ids.size());
    const Tensor scores = ops::contiguous(ops::to(model.classify(model.encode({ids, 1, len})), Device::CPU));
    std::vector<float> p = scores.to_vector();
    expect_finite(p.data(), p.size(), "label scores");
    if (model.config().multi_label) {
      for (float& x : p) x = 1.0f / (1.0f + std::exp(-x));
      return p;
    }
    return ops::softmax(scores).to_vector();
  }

  void expect_head(const char* head, const char* what) const {
    TFM_CHECK(model.config().head == head, checkpoint.path << ": " << what << " needs a " << (std::string(head) == "sequence" ? "sentence" : "token")
                                                           << " classifier (a BertFor" << (std::string(head) == "sequence" ? "Sequence" : "Token")
                                                           << "Classification); this encoder's head is " << model.config().head);
  }
};

namespace {

// Whether a piece continues the word before it: WordPiece marks continuations ("##ing"),
// SentencePiece marks word starts ("▁the"); tfm's characters are each a word.
bool continues_word(const std::string& piece, const std::string& tokenizer) {
  if (tokenizer == "WordPiece") return piece.starts_with("##");
  return tokenizer == "SentencePiece" && !piece.starts_with("\xE2\x96\x81");
}

// The sentence's entities: its words grouped by their labels (decode::group_entities),
// each with its words' decoded text and their mean probability.
std::vector<Entity> entities_of(const std::vector<TaggedWord>& words, const std::vector<std::vector<int>>& word_ids,
                                const std::vector<std::string>& labels, const data::Tokenizer& tokenizer) {
  std::vector<std::string> word_labels;
  for (const TaggedWord& w : words) word_labels.push_back(labels[static_cast<size_t>(w.label)]);
  std::vector<Entity> out;
  for (const decode::EntitySpan& span : decode::group_entities(word_labels)) {
    std::vector<int> ids;
    float sum = 0;
    for (int64_t w = span.first; w < span.end; ++w) {
      ids.insert(ids.end(), word_ids[static_cast<size_t>(w)].begin(), word_ids[static_cast<size_t>(w)].end());
      sum += words[static_cast<size_t>(w)].probability;
    }
    std::string text = tokenizer.decode(ids);
    if (std::find(ids.begin(), ids.end(), tokenizer.unk_id()) != ids.end()) {  // ([UNK] decodes to nothing: the words' texts)
      text.clear();
      for (int64_t w = span.first; w < span.end; ++w) text += (w > span.first ? " " : "") + words[static_cast<size_t>(w)].text;
    }
    out.push_back({span.type, text, span.first, span.end, sum / static_cast<float>(span.end - span.first)});
  }
  return out;
}

}  // namespace

Encoder::Encoder(const std::string& checkpoint, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Encoder::~Encoder() = default;

int64_t Encoder::dim() const { return impl_->model.config().d_model; }

int64_t Encoder::max_tokens() const {  // the input's length less [CLS] (and [SEP], where the tokenizer ends sentences so)
  const int64_t limit = std::min(impl_->model.config().max_len, impl_->embedding.max_tokens.value_or(impl_->model.config().max_len));
  return limit - static_cast<int64_t>(impl_->checkpoint.tokenizer->sentence("", limit).size());
}

std::string Encoder::head() const { return impl_->model.config().head; }
const std::vector<std::string>& Encoder::labels() const { return impl_->labels; }
bool Encoder::multi_label() const { return impl_->model.config().multi_label; }

TextAttention Encoder::attention(const std::string& sentence) const {
  int64_t truncated = 0;
  const std::vector<int> ids = impl_->read({sentence}, truncated)[0];  // as embed() reads it
  nn::AttentionMaps maps;
  {
    autograd::NoGradGuard no_grad;
    impl_->model.encode({ids, 1, static_cast<int64_t>(ids.size())}, &maps);
  }
  return api::text_attention(ids, maps, *impl_->checkpoint.tokenizer);
}

Embeddings Encoder::embed(const std::vector<std::string>& sentences, const std::string& pool, bool normalize) const {
  const decode::Pooling pooling = pool.empty() ? impl_->embedding.pool : decode::parse_pooling(pool);
  Embeddings e{static_cast<int64_t>(sentences.size()), dim(), {}, 0};
  e.values.reserve(sentences.size() * static_cast<size_t>(e.dim));
  for (const std::vector<int>& ids : impl_->read(sentences, e.truncated)) {
    const std::vector<float> v = decode::sentence_vector(impl_->model, ids, pooling, normalize || impl_->embedding.normalize);
    e.values.insert(e.values.end(), v.begin(), v.end());
  }
  return e;
}

SentenceLabels Encoder::classify(const std::vector<std::string>& sentences) const {
  impl_->expect_head("sequence", "classify");
  const int64_t K = impl_->model.config().classes;
  SentenceLabels out{static_cast<int64_t>(sentences.size()), K, {}, {}, 0};
  for (const std::vector<int>& ids : impl_->read(sentences, out.truncated)) {
    const std::vector<float> p = impl_->probabilities(ids);  // [classes]
    out.probabilities.insert(out.probabilities.end(), p.begin(), p.end());
    out.labels.push_back(std::max_element(p.begin(), p.end()) - p.begin());
  }
  return out;
}

std::vector<TaggedSentence> Encoder::tag(const std::vector<std::string>& sentences) const {
  impl_->expect_head("token", "tag");
  const data::Tokenizer& tokenizer = *impl_->checkpoint.tokenizer;
  const std::string kind = tokenizer.describe();
  const int64_t K = impl_->model.config().classes;
  int64_t truncated = 0;
  std::vector<bool> cut;
  const std::vector<std::vector<int>> all = impl_->read(sentences, truncated, &cut);
  std::vector<TaggedSentence> out;
  for (size_t s = 0; s < all.size(); ++s) {
    const std::vector<int>& ids = all[s];
    const std::vector<float> p = impl_->probabilities(ids);  // [len, classes]
    TaggedSentence t{{}, {}, cut[s]};
    std::vector<std::vector<int>> word_ids;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (tokenizer.is_special(ids[i]) && ids[i] != tokenizer.unk_id()) continue;  // [CLS], [SEP] (an unknown word is a word)
      if (!word_ids.empty() && continues_word(tokenizer.piece(ids[i]), kind)) {
        word_ids.back().push_back(ids[i]);
        continue;
      }
      const float* row = p.data() + i * static_cast<size_t>(K);
      const int64_t label = std::max_element(row, row + K) - row;
      t.words.push_back({"", label, row[label]});
      word_ids.push_back({ids[i]});
    }
    for (size_t w = 0; w < t.words.size(); ++w)  // ([UNK] decodes to nothing: named)
      t.words[w].text = word_ids[w] == std::vector<int>{tokenizer.unk_id()} ? tokenizer.piece(tokenizer.unk_id()) : tokenizer.decode(word_ids[w]);
    t.entities = entities_of(t.words, word_ids, impl_->labels, tokenizer);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tfm
