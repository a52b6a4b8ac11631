// sum, mean and logsumexp. Sums accumulate in a fixed order (fixed-size partial sums combined
// serially), so the result is bitwise the same for any thread count.
#include <cmath>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/vec_math.h"

namespace mg {

namespace {

// Plain sum over `dim` of a contiguous tensor, no autograd.
Tensor sum_dim_kernel(const Tensor& x_in, int dim, bool keepdim) {
  const Tensor x = contiguous_data(x_in);
  if (x.is_cuda()) {
    Tensor out = Tensor::empty(reduced_shape(x.shape(), dim, keepdim), Device::CUDA);
    cuda_sum_dim(x.data_ptr(), cuda_split(x.shape(), dim), out.data_ptr());
    return out;
  }
  const DimSplit s = split_at(x.shape(), dim);
  Tensor out = Tensor::zeros(reduced_shape(x.shape(), dim, keepdim));
  const float* in = x.data();
  float* o = out.data();
  if (s.inner == 1) {
    parallel_for(s.outer, std::max<int64_t>(1, 8192 / std::max<int64_t>(s.n, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t r = b; r < e; ++r) {
                     double acc = 0;
                     for (int64_t j = 0; j < s.n; ++j) acc += in[r * s.n + j];
                     o[r] = static_cast<float>(acc);
                   }
                 });
  } else {
    // Rows of length `inner` added one after another: vectorizes along inner. Split work over
    // (outer x inner-chunk) so a single outer (bias gradients: [N,V] -> [V]) still uses all cores.
    const int64_t chunk = 256, chunks = (s.inner + chunk - 1) / chunk;
    parallel_for(s.outer * chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t w = b; w < e; ++w) {
        const int64_t r = w / chunks, i0 = (w % chunks) * chunk, i1 = std::min(s.inner, i0 + chunk);
        float* orow = o + r * s.inner;
        for (int64_t j = 0; j < s.n; ++j) {
          const float* irow = in + (r * s.n + j) * s.inner;
          for (int64_t i = i0; i < i1; ++i) orow[i] += irow[i];
        }
      }
    });
  }
  return out;
}

// Expands g (the reduced shape, keepdim or not) back over `dim` of `shape`.
Tensor expand_over(const Tensor& g, const Shape& shape, int dim) {
  Shape kept = shape;
  kept[dim] = 1;
  return add(reshape(g, kept), Tensor::zeros(shape, g.device()));
}

}  // namespace

Tensor sum(const Tensor& x_in) {
  const Tensor x = contiguous_data(x_in);
  const Shape shape = x_in.shape();
  if (x.is_cuda()) {
    Tensor out = Tensor::empty({}, Device::CUDA);
    cuda_sum_all(x.data_ptr(), x.numel(), out.data_ptr());
    return record("sum", out, {x_in}, [shape](const Tensor& g) {
      return std::vector<Tensor>{
          add(Tensor::zeros(shape, Device::CUDA), g)};  // g broadcast, no host sync
    });
  }
  constexpr int64_t kBlock = 4096;
  const int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  const float* in = x.data();
  parallel_for(blocks, 4, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      double acc = 0;
      for (int64_t i = blk * kBlock, end = std::min(n, (blk + 1) * kBlock); i < end; ++i)
        acc += in[i];
      partial[blk] = acc;
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  Tensor out = Tensor::scalar(static_cast<float>(total));
  // d(Σ x) / dx_i = 1 for every i: each entry's gradient is g itself.
  return record("sum", out, {x_in}, [shape](const Tensor& g) {
    return std::vector<Tensor>{Tensor::full(shape, g.item())};
  });
}

Tensor sum(const Tensor& x, int dim, bool keepdim) {
  const int d = normalize_dim("sum", dim, x.dim());
  Tensor out = sum_dim_kernel(x, d, keepdim);
  const Shape shape = x.shape();
  // Every entry along `dim` went into the same output entry with weight 1: it receives that
  // entry's gradient, g copied back along `dim`.
  return record("sum_dim", out, {x}, [shape, d](const Tensor& g) {
    return std::vector<Tensor>{expand_over(g, shape, d)};
  });
}

// mean = sum / n, built from two ops, so its backward is theirs: g / n to every entry.
Tensor mean(const Tensor& x) {
  if (x.numel() == 0) throw ShapeError("mean: empty tensor " + shape_str(x.shape()));
  return mul_scalar(sum(x), 1.0f / static_cast<float>(x.numel()));
}

Tensor mean(const Tensor& x, int dim, bool keepdim) {
  const int d = normalize_dim("mean", dim, x.dim());
  if (x.shape()[d] == 0) throw ShapeError("mean: empty dim in " + shape_str(x.shape()));
  return mul_scalar(sum(x, d, keepdim), 1.0f / static_cast<float>(x.shape()[d]));
}

Tensor logsumexp(const Tensor& x_in, int dim, bool keepdim) {
  const int d = normalize_dim("logsumexp", dim, x_in.dim());
  const Tensor x = contiguous_data(x_in);
  const DimSplit s = split_at(x.shape(), d);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), d, keepdim), x.device());
  if (x.is_cuda())
    cuda_logsumexp_dim(x.data_ptr(), cuda_split(x.shape(), d), out.data_ptr());
  else {
    const float* in = x.data();
    float* o = out.data();
    parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.n, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t w = b; w < e; ++w) {
                     const float* line = in + (w / s.inner) * s.n * s.inner + (w % s.inner);
                     // Subtract the max so exp never overflows (logits of magnitude 50+ are common
                     // in MoS).
                     float m = -INFINITY;
                     for (int64_t j = 0; j < s.n; ++j) m = std::max(m, line[j * s.inner]);
                     if (std::isinf(m)) {
                       o[w] = m;
                       continue;
                     }
                     double acc = 0;
                     if (s.inner == 1)
                       acc = sum_exp<false>(line, s.n, m, nullptr);
                     else
                       for (int64_t j = 0; j < s.n; ++j)  // x - max <= 0: the short exp
                         acc += vexp_nonpositive(line[j * s.inner] - m);
                     o[w] = m + static_cast<float>(std::log(acc));
                   }
                 });
  }
  return record("logsumexp", out, {x_in}, [x = x.detach(), out = out.detach(), d](const Tensor& g) {
    // d lse / dx_j = softmax(x)_j = exp(x_j - lse)
    Shape kept = x.shape();
    kept[d] = 1;
    const Tensor p = exp(sub(x, reshape(out, kept)));
    return std::vector<Tensor>{mul(p, reshape(g, kept))};
  });
}

}  // namespace mg
