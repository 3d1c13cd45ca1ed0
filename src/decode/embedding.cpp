#include "decode/embedding.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "ops/convert.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::decode {

namespace {

const char* name_of(Pooling p) { return p == Pooling::cls ? "cls" : p == Pooling::max ? "max" : "mean"; }

// v / ||v|| (sentence-transformers' Normalize: torch's normalize, whose divisor is at least 1e-12).
void scale_to_unit_length(std::vector<double>& v) {
  double squares = 0;
  for (double x : v) squares += x * x;
  const double norm = std::max(std::sqrt(squares), 1e-12);
  for (double& x : v) x /= norm;
}

}  // namespace

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::mean;
  if (name == "cls") return Pooling::cls;
  if (name == "max") return Pooling::max;
  TFM_CHECK(false, "unknown pooling '" << name << "' (mean, cls or max)");
  return Pooling::mean;
}

std::vector<float> sentence_vector(models::BERT& model, const std::vector<int>& ids, Pooling pool, bool normalize) {
  autograd::NoGradGuard no_grad;
  const int64_t len = static_cast<int64_t>(ids.size()), D = model.config().d_model;
  const Tensor hidden = ops::contiguous(ops::to(model.encode({ids, 1, len}), Device::CPU));  // [1, len, d_model]
  const float* h = hidden.data();
  const int64_t last = pool == Pooling::cls ? 1 : len;
  std::vector<double> out(static_cast<size_t>(D), pool == Pooling::max ? -INFINITY : 0.0);
  for (int64_t t = 0; t < last; ++t)
    for (int64_t i = 0; i < D; ++i) {
      double& o = out[static_cast<size_t>(i)];
      o = pool == Pooling::max ? std::max(o, static_cast<double>(h[t * D + i])) : o + h[t * D + i];
    }
  if (pool == Pooling::mean)
    for (double& o : out) o /= static_cast<double>(len);
  if (normalize) scale_to_unit_length(out);
  std::vector<float> vector(out.begin(), out.end());
  expect_finite(vector.data(), vector.size(), "embeddings");
  return vector;
}

std::string sentence_embedding_record(const SentenceEmbedding& e) {
  nlohmann::json j = {{"pool", name_of(e.pool)}, {"normalize", e.normalize}};
  if (e.max_tokens) j["max_tokens"] = *e.max_tokens;
  return j.dump();
}

SentenceEmbedding recorded_sentence_embedding(const std::map<std::string, std::string>& metadata, const std::string& origin) {
  const auto it = metadata.find(kSentenceEmbeddingKey);
  if (it == metadata.end()) return {};
  const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  const bool valid = j.is_object() && j.value("pool", nlohmann::json()).is_string() && j.value("normalize", nlohmann::json()).is_boolean() &&
                     (!j.contains("max_tokens") || j["max_tokens"].is_number_integer());
  TFM_CHECK(valid, origin << ": the record " << kSentenceEmbeddingKey << " in the metadata is malformed");
  SentenceEmbedding e{parse_pooling(j["pool"].get<std::string>()), j["normalize"].get<bool>(), std::nullopt};
  if (j.contains("max_tokens")) e.max_tokens = j["max_tokens"].get<int64_t>();
  return e;
}

}  // namespace tfm::decode
