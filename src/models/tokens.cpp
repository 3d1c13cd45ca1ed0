#include "models/tokens.h"

#include "ops/convert.h"
#include "ops/shape.h"

namespace tfm::models {

ops::AttentionMask padding_mask(const Tokens& t, int pad_id, Device device, bool causal) {
  ops::AttentionMask m;
  m.key_padding = ops::to(ops::equal(t.ids, pad_id), device);
  m.causal = causal;
  return m;
}

Unpadded unpad(const Tokens& t, int pad_id) {
  Unpadded u;
  std::vector<int64_t> positions;
  auto sequences = std::make_shared<ops::PackedSequences>();
  for (int64_t r = 0; r < t.rows(); ++r) {
    sequences->start.push_back(static_cast<int64_t>(positions.size()));
    for (int64_t c = 0; c < t.cols(); ++c)
      if (t.at(r, c) != pad_id) positions.push_back(r * t.cols() + c);
    sequences->length.push_back(static_cast<int64_t>(positions.size()) - sequences->start.back());
  }
  u.positions = Tensor::from_values(positions);
  u.sequences = std::move(sequences);
  return u;
}

Tensor at_tokens(const Tensor& x, const Unpadded& u) {
  const int64_t tokens = u.positions.numel(), features = x.size(-1);
  return ops::reshape(ops::gather_rows(ops::reshape(x, {-1, features}), u.positions), {1, tokens, features});
}

}  // namespace tfm::models
