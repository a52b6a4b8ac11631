// add, sub, mul, div with numpy broadcasting; their backward sums the gradient back to each input's
// shape (sum_to), because a broadcast input was used once per position it was expanded to.
#include <cstring>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/not_implemented.h"

namespace mg {

namespace {

// out = Binary<F>(a, b) (math/formulas.h) over the broadcast shape of a and b; on the GPU the
// kernel of the same F (cuda/ops_elementwise.cu).
template <BinaryOp F>
Tensor broadcast_binary(const std::string& op, const Tensor& a_in, const Tensor& b_in) {
  check_same_device(op, {a_in, b_in});
  if (a_in.is_cuda()) return cuda_map_binary(op, F, a_in, b_in);
  const Binary<F> f{};
  if (a_in.shape() == b_in.shape()) return map_binary(a_in, b_in, f);
  const Shape out_shape = broadcast_shapes(op, a_in.shape(), b_in.shape());
  const Tensor a = contiguous_data(a_in), b = contiguous_data(b_in);
  Tensor out = Tensor::empty(out_shape);
  const int rank = static_cast<int>(out_shape.size());
  // Strides of a and b over the output's dims: 0 along a broadcast (size-1 or missing) dim.
  Shape sa(rank, 0), sb(rank, 0);
  const Shape ca = contiguous_strides(a.shape()), cb = contiguous_strides(b.shape());
  for (int d = 0; d < rank; ++d) {
    const int da = d - (rank - a.dim()), db = d - (rank - b.dim());
    if (da >= 0 && a.shape()[da] != 1) sa[d] = ca[da];
    if (db >= 0 && b.shape()[db] != 1) sb[d] = cb[db];
  }
  const int64_t inner = rank ? out_shape[rank - 1] : 1;
  const int64_t rows = out.numel() / std::max<int64_t>(inner, 1);
  const int64_t ia = rank ? sa[rank - 1] : 0, ib = rank ? sb[rank - 1] : 0;
  const float* pa = a.data();
  const float* pb = b.data();
  float* o = out.data();
  parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   int64_t oa = 0, ob = 0, rem = r;
                   for (int d = rank - 2; d >= 0; --d) {
                     const int64_t i = rem % out_shape[d];
                     rem /= out_shape[d];
                     oa += i * sa[d];
                     ob += i * sb[d];
                   }
                   const Binary<F> fn = f;
                   float* orow = o + r * inner;
                   const float* ar = pa + oa;
                   const float* br = pb + ob;
                   const int64_t n = inner;
                   // The common cases as their own loops, so each vectorizes: both rows
                   // contiguous, or one of them a single broadcast value.
                   if (ia == 1 && ib == 1) {
                     for (int64_t i = 0; i < n; ++i) orow[i] = fn(ar[i], br[i]);
                   } else if (ia == 1 && ib == 0) {
                     const float y = br[0];
                     for (int64_t i = 0; i < n; ++i) orow[i] = fn(ar[i], y);
                   } else if (ia == 0 && ib == 1) {
                     const float x = ar[0];
                     for (int64_t i = 0; i < n; ++i) orow[i] = fn(x, br[i]);
                   } else {
                     for (int64_t i = 0; i < n; ++i) orow[i] = fn(ar[i * ia], br[i * ib]);
                   }
                 }
               });
  return out;
}

}  // namespace

// Broadcasting copies an input along the dims it lacks or has as 1; each copy's gradient flows back
// to the same input entry, so the gradient is summed over those dims (PyTorch's sum_to_size).
Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  Tensor g = grad;
  // Leading dims that the input did not have at all.
  while (g.dim() > static_cast<int>(shape.size())) g = sum(g, 0, false);
  // Dims where the input had size 1.
  for (int d = 0; d < g.dim(); ++d)
    if (shape[d] == 1 && g.shape()[d] != 1) g = sum(g, d, true);
  if (g.shape() != shape)
    throw ShapeError("sum_to: cannot reduce " + shape_str(grad.shape()) + " to " +
                     shape_str(shape));
  return g;
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary<BinaryOp::Add>("add", a, b);
  const Shape sa = a.shape(), sb = b.shape();
  return record("add", out, {a, b}, [sa, sb](const Tensor& g) {
    // d(a+b)/da = d(a+b)/db = 1: both get g, summed back over what was broadcast.
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary<BinaryOp::Sub>("sub", a, b);
  const Shape sa = a.shape(), sb = b.shape();
  return record("sub", out, {a, b}, [sa, sb](const Tensor& g) -> std::vector<Tensor> {
    // TASK 3.1: d(a-b)/da = 1 and d(a-b)/db = -1, each summed back to its input's shape (sum_to)
    return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
    // END TASK 3.1
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary<BinaryOp::Mul>("mul", a, b);
  return record("mul", out, {a, b},
                [a = a.detach(), b = b.detach(), ra = a.requires_grad(),
                 rb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  // TASK 3.2: d(a*b)/da = b, d(a*b)/db = a, summed back; Tensor() if not needed
                  return std::vector<Tensor>{ra ? sum_to(mul(g, b), a.shape()) : Tensor(),
                                             rb ? sum_to(mul(g, a), b.shape()) : Tensor()};
                  // END TASK 3.2
                });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary<BinaryOp::Div>("div", a, b);
  return record("div", out, {a, b},
                [a = a.detach(), b = b.detach(), ra = a.requires_grad(),
                 rb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  // TASK 3.3: d(a/b)/da = 1/b, d(a/b)/db = -a/b^2, summed back as in 3.2
                  return std::vector<Tensor>{
                      ra ? sum_to(div(g, b), a.shape()) : Tensor(),
                      rb ? sum_to(neg(div(mul(g, a), mul(b, b))), b.shape()) : Tensor()};
                  // END TASK 3.3
                });
}

Tensor add_scalar(const Tensor& a, float s) {
  Tensor out = map_unary_on<UnaryOp::AddScalar>(a, s);
  return record("add_scalar", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor mul_scalar(const Tensor& a, float s) {
  Tensor out = map_unary_on<UnaryOp::MulScalar>(a, s);
  return record("mul_scalar", out, {a},
                [s](const Tensor& g) { return std::vector<Tensor>{mul_scalar(g, s)}; });
}

Tensor neg(const Tensor& a) {
  Tensor out = map_unary_on<UnaryOp::Neg>(a);
  return record("neg", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

}  // namespace mg
