// Small loop helpers shared by the op files (autograd/ops_*.cpp) and the fused layers (nn/): an
// elementwise map over one or two same-shaped tensors (the [outer, n, inner] split that lets one
// kernel reduce over any dimension is tensor/shape.h's split_at). They know nothing of the graph,
// so they live in tensor/.
#pragma once

#include "math/formulas.h"
#include "tensor/kernels_cuda.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace mg {

// Elementwise loops below this size run on one thread (an OpenMP region costs ~1-5 us).
constexpr int64_t kElementwiseGrain = 16384;

// A note on the loops in parallel_for bodies: they capture by reference, and a float reached
// through a reference (a scale, a probability, a functor's member) might be the very float a store
// writes, so GCC reloads it after every store and gives up vectorizing. The bodies therefore copy
// what they read into locals first (checked with -fopt-info-vec).

// out[i] = f(x[i]); out is a fresh contiguous tensor of x's shape.
template <typename F>
Tensor map_unary(const Tensor& x_in, F f) {
  const Tensor x = contiguous_data(x_in);
  Tensor out = Tensor::empty(x.shape());
  const float* in = x.data();
  float* o = out.data();
  parallel_for(x.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    const F fn = f;  // a local copy: floats f captured must not look like they alias o[i]
    for (int64_t i = begin; i < end; ++i) o[i] = fn(in[i]);
  });
  return out;
}

// out[i] = f(a[i], b[i]) for tensors of the same shape (no broadcasting).
template <typename F>
Tensor map_binary(const Tensor& a_in, const Tensor& b_in, F f) {
  check_same_shape("map_binary", a_in, b_in);
  const Tensor a = contiguous_data(a_in), b = contiguous_data(b_in);
  Tensor out = Tensor::empty(a.shape());
  const float* pa = a.data();
  const float* pb = b.data();
  float* o = out.data();
  parallel_for(a.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    const F fn = f;
    for (int64_t i = begin; i < end; ++i) o[i] = fn(pa[i], pb[i]);
  });
  return out;
}

// The two maps on either device, for the ops whose formula is written once in math/formulas.h:
// the CPU loop above runs Unary<F> / Binary<F>, the GPU the kernel of the same F
// (cuda/ops_elementwise.cu), chosen by where the input lives.
template <UnaryOp F>
Tensor map_unary_on(const Tensor& x, float scalar = 0.0f) {
  return x.is_cuda() ? cuda_map_unary(F, x, scalar) : map_unary(x, Unary<F>{scalar});
}
template <BinaryOp F>
Tensor map_binary_on(const Tensor& a, const Tensor& b) {
  if (a.is_cuda() || b.is_cuda()) return cuda_map_binary("map_binary", F, a, b);
  return map_binary(a, b, Binary<F>{});
}


// The shape after reducing `dim` (kept as size 1 when keepdim).
inline Shape reduced_shape(const Shape& shape, int dim, bool keepdim) {
  Shape out = shape;
  if (keepdim)
    out[dim] = 1;
  else
    out.erase(out.begin() + dim);
  return out;
}

}  // namespace mg
