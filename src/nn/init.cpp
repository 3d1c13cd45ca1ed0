#include "nn/init.h"

#include <cmath>

#include "ops/random.h"
#include "tensor/error.h"

namespace tfm::nn::init {

void xavier_uniform_(Tensor& t, Rng& rng) {
  TFM_CHECK(t.dim() >= 2, "xavier_uniform_ needs a tensor of at least 2 dimensions");
  const int64_t receptive = t.numel() / (t.size(0) * t.size(1));
  const double fan_in = static_cast<double>(t.size(1) * receptive), fan_out = static_cast<double>(t.size(0) * receptive);
  const float bound = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
  ops::uniform_(t, -bound, bound, rng);
}

}  // namespace tfm::nn::init
