// The fused training loss of every head: mean NLL of the targets without materialising the
// [N*K, V] logits, log-probs or mixture that the plain path (nll_loss(log_prob(h))) builds.
//
// For rows n (N of them) with K components each (K = 1: plain softmax / sigsoftmax / MoC):
// clang-format off
//   z_nk      = ctx_nk W^T + b                     the logits, [V]
//   c_nk      = log q(t_n | z_nk)                  the component's log-prob of the target, with
//               q = softmax(z), or sigsoftmax(z)   (Kanai et al. 2018)
//   a_nk      = log π_nk + c_nk
//   loss      = -(1/N) Σ_n logsumexp_k a_nk        (MoS eq. 3 in log space)
// Backward, with responsibilities r_nk = softmax_k(a_nk) (the posterior of component k):
//   d loss / d log π_nk = -r_nk / N
//   d loss / d z_nk[j]  =  (r_nk / N) (q_j - δ_j,t)               softmax
//                       =  (r_nk / N) (q_j - δ_j,t) (2 - σ(z_j))  sigsoftmax (d s_j/d z_j = 2 - σ(z_j))
// clang-format on
// When the logits [N*K,V] are small enough they are computed once and kept, so backward is two
// large GEMMs: the forward keeps exp(z - shift) (sigsoftmax: exp(s - shift)(2 - σ(z)), s = z +
// log σ(z)) and backward puts each row's weights around the products (backward_from_exps), with
// no pass over the logits of its own.
// Otherwise they are computed in chunks of rows, reduced to (log-sum, target logit), and dropped;
// backward recomputes each chunk. Peak extra memory is then one [chunk, V] block instead of ~6
// [N*K, V]. The per-row passes over a tile of logits (bias, max, exponentials, the running
// logsumexp across vocabulary slabs) are in tensor/row_logsumexp.h.
#include <cmath>
#include <cstdint>

#include "autograd/ops.h"
#include "nn/heads.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/row_logsumexp.h"
#include "tensor/vec_math.h"

