// The fused training loss of every head on the GPU: mirrors nn/fused_head_loss.cpp (its header
// comment has the equations; the same names are used here). The caller runs the GEMMs (the logits
// z = ctx W^T and the gradients d ctx, d W, d b) with cuda_gemm; the kernels here are the per-row
// parts in between:
//   cuda_add_row_bias        z += b                               (chunk_logits)
//   cuda_head_row_stats      lse[r], comp[r] = log q(t | z_r)     (fused_mixture_nll's per-row
//   loop) cuda_head_mix            resp = softmax_k a, nll = -lse_k a   (fused_mixture_nll's mixing
//   loop) cuda_head_logits_to_grad z <- d loss / d z                    (logits_to_grad)
// Each logits row (V ~ 10,000 floats) is owned by one thread block, which reduces it in a fixed
// order: deterministic, no atomics.
#include <cmath>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/scalar_math.h"

namespace mg {

namespace {

constexpr int kThreads = 256;     // threads per block (a multiple of 32, at most 1024)
constexpr int kMaxGridY = 65535;  // the hardware limit of gridDim.y
static_assert(kThreads % 32 == 0 && kThreads <= 1024,
              "block_reduce needs whole warps, at most 32 of them");

// σ(x) = 1 / (1 + e^-x) and log σ(x) = min(x, 0) - log(1 + e^-|x|) (no overflow, no log 0): the
// CPU's vsigmoid and vlog_sigmoid themselves (cuda/scalar_math.h, written once for both devices).
__device__ __forceinline__ float sigmoid(float x) {
  return vsigmoid(x);
}
__device__ __forceinline__ float log_sigmoid(float x) {
  return vlog_sigmoid(x);
}

// The score a row is normalised over: s = z (softmax) or s = z + log σ(z) (sigsoftmax).
template <bool kSig>
__device__ __forceinline__ float score(float z) {
  return kSig ? z + log_sigmoid(z) : z;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// Combines one value per thread over the whole block and hands the result to every thread: a
// shuffle tree inside each warp, then warp 0 combines the warps' results. The order is fixed by
// blockDim alone, so the result is the same on every run. scratch: 33 elements of shared memory
// that no other reduction uses at the same time.
template <typename T, typename Op>
__device__ T block_reduce(T v, T identity, Op op, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2)
      v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0) scratch[32] = v;
  }
  __syncthreads();
  return scratch[32];
}

// Mirrors chunk_logits' bias loop: z[i,j] += b[j]. Block x covers 256 columns j, and each thread
// walks its column down the rows (stride gridDim.y), so b[j] is read once per thread; the rows
// spread over gridDim.y blocks (at most 65535, the hardware limit).
// z [rows,V], b [V].
__global__ void add_row_bias_kernel(float* __restrict__ z, int64_t rows, int64_t V,
                                    const float* __restrict__ b) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= V) return;
  const float bj = b[j];
  for (int64_t i = blockIdx.y; i < rows; i += gridDim.y) z[i * V + j] += bj;
}

// Mirrors fused_mixture_nll's per-row loop: for chunk row i (context row r = r0 + i, target
// t = targets[r / K]), over the scores s of the row,
//   m = max_j s_j,  log_sum = log Σ_j exp(s_j - m) (summed in double),
//   lse[r] = m + log_sum,  comp[r] = (s_t - m) - log_sum = log q(t | z_r).
// One block per row: V is large, so the block's threads share the row (adjacent threads read
// adjacent logits) and combine their partial max and sum with block_reduce. Sigsoftmax recomputes
// s = z + log σ(z) in both passes instead of storing it: z is left unchanged for backward, as on
// the CPU (which uses a scratch row for the same reason).
// z [rows,V] (chunk rows), targets [N], lse and comp [R] (written at r0..r0+rows-1).
template <bool kSig>
__global__ void head_row_stats_kernel(const float* __restrict__ z, int64_t V, int64_t r0, int64_t K,
                                      const int64_t* __restrict__ targets, float* __restrict__ lse,
                                      float* __restrict__ comp) {
  __shared__ float max_scratch[33];
  __shared__ double sum_scratch[33];
  const int64_t i = blockIdx.x, r = r0 + i, t = targets[r / K];
  const float* zr = z + i * V;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, score<kSig>(zr[j]));
  m = block_reduce(m, -INFINITY, MaxOp(), max_scratch);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum += expf(score<kSig>(zr[j]) - m);
  sum = block_reduce(sum, 0.0, SumOp(), sum_scratch);
  if (threadIdx.x == 0) {
    const float log_sum = static_cast<float>(log(sum));
    lse[r] = m + log_sum;
    comp[r] = (score<kSig>(zr[t]) - m) - log_sum;
  }
}

