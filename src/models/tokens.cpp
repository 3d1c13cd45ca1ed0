#include "models/tokens.h"

namespace tfm::models {

ops::AttentionMask padding_mask(const Tokens& t, int pad_id, bool causal) {
  ops::AttentionMask m;
  m.key_padding.resize(t.ids.size());
  for (size_t i = 0; i < t.ids.size(); ++i) m.key_padding[i] = t.ids[i] == pad_id;
  m.causal = causal;
  return m;
}

}  // namespace tfm::models