namespace mg {

namespace {

// Streamed chunks hold about this many logits (32 MB). Larger chunks make the weight gradient
// ([d W^T; d b] += [ctx, 1]^T dz, see fused_backward) one GEMM with a deep k (chunk rows) instead
// of many shallow ones that re-read and re-write all of it: at 128 rows that cost small-mos 6% of
// its step in packing and cache misses.
constexpr int64_t kStreamChunkFloats = int64_t{8} << 20;

// Vectorizable forms (tensor/vec_math.h): these run once per vocabulary entry per row.
inline float log_sigmoidf(float x) {
  return vlog_sigmoid(x);
}
inline float sigmoidf(float x) {
  return vsigmoid(x);
}

// The forward computes the logits a slab of kSlabCols vocabulary columns at a time and, within
// it, kTileRows rows at a time, and reduces each tile at once while it is in L1/L2; a running
// (online) max and sum of exponentials per row carries the logsumexp across slabs (Milakov &
// Gimelshein 2018, "Online normalizer calculation for softmax"). The slab's part of W^T (E x
// 768 floats, 600 KB for E = 200) then stays in the core's L2 for all the thread's rows. Whole
// 10,000-column rows per tile instead streamed all of W^T (8 MB) through L2 once per tile, which
// pushed the tile out before it was reduced: small-mos trained 2.6% slower (4,882 vs 5,008 tok/s,
// three alternating runs each of bench_train --mode train).
// kSlabCols is a multiple of every kernel's nr (48, 16, 8), so slabs start on packed panels;
// the slab boundaries depend on V alone, so the sums do not depend on the thread count.
// A tile has at least kTileRows rows, rounded up to whole register tiles of the kernel (8 rows
// on AVX-512, 12 = 2 x 6 on AVX2): 8 rows on AVX2 ran as a 6-row and a 2-row tile, and the 2-row
// one (4 FMA chains for 2 pipes of 4-5 cycles) took 6% of mos-paper's step. Each row's numbers do
// not depend on the tile (the GEMM's k order and the slabs are the same).
constexpr int64_t kTileRows = 8;
constexpr int64_t kSlabCols = 768;

// z [rows, c1-c0] (leading dimension V) = ctx rows [r0, r0+rows) times W^T[:, c0:c1], without b:
// the pass that reads z next (the forward's running max, or logits_to_grad) adds b while it has
// it in cache. W_t: W^T packed (under --gemm reference, a plain copy: tensor/gemm.h).
void chunk_logits(const float* ctx, const PackedB& W_t, int64_t r0, int64_t rows, int64_t c0,
                  int64_t c1, int64_t E, int64_t V, float* z) {
  gemm_packed_b_cols(rows, c0, c1 - c0, E, 1.0f, ctx + r0 * E, E, W_t, 0.0f, z, V);
}

struct Saved {
  Tensor ctx, W, b;        // [N*K,E], [V,E], [V] (detached)
  std::vector<float> lse;  // per ctx row: logsumexp of z (softmax) or of z + log σ(z) (sigsoftmax)
  std::vector<float> inv_sum;    // per ctx row: exp(shift - lse), shift as in RunningLse
  std::vector<float> resp;       // r_nk per ctx row
  std::vector<int64_t> targets;  // [N]
  Tensor logits;  // [N*K,V] kept from the forward when small enough (else recomputed):
                  // exp(z - shift) for softmax, exp(s - shift)(2 - σ(z)) for sigsoftmax
  std::vector<float> target_slope;  // kept sigsoftmax: 2 - σ(z_t) per ctx row
  int64_t chunk_rows = 0;           // rows per chunk: all of them when the logits are kept
  int64_t K = 1;
  bool sig = false;
  FusedHeadGrads need;  // which inputs backward computes a gradient for
};

// Backward, below the forward.
std::vector<Tensor> fused_backward(const Saved& s, float g);

}  // namespace

Tensor fused_mixture_nll(const Tensor& ctx_in, const Tensor& W_in, const Tensor& b_in,
                         const Tensor& log_pi_in, const std::vector<int64_t>& targets, int64_t K,
                         bool sig, const FusedLossOptions& options) {
  check_rank("fused_mixture_nll", ctx_in, 2, "contexts [N*K,E]");
  check_rank("fused_mixture_nll", W_in, 2, "decoder weight [V,E]");
  const int64_t R = ctx_in.size(0), E = ctx_in.size(1), V = W_in.size(0);
  if (W_in.size(1) != E || b_in.shape() != Shape{V})
    throw ShapeError("fused_mixture_nll: contexts " + shape_str(ctx_in.shape()) +
                     ", decoder weight " + shape_str(W_in.shape()) + " and bias " +
                     shape_str(b_in.shape()) + " do not fit");
  if (K < 1 || R % K != 0 || static_cast<int64_t>(targets.size()) * K != R)
    throw ShapeError("fused_mixture_nll: " + std::to_string(R) + " context rows for " +
                     std::to_string(targets.size()) + " targets and K=" + std::to_string(K));
  const int64_t N = R / K;
  if (N == 0) throw ShapeError("fused_mixture_nll: no targets");
  if (log_pi_in.defined() && log_pi_in.shape() != Shape{N, K})
    throw ShapeError("fused_mixture_nll: log π is " + shape_str(log_pi_in.shape()) + ", expected " +
                     shape_str({N, K}));
  if (!log_pi_in.defined() && K != 1) throw ShapeError("fused_mixture_nll: K > 1 needs log π");
  for (int64_t n = 0; n < N; ++n)
    if (targets[n] < 0 || targets[n] >= V)
      throw ShapeError("fused_mixture_nll: target " + std::to_string(targets[n]) + " at row " +
                       std::to_string(n) + " is outside the vocabulary [0, " + std::to_string(V) +
                       ")");

  check_same_device("fused_mixture_nll", {ctx_in, W_in, b_in, log_pi_in});
  // Up to options.keep_logits_floats (1 GiB by default, on either device) the logits stay for
  // backward: memory is plentiful next to the cost of a fourth N*K x E x V GEMM (nn/heads.h).
  const bool keep = is_grad_enabled() && R * V <= options.keep_logits_floats &&
                    (ctx_in.requires_grad() || W_in.requires_grad() || b_in.requires_grad());
  // On the GPU 128M logits (512 MB) a chunk: mos-paper's evaluation batch (105M) is then one GEMM,
  // 205k tokens/s against 193k in 32M chunks on an H100 (bench_train --stream-chunk-rows).
  const int64_t chunk_floats = ctx_in.is_cuda() ? 16 * kStreamChunkFloats : kStreamChunkFloats;
  const int64_t stream_rows =
      options.stream_chunk_rows > 0 ? options.stream_chunk_rows : chunk_floats / V;
  const int64_t chunk_rows = keep ? R : std::max<int64_t>(1, std::min(R, stream_rows));
  if (ctx_in.is_cuda())
    return fused_mixture_nll_cuda(ctx_in, W_in, b_in, log_pi_in, targets, K, sig, keep, chunk_rows);

  Saved s;
  s.ctx = contiguous_data(ctx_in).detach(), s.W = contiguous_data(W_in).detach(),
  s.b = contiguous_data(b_in).detach();
  s.targets = targets, s.K = K, s.sig = sig;
  s.lse.resize(static_cast<size_t>(R));
  s.inv_sum.resize(static_cast<size_t>(R));
  s.resp.resize(static_cast<size_t>(R));
  if (sig && keep) s.target_slope.resize(static_cast<size_t>(R));
  std::vector<float> comp(static_cast<size_t>(R));  // c_nk, the component log-prob of the target
  {
    s.chunk_rows = chunk_rows;
    if (keep) s.logits = Tensor::empty({R, V});
    Tensor block = keep ? Tensor() : Tensor::empty({s.chunk_rows, V});
    const PackedB W_t(/*trans_b=*/true, E, V, s.W.data(), E);
    const int64_t mr = W_t.tile_rows();
    const int64_t tile_rows = (kTileRows + mr - 1) / mr * mr;
    std::vector<RunningLse> run(static_cast<size_t>(s.chunk_rows));
    std::vector<float> z_target(static_cast<size_t>(s.chunk_rows));
    for (int64_t r0 = 0; r0 < R; r0 += s.chunk_rows) {
      const int64_t rows = std::min(s.chunk_rows, R - r0);
      float* z = keep ? s.logits.data() + r0 * V : block.data();
      std::fill(run.begin(), run.end(), RunningLse{});
      parallel_for(rows, tile_rows, [&](int64_t i0, int64_t i1) {
        std::vector<float> scratch(sig ? static_cast<size_t>(kSlabCols) : 0);
        std::vector<float> slope(sig && keep ? static_cast<size_t>(kSlabCols) : 0);
        for (int64_t c0 = 0; c0 < V; c0 += kSlabCols) {
          const int64_t c1 = std::min(V, c0 + kSlabCols), w = c1 - c0;
          for (int64_t t0 = i0; t0 < i1; t0 += tile_rows) {
            const int64_t t1 = std::min(i1, t0 + tile_rows);
            chunk_logits(s.ctx.data(), W_t, r0 + t0, t1 - t0, c0, c1, E, V, z + t0 * V + c0);
            for (int64_t i = t0; i < t1; ++i) {
              float* zr = z + i * V + c0;
              float* xr = zr;
              float slab_max;
              const int64_t t = targets[(r0 + i) / K];
              const bool has_target = t >= c0 && t < c1;
              if (sig) {  // s = z + log σ(z), in a scratch row
                add_bias(zr, s.b.data() + c0, w);
                if (keep) {  // and 2 - σ(z), which scales the kept exponentials below
                  sig_logits_and_slopes(zr, w, scratch.data(), slope.data());
                  if (has_target) s.target_slope[r0 + i] = slope[t - c0];
                } else {
                  for (int64_t j = 0; j < w; ++j) scratch[j] = zr[j] + log_sigmoidf(zr[j]);
                }
                xr = scratch.data();
                slab_max = row_max(xr, w);
                if (has_target) z_target[i] = xr[t - c0];
              } else {
                if (has_target) z_target[i] = zr[t - c0] + s.b.data()[t];
                if (run[i].shift > -INFINITY) {  // the shift is known: one pass
                  const double sum =
                      add_bias_exp_sum(zr, s.b.data() + c0, w, run[i].shift, &slab_max);
                  if (slab_max <= run[i].shift + kShiftSlack) {
                    run[i].sum += sum;
                    continue;
                  }
                  // A jump past the slack (rare): recompute this row's slab and move the shift.
                  chunk_logits(s.ctx.data(), W_t, r0 + i, 1, c0, c1, E, V, zr);
                }
                slab_max = add_bias_max(zr, s.b.data() + c0, w);
              }
              // Softmax: z becomes exp(z - shift) in place (kept for backward, or a scratch block).
              // Kept sigsoftmax: the scratch row becomes exp(s - shift), and the row that held z
              // its gradient's shape, exp(s - shift)(2 - σ(z)) (the shift's moves rescale both).
              run[i].add(xr, w, slab_max, sig && !keep ? nullptr : zr - c0, c0);
              if (sig && keep)
                for (int64_t j = 0; j < w; ++j) zr[j] = xr[j] * slope[j];
            }
          }
        }
      });
      for (int64_t i = 0; i < rows; ++i) {
        const float m = run[i].shift, log_sum = static_cast<float>(std::log(run[i].sum));
        s.lse[r0 + i] = m + log_sum;
        s.inv_sum[r0 + i] = static_cast<float>(1.0 / run[i].sum);  // exp(shift - lse)
        comp[r0 + i] = (z_target[i] - m) - log_sum;
      }
    }
  }
  // Mix in log space: a_nk = log π_nk + c_nk; nll_n = -logsumexp_k a_nk; r_nk = softmax_k a_nk.
  const Tensor log_pi = log_pi_in.defined() ? contiguous_data(log_pi_in) : Tensor();
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    float m = -INFINITY;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = n * K + k;
      s.resp[r] = comp[r] + (log_pi.defined() ? log_pi.data()[r] : 0.0f);
      m = std::max(m, s.resp[r]);
    }
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += std::exp(s.resp[n * K + k] - m);
    const float lse_k = m + static_cast<float>(std::log(acc));
    for (int64_t k = 0; k < K; ++k) s.resp[n * K + k] = std::exp(s.resp[n * K + k] - lse_k);
    total -= lse_k;
  }
  Tensor out = Tensor::scalar(static_cast<float>(total / N));
  s.need = fused_head_grads(ctx_in, W_in, b_in, log_pi_in);
  auto backward = [s = std::move(s)](const Tensor& g) { return fused_backward(s, g.item()); };
  return record_fused_head(sig, out, ctx_in, W_in, b_in, log_pi_in, std::move(backward));
}

