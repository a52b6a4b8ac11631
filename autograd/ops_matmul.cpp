// Matrix products. For C = A'B' (A' = op(A), B' = op(B)): dA' = g B'^T and dB' = A'^T g; the
// transpose flags let both be computed by the same GEMM without materialising any transpose.
#include "autograd/ops.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/not_implemented.h"

namespace mg {

namespace {

std::string matmul_shapes(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return shape_str(a.shape()) + (ta ? "^T" : "") + " x " + shape_str(b.shape()) + (tb ? "^T" : "");
}

// Gradients of C = op(a) op(b) with respect to a and b, given g = d(loss)/dC [M,N]. With A' =
// op(a), B' = op(b): dA' = g B'^T and dB' = A'^T g (each entry C[i,j] = Σ_k A'[i,k] B'[k,j] sends
// g[i,j] B'[k,j] to A'[i,k]). When a is stored transposed (ta, A' = a^T) its gradient is the
// transpose of dA': da = (g B'^T)^T = B' g^T, one GEMM again with the flags swapped; likewise b.
std::vector<Tensor> matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b, bool ta,
                                    bool tb, bool need_a, bool need_b, bool batched) {
  auto mm = [batched](const Tensor& x, const Tensor& y, bool tx, bool ty) {
    return batched ? bmm(x, y, tx, ty) : matmul(x, y, tx, ty);
  };
  Tensor ga, gb;
  // TASK 3.4: dA' = g B'^T and dB' = A'^T g with mm and its transpose flags, no copies
  if (need_a) ga = ta ? mm(b, g, tb, true) : mm(g, b, false, !tb);
  if (need_b) gb = tb ? mm(g, a, true, ta) : mm(a, g, !ta, false);
  // END TASK 3.4
  return {ga, gb};
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool ta, bool tb) {
  if (a_in.dim() != 2 || b_in.dim() != 2)
    throw ShapeError("matmul: needs 2-D tensors, got " + matmul_shapes(a_in, b_in, ta, tb) +
                     " (use bmm for batches)");
  const int64_t M = a_in.size(ta ? 1 : 0), K = a_in.size(ta ? 0 : 1);
  const int64_t K2 = b_in.size(tb ? 1 : 0), N = b_in.size(tb ? 0 : 1);
  if (K != K2)
    throw ShapeError("matmul: " + matmul_shapes(a_in, b_in, ta, tb) + " inner sizes differ");
  check_same_device("matmul", {a_in, b_in});
  const Tensor a = contiguous_data(a_in), b = contiguous_data(b_in);
  Tensor out = Tensor::empty({M, N}, a.device());
  if (a.is_cuda())  // cuBLAS, same contract (cuda/runtime.cu)
    cuda_gemm(ta, tb, M, N, K, 1.0f, a.data_ptr(), a.size(1), b.data_ptr(), b.size(1), 0.0f,
              out.data_ptr(), N);
  else
    gemm(ta, tb, M, N, K, 1.0f, a.data(), a.size(1), b.data(), b.size(1), 0.0f, out.data(), N);
  return record("matmul", out, {a_in, b_in},
                [a = a.detach(), b = b.detach(), ta, tb, ra = a_in.requires_grad(),
                 rb = b_in.requires_grad()](const Tensor& g) {
                  return matmul_backward(g, a, b, ta, tb, ra, rb, false);
                });
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in, bool ta, bool tb) {
  if (a_in.dim() != 3 || b_in.dim() != 3 || a_in.size(0) != b_in.size(0))
    throw ShapeError("bmm: needs [G,M,K] x [G,K,N], got " + matmul_shapes(a_in, b_in, ta, tb));
  const int64_t G = a_in.size(0);
  const int64_t M = a_in.size(ta ? 2 : 1), K = a_in.size(ta ? 1 : 2);
  const int64_t K2 = b_in.size(tb ? 2 : 1), N = b_in.size(tb ? 1 : 2);
  if (K != K2)
    throw ShapeError("bmm: " + matmul_shapes(a_in, b_in, ta, tb) + " inner sizes differ");
  check_same_device("bmm", {a_in, b_in});
  const Tensor a = contiguous_data(a_in), b = contiguous_data(b_in);
  Tensor out = Tensor::empty({G, M, N}, a.device());
  const int64_t sa = a.size(1) * a.size(2), sb = b.size(1) * b.size(2);
  if (a.is_cuda())
    cuda_gemm_batched(ta, tb, G, M, N, K, 1.0f, a.data_ptr(), a.size(2), sa, b.data_ptr(),
                      b.size(2), sb, 0.0f, out.data_ptr(), N, M * N);
  else
    for (int64_t g = 0; g < G; ++g)
      gemm(ta, tb, M, N, K, 1.0f, a.data() + g * sa, a.size(2), b.data() + g * sb, b.size(2), 0.0f,
           out.data() + g * M * N, N);
  return record("bmm", out, {a_in, b_in},
                [a = a.detach(), b = b.detach(), ta, tb, ra = a_in.requires_grad(),
                 rb = b_in.requires_grad()](const Tensor& g) {
                  return matmul_backward(g, a, b, ta, tb, ra, rb, true);
                });
}

}  // namespace mg
