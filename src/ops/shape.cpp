#include "ops/shape.h"

#include <cstring>
#include <numeric>

#include "autograd/autograd.h"
#include "threads/parallel.h"
#include "tensor/strided.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

int64_t normalize_dim(int64_t d, int64_t nd) {
  if (d < 0) d += nd;
  TFM_CHECK(d >= 0 && d < nd, "dimension " << d << " out of range for a " << nd << "-d tensor");
  return d;
}

}  // namespace

Tensor gather_rows(const Tensor& x_in, const std::vector<int64_t>& rows) {
  Tensor x = x_in.is_contiguous() ? x_in : x_in.clone();
  Shape shape = x.shape();
  const int64_t row = shape[0] > 0 ? x.numel() / shape[0] : 0;
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(shape);
  for (size_t i = 0; i < rows.size(); ++i) {
    TFM_CHECK(rows[i] >= 0 && rows[i] < x.size(0), "gather_rows: row " << rows[i] << " outside 0.." << x.size(0) - 1);
    std::memcpy(out.data() + i * row, x.data() + rows[i] * row, sizeof(float) * row);
  }
  const Shape x_shape = x.shape();
  return autograd::record(out, "gather_rows", {x_in}, [=](const Tensor& g_in) {
    Tensor g = g_in.is_contiguous() ? g_in : g_in.clone();
    Tensor dx = Tensor::zeros(x_shape);  // a row gathered twice gets both gradients
    for (size_t i = 0; i < rows.size(); ++i) {
      float* d = dx.data() + rows[i] * row;
      const float* gi = g.data() + i * row;
      for (int64_t c = 0; c < row; ++c) d[c] += gi[c];
    }
    return std::vector<Tensor>{dx};
  });
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = x.clone();
  return autograd::record(out, "contiguous", {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor reshape(const Tensor& x, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TFM_CHECK(infer < 0, "reshape: more than one -1 in " << shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) shape[infer] = known ? x.numel() / known : 0;
  TFM_CHECK(shape_numel(shape) == x.numel(), "reshape: cannot view " << shape_str(x.shape()) << " as " << shape_str(shape));
  Tensor base = contiguous(x);
  Tensor out = make_view(base, shape, contiguous_strides(shape), base.impl()->offset);
  Shape in_shape = x.shape();
  return autograd::record(out, "reshape", {base}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{make_view(g, in_shape, contiguous_strides(in_shape), g.impl()->offset)};
  });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& order) {
  const int64_t nd = x.dim();
  TFM_CHECK(static_cast<int64_t>(order.size()) == nd, "permute: order has " << order.size() << " entries for a " << nd << "-d tensor");
  Shape shape(nd), strides(nd);
  std::vector<int64_t> inverse(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = normalize_dim(order[i], nd);
    TFM_CHECK(inverse[d] < 0, "permute: dimension " << d << " repeated");
    inverse[d] = i;
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
  }
  Tensor out = make_view(x, shape, strides, x.impl()->offset);
  return autograd::record(out, "permute", {x}, [inverse](const Tensor& g) {
    return std::vector<Tensor>{permute(g, inverse).clone()};
  });
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  std::vector<int64_t> order(x.dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[normalize_dim(a, x.dim())], order[normalize_dim(b, x.dim())]);
  return permute(x, order);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end) {
  dim = normalize_dim(dim, x.dim());
  const int64_t n = x.shape()[dim];
  TFM_CHECK(0 <= start && start <= end && end <= n, "slice [" << start << ", " << end << ") out of range for size " << n);
  Shape shape = x.shape();
  shape[dim] = end - start;
  Tensor out = make_view(x, shape, x.strides(), x.impl()->offset + start * x.strides()[dim]);
  Shape in_shape = x.shape();
  // The gradient goes into its window of the input's gradient, which sibling slices share.
  return autograd::record_view(out, "slice", x, [in_shape, dim, start, end](const Tensor& g, Tensor& grad) {
    const bool fresh = !grad.defined();
    if (fresh) grad = Tensor::zeros(in_shape);
    Tensor window = slice(grad, dim, start, end);
    fresh ? strided_copy(g, window) : strided_add(g, window);
  });
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  TFM_CHECK(!xs.empty(), "concat of no tensors");
  dim = normalize_dim(dim, xs[0].dim());
  Shape shape = xs[0].shape();
  shape[dim] = 0;
  std::vector<int64_t> starts;
  for (const Tensor& t : xs) {
    TFM_CHECK(t.dim() == xs[0].dim(), "concat: rank mismatch");
    for (int64_t d = 0; d < t.dim(); ++d)
      TFM_CHECK(d == dim || t.shape()[d] == xs[0].shape()[d],
                "concat: shapes " << shape_str(xs[0].shape()) << " and " << shape_str(t.shape()) << " differ off dim " << dim);
    starts.push_back(shape[dim]);
    shape[dim] += t.shape()[dim];
  }
  Tensor out = Tensor::empty(shape);
  for (size_t i = 0; i < xs.size(); ++i) {
    Tensor window = make_view(out, xs[i].shape(), out.strides(), starts[i] * out.strides()[dim]);
    strided_copy(xs[i], window);
  }
  std::vector<int64_t> sizes;
  for (const Tensor& t : xs) sizes.push_back(t.shape()[dim]);
  return autograd::record(out, "concat", xs, [starts, sizes, dim](const Tensor& g) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < starts.size(); ++i) grads.push_back(slice(g, dim, starts[i], starts[i] + sizes[i]).clone());
    return grads;
  });
}

Tensor patchify(const Tensor& images, int64_t P) {
  TFM_CHECK(images.dim() == 4 && images.size(2) % P == 0 && images.size(3) % P == 0,
            "patchify: expected images [batch, C, H, W] with H and W multiples of " << P << ", got " << shape_str(images.shape()));
  const Tensor x = ops::contiguous(images);
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), gh = H / P, gw = W / P;
  Tensor out = Tensor::empty({B, gh * gw, C * P * P});
  const float* src = x.data();
  float* dst = out.data();
  parallel_for(B * gh * gw, B * gh * gw > 256, [&](int64_t patch) {  // patch n of image b
    const int64_t b = patch / (gh * gw), n = patch % (gh * gw);
    float* row = dst + patch * C * P * P;
    const int64_t y0 = (n / gw) * P, x0 = (n % gw) * P;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t dy = 0; dy < P; ++dy)
        for (int64_t dx = 0; dx < P; ++dx) *row++ = src[((b * C + c) * H + y0 + dy) * W + x0 + dx];
  });
  return out;
}

}  // namespace tfm::ops