namespace {

// Overwrites z [rows,V] (chunk logits fresh from chunk_logits, without b; ctx rows r0..) with
// d loss / d z: backward's pass when the logits were not kept.
void logits_to_grad(const Saved& s, float scale, int64_t r0, int64_t rows, int64_t V, float* z) {
  parallel_for(rows, 4, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = r0 + i, t = s.targets[r / s.K];
      const float c = scale * s.resp[r], lse = s.lse[r];
      float* zr = z + i * V;
      add_bias(zr, s.b.data(), V);
      const float z_target = zr[t];
      if (s.sig) {
        for (int64_t j = 0; j < V; ++j) {
          const float zj = zr[j];
          zr[j] = c * vexp_nonpositive(zj + log_sigmoidf(zj) - lse) * (2.0f - sigmoidf(zj));
        }
        zr[t] -= c * (2.0f - sigmoidf(z_target));
      } else {
        for (int64_t j = 0; j < V; ++j) zr[j] = c * vexp_nonpositive(zr[j] - lse);  // z <= lse
        zr[t] -= c;
      }
    }
  });
}

// d W [V,E] and d b [V] out of [d W^T; d b] [E+1,V]. c: the per-row weights of the targets'
// one-hot terms still to subtract (backward_from_exps), or nullptr. Each thread owns a range of
// vocabulary rows and subtracts the terms of its targets in row order.
void weight_grads(const Saved& s, const Tensor& d_Wb, const float* c, Tensor& d_W, Tensor& d_b) {
  const int64_t R = s.ctx.size(0), E = s.ctx.size(1), V = s.W.size(0);
  if (s.need.W) d_W = Tensor::empty({V, E});
  if (s.need.b) d_b = Tensor::empty({V});
  const float* src = d_Wb.data();
  float* dw = s.need.W ? d_W.data() : nullptr;
  float* db = s.need.b ? d_b.data() : nullptr;
  parallel_for((V + 31) / 32, 2, [&](int64_t q0, int64_t q1) {
    const int64_t v0 = q0 * 32, v1 = std::min(V, q1 * 32);
    if (dw) transpose_rows(src, V, E, v0, v1, dw);  // d W [v, :] = column v of d W^T
    if (db) std::copy(src + E * V + v0, src + E * V + v1, db + v0);
    if (!c) return;
    const float* ctx = s.ctx.data();
    for (int64_t r = 0; r < R; ++r) {
      const int64_t t = s.targets[r / s.K];
      if (t < v0 || t >= v1) continue;
      for (int64_t e = 0; dw && e < E; ++e) dw[t * E + e] -= c[r] * ctx[r * E + e];
      if (db) db[t] -= c[r];
    }
  });
}

