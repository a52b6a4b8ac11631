// Views and layout ops. reshape/transpose/narrow share storage with their input (like PyTorch);
// their backward routes the gradient back into the input's layout.
#include <cstring>

#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace mg {

namespace {

// A zero tensor of `shape` whose [start, start+len) slice along dim is `g`: the backward of
// narrow. (cat's backward is the other way round: it narrows its gradient into the pieces.)
Tensor embed_slice(const Tensor& g_in, const Shape& shape, int dim, int64_t start) {
  if (g_in.is_cuda()) {  // a strided copy into the slice's view of the zeros
    Tensor out = Tensor::zeros(shape, Device::CUDA);
    CudaLayout slice = cuda_layout(out);
    slice.shape[dim] = g_in.shape()[dim];
    slice.offset = start * slice.strides[dim];
    cuda_copy_strided(g_in.impl().storage->data, cuda_layout(g_in), out.data_ptr(), slice);
    return out;
  }
  const Tensor g = contiguous_data(g_in);
  Tensor out = Tensor::zeros(shape);
  const DimSplit s = split_at(shape, dim);
  const int64_t len = g.shape()[dim];
  const int64_t block = len * s.inner;  // contiguous run per outer index
  const float* src = g.data();
  float* dst = out.data();
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + o * s.n * s.inner + start * s.inner, src + o * block, sizeof(float) * block);
  return out;
}

}  // namespace

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  // The same values in another memory order: the gradient passes through unchanged.
  return record("contiguous", copy_contiguous(x), {x},
                [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor reshape(const Tensor& x, const Shape& shape_in) {
  Shape shape = shape_in;
  int64_t known = 1;
  int infer = -1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (shape[d] == -1) {
      if (infer >= 0) throw ShapeError("reshape: more than one -1 in " + shape_str(shape_in));
      infer = d;
    } else {
      known *= shape[d];
    }
  }
  if (infer >= 0 && known > 0 && x.numel() % known == 0) shape[infer] = x.numel() / known;
  if (numel_of(shape) != x.numel() || (infer >= 0 && shape[infer] < 0))
    throw ShapeError("reshape: cannot view " + shape_str(x.shape()) + " (" +
                     std::to_string(x.numel()) + " elements) as " + shape_str(shape_in));
  const Tensor base = contiguous_data(x);
  Tensor out = make_view(base, shape, contiguous_strides(shape), base.impl().offset);
  // Element k of the output is element k of the input (row-major order), so the gradient is g
  // read back in the input's shape.
  const Shape in_shape = x.shape();
  return record("reshape", out, {x},
                [in_shape](const Tensor& g) { return std::vector<Tensor>{reshape(g, in_shape)}; });
}

Tensor unsqueeze(const Tensor& x, int dim) {
  const int d = normalize_dim("unsqueeze", dim, x.dim() + 1);
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return reshape(x, shape);
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
  const int d0 = normalize_dim("transpose", dim0, x.dim()),
            d1 = normalize_dim("transpose", dim1, x.dim());
  Shape shape = x.shape(), strides = x.strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  Tensor out = make_view(x, shape, strides, x.impl().offset);
  // out[.., i, .., j, ..] = x[.., j, .., i, ..]: swapping the same two dims of g undoes it.
  return record("transpose", out, {x},
                [d0, d1](const Tensor& g) { return std::vector<Tensor>{transpose(g, d0, d1)}; });
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
  const int d = normalize_dim("narrow", dim, x.dim());
  if (start < 0 || length < 0 || start + length > x.shape()[d])
    throw ShapeError("narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                     ") is outside dim " + std::to_string(dim) + " of " + shape_str(x.shape()));
  Shape shape = x.shape();
  shape[d] = length;
  Tensor out = make_view(x, shape, x.strides(), x.impl().offset + start * x.strides()[d]);
  // Entries outside the slice did not reach the output: their gradient is zero, the slice's is g.
  const Shape in_shape = x.shape();
  return record("narrow", out, {x}, [in_shape, d, start](const Tensor& g) {
    return std::vector<Tensor>{embed_slice(g, in_shape, d, start)};
  });
}

Tensor cat(const std::vector<Tensor>& xs, int dim) {
  if (xs.empty()) throw ShapeError("cat: needs at least one tensor");
  const int d = normalize_dim("cat", dim, xs[0].dim());
  Shape shape = xs[0].shape();
  shape[d] = 0;
  for (const Tensor& x : xs) {
    Shape a = x.shape(), b = xs[0].shape();
    if (x.dim() == xs[0].dim()) a[d] = b[d] = 0;
    if (a != b)
      throw ShapeError("cat: " + shape_str(xs[0].shape()) + " and " + shape_str(x.shape()) +
                       " differ outside dim " + std::to_string(dim));
    shape[d] += x.shape()[d];
  }
  check_same_device("cat", xs);
  Tensor out = Tensor::empty(shape, xs[0].device());
  const DimSplit s = split_at(shape, d);
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& x_in : xs) {
    if (x_in.is_cuda()) {  // each piece: a strided copy into its slice of out
      CudaLayout slice = cuda_layout(out);
      slice.shape[d] = x_in.shape()[d];
      slice.offset = start * slice.strides[d];
      cuda_copy_strided(x_in.impl().storage->data, cuda_layout(x_in), out.data_ptr(), slice);
      starts.push_back(start);
      start += x_in.shape()[d];
      continue;
    }
    const Tensor x = contiguous_data(x_in);
    const int64_t block = x.shape()[d] * s.inner;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(out.data() + o * s.n * s.inner + start * s.inner, x.data() + o * block,
                  sizeof(float) * block);
    starts.push_back(start);
    start += x.shape()[d];
  }
  // Each piece's gradient is its own slice of g (narrow's backward the other way round).
  std::vector<int64_t> lengths;
  for (const Tensor& x : xs) lengths.push_back(x.shape()[d]);
  return record("cat", out, xs, [d, starts, lengths](const Tensor& g) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < starts.size(); ++i) grads.push_back(narrow(g, d, starts[i], lengths[i]));
    return grads;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int dim) {
  if (xs.empty()) throw ShapeError("stack: needs at least one tensor");
  std::vector<Tensor> expanded;
  for (const Tensor& x : xs) {
    if (x.shape() != xs[0].shape())
      throw ShapeError("stack: shapes differ: " + shape_str(xs[0].shape()) + " vs " +
                       shape_str(x.shape()));
    expanded.push_back(unsqueeze(x, dim));
  }
  return cat(expanded, dim);
}

}  // namespace mg
