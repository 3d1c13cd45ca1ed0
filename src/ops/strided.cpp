#include "ops/strided.h"

#include "tensor/error.h"

namespace tfm::ops {

Shape broadcast_strides(const Shape& in_shape, const Shape& in_strides, const Shape& out_shape) {
  const size_t nd = out_shape.size(), ni = in_shape.size();
  TFM_CHECK(ni <= nd, "cannot broadcast " << shape_str(in_shape) << " to " << shape_str(out_shape));
  Shape st(nd, 0);
  for (size_t i = 0; i < ni; ++i) {
    size_t o = nd - ni + i;
    if (in_shape[i] == out_shape[o]) {
      st[o] = in_strides[i];
    } else {
      TFM_CHECK(in_shape[i] == 1, "cannot broadcast " << shape_str(in_shape) << " to " << shape_str(out_shape));
    }
  }
  return st;
}

}  // namespace tfm::ops
