// softmax and log_softmax over one dimension, max-subtracted for stability.
#include <cmath>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/not_implemented.h"
#include "tensor/vec_math.h"

namespace mg {

namespace {

// Fills out with log_softmax (log_space = true) or softmax of x over `dim`.
Tensor softmax_kernel(const Tensor& x_in, int dim, bool log_space) {
  const Tensor x = contiguous_data(x_in);
  const DimSplit s = split_at(x.shape(), dim);
  Tensor out = Tensor::empty(x.shape(), x.device());
  if (x.is_cuda()) {
    cuda_softmax(x.data_ptr(), cuda_split(x.shape(), dim), out.data_ptr(), log_space);
    return out;
  }
  const float* in = x.data();
  float* o = out.data();
  parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.n, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t w = b; w < e; ++w) {
                   const int64_t base = (w / s.inner) * s.n * s.inner + (w % s.inner);
                   const float* line = in + base;
                   float* oline = o + base;
                   float m = -INFINITY;
                   double acc = 0;
                   if (s.inner == 1) {  // the common case (softmax over the last dim): vectorized
                     m = row_max(line, s.n);
                     acc = sum_exp<false>(line, s.n, m, nullptr);
                   } else {
                     for (int64_t j = 0; j < s.n; ++j) m = std::max(m, line[j * s.inner]);
                     for (int64_t j = 0; j < s.n; ++j)  // x - max <= 0: the short exp
                       acc += vexp_nonpositive(line[j * s.inner] - m);
                   }
                   // (x - m) - log(sum) rather than x - (m + log(sum)): rounding m + log(sum) to
                   // float would cost up to half an ulp of |m| (7.6e-6 at logits ~200) in every
                   // output.
                   const float log_sum = static_cast<float>(std::log(acc));
                   const float inv_sum = static_cast<float>(1.0 / acc);
                   for (int64_t j = 0; j < s.n; ++j) {
                     const float shifted = line[j * s.inner] - m;
                     oline[j * s.inner] =
                         log_space ? shifted - log_sum : vexp_nonpositive(shifted) * inv_sum;
                   }
                 }
               });
  return out;
}

// Backward in one pass per line, no temporaries:
//   log_softmax: dx_j = g_j - exp(y_j) * sum_k g_k
//   softmax:     dx_j = y_j * (g_j - sum_k g_k y_k)
// Why: softmax's Jacobian is dy_k/dx_j = y_k (δ_kj - y_j), so dx_j = Σ_k g_k y_k (δ_kj - y_j); with
// y = log softmax(x), dy_k/dx_j = δ_kj - softmax(x)_j = δ_kj - exp(y_j). Neither builds the [n,n]
// Jacobian: one sum per line is enough.
Tensor softmax_backward_kernel(const Tensor& g_in, const Tensor& y, int dim, bool log_space) {
  const Tensor g = contiguous_data(g_in);
  const DimSplit s = split_at(y.shape(), dim);
  Tensor dx = Tensor::empty(y.shape(), y.device());
  if (y.is_cuda()) {
    cuda_softmax_backward(g.data_ptr(), y.data_ptr(), cuda_split(y.shape(), dim), dx.data_ptr(),
                          log_space);
    return dx;
  }
  // TASK 3.5: per line, dx = y (g - Σ g y) for softmax, dx = g - exp(y) Σ g for log_softmax
  const float* gp = g.data();
  const float* yp = y.data();
  float* o = dx.data();
  parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.n, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t w = b; w < e; ++w) {
                   const int64_t base = (w / s.inner) * s.n * s.inner + (w % s.inner);
                   double acc = 0;
                   for (int64_t j = 0; j < s.n; ++j) {
                     const int64_t k = base + j * s.inner;
                     acc += log_space ? gp[k] : gp[k] * yp[k];
                   }
                   const float total = static_cast<float>(acc);
                   for (int64_t j = 0; j < s.n; ++j) {
                     const int64_t k = base + j * s.inner;
                     o[k] = softmax_backward_entry(gp[k], yp[k], total, log_space);
                   }
                 }
               });
  return dx;
  // END TASK 3.5
}

}  // namespace

Tensor softmax(const Tensor& x, int dim) {
  const int d = normalize_dim("softmax", dim, x.dim());
  Tensor y = softmax_kernel(x, d, false);
  return record("softmax", y, {x}, [y = y.detach(), d](const Tensor& g) {
    return std::vector<Tensor>{softmax_backward_kernel(g, y, d, false)};
  });
}

Tensor log_softmax(const Tensor& x, int dim) {
  const int d = normalize_dim("log_softmax", dim, x.dim());
  Tensor y = softmax_kernel(x, d, true);
  return record("log_softmax", y, {x}, [y = y.detach(), d](const Tensor& g) {
    return std::vector<Tensor>{softmax_backward_kernel(g, y, d, true)};
  });
}

}  // namespace mg