// [ctx, 1] [R,E+1], each row scaled by f[r] (f null: not scaled): the left operand of
// [d W^T; d b] = [ctx, 1]^T dz, whose column of ones sums dz's columns into d b.
Tensor ctx_with_ones(const Saved& s, const float* f) {
  const int64_t R = s.ctx.size(0), E = s.ctx.size(1);
  Tensor ctx1 = Tensor::empty({R, E + 1});
  float* c1 = ctx1.data();
  const float* x = s.ctx.data();
  parallel_for(R, 256, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float w = f ? f[r] : 1.0f;
      for (int64_t j = 0; j < E; ++j) c1[r * (E + 1) + j] = w * x[r * E + j];
      c1[r * (E + 1) + E] = w;
    }
  });
  return ctx1;
}

// Backward when the forward kept e = exp(z - shift) (softmax, MoS, MoC):
//   dz_r = c_r (q_r - δ_t) = f_r e_r - c_r δ_t,   c_r = r_nk g / N,  f_r = c_r exp(shift_r - lse_r)
// so each product takes e as it is and the row weights go where they are cheap:
//   d ctx          = diag(f) (e W) - c_r W[t_r] per row          ([R,E] after the GEMM)
//   [d W^T; d b]   = ([ctx, 1] scaled by f)^T e, then d W[t_r] -= c_r ctx_r, d b[t_r] -= c_r.
// Sigsoftmax and MoSig: dz_r = r_nk g / N (q_r - δ_t)(2 - σ(z_r)) with q = exp(s - lse); the
// forward kept e = exp(s - shift)(2 - σ(z)), so the same products serve with f_r as above, and
// only the one-hot terms' weight gains the target's factor: c_r = r_nk g / N (2 - σ(z_t)).
// The plain form (logits_to_grad above) spent a pass of exponentials over all R x V logits (3 ms
// of a 130 ms small-mos step) that this one does not.
void backward_from_exps(const Saved& s, float scale, Tensor& d_ctx, Tensor& d_Wb,
                        std::vector<float>& c) {
  const int64_t R = s.ctx.size(0), E = s.ctx.size(1), V = s.W.size(0);
  const float* e = s.logits.data();
  std::vector<float> f(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    c[r] = scale * s.resp[r], f[r] = c[r] * s.inv_sum[r];
    if (s.sig) c[r] *= s.target_slope[r];
  }
  if (s.need.ctx) {
    gemm(false, false, R, E, V, 1.0f, e, V, s.W.data(), E, 0.0f, d_ctx.data(), E);
    float* d = d_ctx.data();
    const float* W = s.W.data();
    parallel_for(R, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* w_t = W + s.targets[r / s.K] * E;
        for (int64_t j = 0; j < E; ++j) d[r * E + j] = f[r] * d[r * E + j] - c[r] * w_t[j];
      }
    });
  }
  if (d_Wb.defined()) {
    const Tensor ctx1 = ctx_with_ones(s, f.data());  // rows f_r [ctx_r, 1]
    gemm(true, false, E + 1, V, R, 1.0f, ctx1.data(), E + 1, e, V, 0.0f, d_Wb.data(), V);
  }
}

