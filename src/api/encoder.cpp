#include "tfm/encoder.h"

#include "decode/embedding.h"
#include "decode/family_checkpoint.h"
#include "io/checkpoint.h"
#include "ops/reduced_precision.h"

namespace tfm {

struct Encoder::Impl {
  decode::FamilyCheckpoint checkpoint;
  models::BERT model;

  Impl(const std::string& path, const EncoderOptions& o)
      : checkpoint(decode::open_family_checkpoint(path, "bert", "an encoder from `tfm bert train`", o.vocab)),
        model(checkpoint.config, data::Tokenizer::kPad) {
    io::load_parameters(model.named_parameters(), checkpoint.file, path);
    checkpoint.file = {};  // the weights are in the model now
    model.eval();
    model.products().set_precision(ops::parse_precision(o.precision));
    model.products().freeze();
  }
};

Encoder::Encoder(const std::string& checkpoint, const EncoderOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Encoder::~Encoder() = default;

int64_t Encoder::dim() const { return impl_->model.config().d_model; }

int64_t Encoder::max_tokens() const { return impl_->model.config().max_len - 1; }

Embeddings Encoder::embed(const std::vector<std::string>& sentences, const std::string& pool) const {
  const decode::Pooling pooling = decode::parse_pooling(pool);
  Embeddings e{static_cast<int64_t>(sentences.size()), dim(), {}, 0};
  e.values.reserve(sentences.size() * static_cast<size_t>(e.dim));
  for (const std::string& s : sentences) {
    bool truncated = false;
    const std::vector<float> v = decode::sentence_vector(impl_->model, impl_->checkpoint.tokenizer->encode(s), pooling, &truncated);
    e.values.insert(e.values.end(), v.begin(), v.end());
    e.truncated += truncated;
  }
  return e;
}

}  // namespace tfm
