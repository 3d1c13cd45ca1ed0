#include "tfm/encoder.h"

#include <algorithm>

#include "api/inference.h"
#include "autograd/autograd.h"
#include "data/text.h"
#include "decode/embedding.h"
#include "tensor/error.h"

namespace tfm {

struct Encoder::Impl : api::FamilyModel<models::BERT> {
  Impl(const std::string& path, const ModelOptions& o)
      : FamilyModel(path, "bert", "an encoder from `tfm bert train`", o, data::Tokenizer::kPad) {}
};

Encoder::Encoder(const std::string& checkpoint, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Encoder::~Encoder() = default;

int64_t Encoder::dim() const { return impl_->model.config().d_model; }

int64_t Encoder::max_tokens() const { return impl_->model.config().max_len - 1; }

TextAttention Encoder::attention(const std::string& sentence) const {
  const char* problem = data::text_problem(sentence);
  TFM_CHECK(!problem, "the sentence: " << problem);
  const std::vector<int> ids = impl_->checkpoint.tokenizer->sentence(sentence, impl_->model.config().max_len);  // as embed() reads it
  nn::AttentionMaps maps;
  {
    autograd::NoGradGuard no_grad;
    impl_->model.encode({ids, 1, static_cast<int64_t>(ids.size())}, &maps);
  }
  return api::text_attention(ids, maps, *impl_->checkpoint.tokenizer);
}

Embeddings Encoder::embed(const std::vector<std::string>& sentences, const std::string& pool) const {
  const decode::Pooling pooling = decode::parse_pooling(pool);
  Embeddings e{static_cast<int64_t>(sentences.size()), dim(), {}, 0};
  e.values.reserve(sentences.size() * static_cast<size_t>(e.dim));
  for (size_t i = 0; i < sentences.size(); ++i) {
    const char* problem = data::text_problem(sentences[i]);  // as the translator and the generator refuse such text
    TFM_CHECK(!problem, "sentence " << i + 1 << ": " << problem);
  }
  for (const std::string& s : sentences) {
    bool truncated = false;
    const std::vector<int> ids = impl_->checkpoint.tokenizer->sentence(s, impl_->model.config().max_len, &truncated);
    const std::vector<float> v = decode::sentence_vector(impl_->model, ids, pooling);
    e.values.insert(e.values.end(), v.begin(), v.end());
    e.truncated += truncated;
  }
  return e;
}

}  // namespace tfm