std::vector<Tensor> fused_backward(const Saved& s, float g) {
  const int64_t R = s.ctx.size(0), E = s.ctx.size(1), V = s.W.size(0), N = R / s.K;
  const float scale = g / static_cast<float>(N);
  Tensor d_ctx = s.need.ctx ? Tensor::empty({R, E}) : Tensor();
  // [d W^T; d b] [E+1,V] = [ctx, 1]^T dz in one GEMM. With dz as the right-hand operand the GEMM
  // reads it in place when E+1 rows fit one block of the left operand (mc: 256 rows for the AVX-512
  // kernel, 168 for AVX2; a larger E packs dz), where d W = dz^T ctx would first copy all of dz
  // [R,V] (140 MB for small-mos) into packed panels. The column of ones sums the columns of dz for
  // d b without another pass over it. One transpose at the end gives d W.
  const bool need_wb = s.need.W || s.need.b;
  Tensor d_Wb = need_wb ? Tensor::empty({E + 1, V}) : Tensor();
  std::vector<float> c;  // backward_from_exps: the weights of the one-hot terms left for d W, d b
  if (s.logits.defined() && (s.need.ctx || need_wb)) {
    c.resize(static_cast<size_t>(R));
    backward_from_exps(s, scale, d_ctx, d_Wb, c);
  } else if (s.need.ctx || need_wb) {  // not kept: each chunk of logits recomputed
    const Tensor ctx1 = need_wb ? ctx_with_ones(s, nullptr) : Tensor();
    Tensor block = Tensor::empty({s.chunk_rows, V});
    for (int64_t r0 = 0; r0 < R; r0 += s.chunk_rows) {
      const int64_t rows = std::min(s.chunk_rows, R - r0);
      float* z = block.data();
      // z = ctx W^T for the chunk's rows, whole rows in one product (each of W's rows read once).
      gemm(false, true, rows, V, E, 1.0f, s.ctx.data() + r0 * E, E, s.W.data(), E, 0.0f, z, V);
      logits_to_grad(s, scale, r0, rows, V, z);
      // d ctx = dz W;  [d W^T; d b] += [ctx, 1]^T dz — chunks in a fixed order.
      if (s.need.ctx)
        gemm(false, false, rows, E, V, 1.0f, z, V, s.W.data(), E, 0.0f, d_ctx.data() + r0 * E, E);
      if (need_wb)
        gemm(true, false, E + 1, V, rows, 1.0f, ctx1.data() + r0 * (E + 1), E + 1, z, V,
             r0 == 0 ? 0.0f : 1.0f, d_Wb.data(), V);
    }
  }
  Tensor d_W, d_b;
  if (need_wb) weight_grads(s, d_Wb, c.empty() ? nullptr : c.data(), d_W, d_b);
  Tensor d_pi;
  if (s.need.pi) {
    d_pi = Tensor::empty({N, s.K});
    for (int64_t r = 0; r < R; ++r) d_pi.data()[r] = -scale * s.resp[r];
  }
  return {d_ctx, d_W, d_b, d_pi};
}

}  // namespace

}  // namespace mg
