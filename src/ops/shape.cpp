#include "ops/shape.h"

#include <numeric>
#include <string>

#include "autograd/autograd.h"
#include "ops/dispatch.h"
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

Tensor gather_rows(const Tensor& x_in, const Tensor& rows) {
  expect_dtype("gather_rows", "the row indices", rows, DType::i64);
  TFM_CHECK(x_in.dim() >= 1 && rows.dim() == 1, "gather_rows: rows " << shape_str(rows.shape()) << " of " << shape_str(x_in.shape()));
  const int64_t n = x_in.size(0);
  const Tensor index = checked_indices(rows, n, x_in.device(), [n](int64_t r) {
    return "gather_rows: row " + std::to_string(r) + " outside 0.." + std::to_string(n - 1);
  });
  auto fn = kernel("gather_rows", &Kernels::gather_rows, {x_in, index});
  const Tensor x = dense(x_in);
  Shape shape = x.shape();
  shape[0] = index.numel();
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  fn(x, index, out);
  const Shape x_shape = x.shape();
  return autograd::record(out, "gather_rows", {x_in}, [index, x_shape](const Tensor& g) {
    Tensor dx = Tensor::empty(x_shape, DType::f32, g.device());
    kernel("gather_rows", &Kernels::gather_rows_backward, {index, g})(index, dense(g), dx);
    return std::vector<Tensor>{dx};
  });
}

Tensor equal(const Tensor& x, int64_t value) {
  auto fn = kernel("equal", &Kernels::equal, {x});
  expect_dtype("equal", "its input", x, DType::i32);
  Tensor out = Tensor::empty(x.shape(), DType::boolean, x.device());
  fn(dense(x), value, out);
  return out;
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
    if (fresh) grad = Tensor::zeros(in_shape, g.device());
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
  for (const Tensor& t : xs) expect_dtype("concat", "every tensor", t, xs[0].dtype());
  Tensor out = Tensor::empty(shape, xs[0].dtype(), device_of("concat", {xs[0]}));
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
  auto fn = kernel("patchify", &Kernels::patchify, {images});
  TFM_CHECK(images.dim() == 4 && P > 0 && images.size(2) % P == 0 && images.size(3) % P == 0,
            "patchify: expected images [batch, C, H, W] with H and W multiples of " << P << ", got " << shape_str(images.shape()));
  expect_dtype("patchify", "the images", images, DType::f32);
  const int64_t B = images.size(0), C = images.size(1), n = (images.size(2) / P) * (images.size(3) / P);
  Tensor out = Tensor::empty({B, n, C * P * P}, DType::f32, images.device());
  fn(dense(images), P, out);
  return out;
}

}  // namespace tfm::ops