// Mirrors fused_mixture_nll's mixing loop, per target row n over its K components:
//   a_k = comp[nK+k] + log π[nK+k],  lse_k = m + log Σ_k exp(a_k - m) (double),
//   resp[nK+k] = exp(a_k - lse_k),  nll[n] = -lse_k.
// One thread per row n: K is small (1-20), so a row is a few flops and the rows are independent.
// As on the CPU, a_k is first stored in resp and then overwritten with the responsibility (so resp
// may be comp itself: each element is read before it is written, by the same thread).
// comp, log_pi (or null: K = 1) and resp [R] = [N,K]; nll [N].
__global__ void head_mix_kernel(const float* comp, const float* __restrict__ log_pi, int64_t N,
                                int64_t K, float* resp, float* __restrict__ nll) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float* rn = resp + n * K;
  float m = -INFINITY;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t r = n * K + k;
    rn[k] = comp[r] + (log_pi ? log_pi[r] : 0.0f);
    m = fmaxf(m, rn[k]);
  }
  double acc = 0;
  for (int64_t k = 0; k < K; ++k) acc += expf(rn[k] - m);
  const float lse_k = m + static_cast<float>(log(acc));
  for (int64_t k = 0; k < K; ++k) rn[k] = expf(rn[k] - lse_k);
  nll[n] = -lse_k;
}

// Mirrors logits_to_grad: overwrites chunk row i (context row r = r0 + i, target t) with
//   d loss / d z_j = c (q_j - δ_jt)                c = g inv_n resp[r], q_j = exp(z_j - lse[r])
//                  = c (q_j - δ_jt) (2 - σ(z_j))   sigsoftmax, q_j = exp(z_j + log σ(z_j) - lse[r])
// The CPU writes the whole row and then subtracts the target's term from zr[t], using z_t read
// before the row was overwritten. Here every element is read and written by exactly one thread,
// and the thread that owns j == t subtracts the term itself, from the z_t it has just read: the
// same float operations, and no thread ever reads an element another thread writes (no barrier).
// One block per row, as in head_row_stats: the row's c, lse and t are loaded once. The output
// gradient g is read on the device (the host never waits for it); scale = g / N as on the CPU.
// z [rows,V] (chunk rows, overwritten), targets [N], resp and lse [R], g [1].
template <bool kSig>
__global__ void head_logits_to_grad_kernel(float* __restrict__ z, int64_t V, int64_t r0, int64_t K,
                                           const int64_t* __restrict__ targets,
                                           const float* __restrict__ resp,
                                           const float* __restrict__ lse,
                                           const float* __restrict__ g, float inv_n) {
  const int64_t i = blockIdx.x, r = r0 + i, t = targets[r / K];
  const float scale = *g * inv_n;
  const float c = scale * resp[r], l = lse[r];
  float* zr = z + i * V;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const float zj = zr[j];
    float d;
    if (kSig) {
      const float ds = 2.0f - sigmoid(zj);  // d s_j / d z_j
      d = c * expf(zj + log_sigmoid(zj) - l) * ds;
      if (j == t) d -= c * ds;
    } else {
      d = c * expf(zj - l);
      if (j == t) d -= c;
    }
    zr[j] = d;
  }
}

}  // namespace

// z [rows,V] += b [V].
void cuda_add_row_bias(float* z, int64_t rows, int64_t V, const float* b) {
  if (rows <= 0 || V <= 0) return;
  const dim3 grid(grid_for(V, kThreads),
                  static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
  add_row_bias_kernel<<<grid, kThreads>>>(z, rows, V, b);
  CUDA_CHECK_LAUNCH("add_row_bias_kernel");
}

// z [rows,V] chunk logits of context rows r0..r0+rows-1, targets [N]; writes lse, comp [R] there.
void cuda_head_row_stats(const float* z, int64_t rows, int64_t V, int64_t r0, int64_t K,
                         const int64_t* targets, bool sig, float* lse, float* comp) {
  if (rows <= 0 || V <= 0) return;
  if (sig) {
    head_row_stats_kernel<true>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, V, r0, K, targets, lse, comp);
    CUDA_CHECK_LAUNCH("head_row_stats_kernel<sig>");
  } else {
    head_row_stats_kernel<false>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, V, r0, K, targets, lse, comp);
    CUDA_CHECK_LAUNCH("head_row_stats_kernel");
  }
}

// comp, log_pi (or null), resp [N,K]; nll [N].
void cuda_head_mix(const float* comp, const float* log_pi, int64_t N, int64_t K, float* resp,
                   float* nll) {
  if (N <= 0 || K <= 0) return;
  head_mix_kernel<<<grid_for(N, kThreads), kThreads>>>(comp, log_pi, N, K, resp, nll);
  CUDA_CHECK_LAUNCH("head_mix_kernel");
}

// z [rows,V] chunk logits (overwritten with their gradient), targets [N], resp and lse [R].
void cuda_head_logits_to_grad(float* z, int64_t rows, int64_t V, int64_t r0, int64_t K,
                              const int64_t* targets, const float* resp, const float* lse,
                              const float* g, float inv_n, bool sig) {
  if (rows <= 0 || V <= 0) return;
  if (sig) {
    head_logits_to_grad_kernel<true>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, V, r0, K, targets, resp, lse, g, inv_n);
    CUDA_CHECK_LAUNCH("head_logits_to_grad_kernel<sig>");
  } else {
    head_logits_to_grad_kernel<false>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, V, r0, K, targets, resp, lse, g, inv_n);
    CUDA_CHECK_LAUNCH("head_logits_to_grad_kernel");
  }
}

}  // namespace mg
