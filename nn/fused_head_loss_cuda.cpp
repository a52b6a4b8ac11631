// The fused head loss on the GPU: the same algorithm as nn/fused_head_loss.cpp (read its header for
// the equations; what backward keeps differs: here the logits z, overwritten with dz), with cuBLAS
// for the three GEMMs and the per-row work in cuda/fused_head_loss.cu. Everything per row (lse, the
// target's component log-prob, the responsibilities) stays on the device, and so is the output
// gradient backward scales by: the host never waits for the GPU here.
#include <memory>

#include "autograd/ops.h"
#include "cuda/backend.h"
#include "nn/heads.h"
#include "tensor/kernels.h"

namespace mg {

namespace {

struct SavedCuda {
  Tensor ctx, W, b;  // [R,E], [V,E], [V] (detached), R = N*K context rows
  Tensor lse, resp;  // [R] per context row: log-normaliser, responsibility r_nk
  Tensor logits;     // [R,V] ctx W^T (no bias) kept from the forward, or undefined (recomputed)
  std::shared_ptr<DeviceIndices> targets;  // [N] on the device
  int64_t chunk_rows = 0, K = 1;
  bool sig = false;
  FusedHeadGrads need;  // which inputs backward computes a gradient for
};

// z [rows,V] = ctx rows [r0, r0+rows) W^T, without b, as chunk_logits: the row kernels add b as
// they read z (cuda/fused_head_loss.cu), so no pass over the logits adds it alone.
void chunk_logits_cuda(const SavedCuda& s, int64_t r0, int64_t rows, float* z) {
  const int64_t E = s.ctx.size(1), V = s.W.size(0);
  cuda_gemm(false, true, rows, V, E, 1.0f, s.ctx.data_ptr() + r0 * E, E, s.W.data_ptr(), E, 0.0f, z,
            V);
}

std::vector<Tensor> fused_backward_cuda(const SavedCuda& s, const Tensor& g) {
  const int64_t R = s.ctx.size(0), E = s.ctx.size(1), V = s.W.size(0), N = R / s.K;
  const float inv_n = 1.0f / static_cast<float>(N);  // scale = g / N, formed on the device
  const Tensor g_dev = contiguous_data(g);
  Tensor d_ctx = s.need.ctx ? Tensor::empty({R, E}, Device::CUDA) : Tensor();
  Tensor d_W = s.need.W ? Tensor::empty({V, E}, Device::CUDA) : Tensor();
  Tensor d_b = s.need.b ? Tensor::empty({V}, Device::CUDA) : Tensor();
  if (s.need.ctx || s.need.W || s.need.b) {
    const bool kept = s.logits.defined();
    Tensor block = kept ? Tensor() : Tensor::empty({s.chunk_rows, V}, Device::CUDA);
    for (int64_t r0 = 0; r0 < R; r0 += s.chunk_rows) {
      const int64_t rows = std::min(s.chunk_rows, R - r0);
      float* z = kept ? s.logits.data_ptr() + r0 * V
                      : block.data_ptr();  // overwritten: backward runs once
      if (!kept) chunk_logits_cuda(s, r0, rows, z);
      cuda_head_logits_to_grad(z, s.b.data_ptr(), rows, V, r0, s.K, s.targets->get(),
                               s.resp.data_ptr(), s.lse.data_ptr(), g_dev.data_ptr(), inv_n, s.sig);
      // d ctx = dz W;  d W += dz^T ctx;  d b += column sums of dz — chunks in a fixed order.
      if (s.need.ctx)
        cuda_gemm(false, false, rows, E, V, 1.0f, z, V, s.W.data_ptr(), E, 0.0f,
                  d_ctx.data_ptr() + r0 * E, E);
      if (s.need.W)
        cuda_gemm(true, false, V, E, rows, 1.0f, z, V, s.ctx.data_ptr() + r0 * E, E,
                  r0 == 0 ? 0.0f : 1.0f, d_W.data_ptr(), E);
      if (s.need.b) {
        const CudaSplit columns{1, rows, V};  // [rows,V] summed over rows
        if (r0 == 0) {
          cuda_sum_dim(z, columns, d_b.data_ptr());
        } else {
          Tensor part = Tensor::empty({V}, Device::CUDA);
          cuda_sum_dim(z, columns, part.data_ptr());
          cuda_accumulate(d_b.data_ptr(), part.data_ptr(), V);
        }
      }
    }
  }
  // d loss / d log π_nk = -g r_nk / N
  const Tensor d_pi = s.need.pi
                          ? cuda_map_unary(UnaryOp::MulScalar,
                                           cuda_map_binary("fused_mixture_nll", BinaryOp::Mul,
                                                           reshape(s.resp, {N, s.K}), g_dev),
                                           -inv_n)
                          : Tensor();
  return {d_ctx, d_W, d_b, d_pi};
}

}  // namespace

Tensor fused_mixture_nll_cuda(const Tensor& ctx_in, const Tensor& W_in, const Tensor& b_in,
                              const Tensor& log_pi_in, const std::vector<int64_t>& targets,
                              int64_t K, bool sig, bool keep, int64_t chunk_rows) {
  const int64_t R = ctx_in.size(0), V = W_in.size(0), N = R / K;
  SavedCuda s;
  s.ctx = contiguous_data(ctx_in).detach(), s.W = contiguous_data(W_in).detach(),
  s.b = contiguous_data(b_in).detach();
  s.targets = std::make_shared<DeviceIndices>(targets);
  s.K = K, s.sig = sig, s.chunk_rows = chunk_rows;
  s.lse = Tensor::empty({R}, Device::CUDA);
  s.resp = Tensor::empty({R}, Device::CUDA);
  const Tensor comp =
      Tensor::empty({R}, Device::CUDA);  // c_nk, the component log-prob of the target
  if (keep) s.logits = Tensor::empty({R, V}, Device::CUDA);
  Tensor block = keep ? Tensor() : Tensor::empty({chunk_rows, V}, Device::CUDA);
  for (int64_t r0 = 0; r0 < R; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, R - r0);
    float* z = keep ? s.logits.data_ptr() + r0 * V : block.data_ptr();
    chunk_logits_cuda(s, r0, rows, z);
    cuda_head_row_stats(z, s.b.data_ptr(), rows, V, r0, K, s.targets->get(), sig, s.lse.data_ptr(),
                        comp.data_ptr());
  }
  // Mix in log space per target row; the loss is the mean of the rows' NLL.
  const Tensor log_pi = log_pi_in.defined() ? contiguous_data(log_pi_in) : Tensor();
  Tensor nll = Tensor::empty({N}, Device::CUDA);
  cuda_head_mix(comp.data_ptr(), log_pi.defined() ? log_pi.data_ptr() : nullptr, N, K,
                s.resp.data_ptr(), nll.data_ptr());
  Tensor total = Tensor::empty({}, Device::CUDA);
  cuda_sum_all(nll.data_ptr(), N, total.data_ptr());
  Tensor out = cuda_map_unary(UnaryOp::MulScalar, total, 1.0f / static_cast<float>(N));
  s.need = fused_head_grads(ctx_in, W_in, b_in, log_pi_in);
  auto backward = [s = std::move(s)](const Tensor& g) { return fused_backward_cuda(s, g); };
  return record_fused_head(sig, out, ctx_in, W_in, b_in, log_pi_in, std::move(backward));
}

}  // namespace mg
