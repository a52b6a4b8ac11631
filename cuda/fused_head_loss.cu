// The fused training loss of every head on the GPU: mirrors nn/fused_head_loss.cpp (its header
// comment has the equations; the same names are used here). The caller runs the GEMMs (the logits
// z = ctx W^T and the gradients d ctx, d W, d b) with cuda_gemm; the kernels here are the per-row
// parts in between:
//   cuda_head_row_stats       lse[r], comp[r] = log q(t | z_r + b)   (the per-row loop)
//   cuda_head_mix             resp = softmax_k a, nll = -lse_k a     (the mixing loop)
//   cuda_head_logits_to_grad  z <- d loss / d (z + b)                (logits_to_grad)
// As on the CPU (chunk_logits), the GEMM leaves the bias b out and the pass that reads z next adds
// it: both row kernels add b[j] as they read z[j] (the same float sum, so the same scores). The
// GPU had a bias pass of its own before, a whole read and write of the [rows,V] logits (840 MB per
// mos-paper evaluation batch).
// Each logits row (V ~ 10,000 floats) is owned by one thread block, which reduces it in a fixed
// order: deterministic, no atomics.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "math/scalar_math.h"

namespace mg {

namespace {

constexpr int kThreads = 256;  // threads per block (a multiple of 32, at most 1024)
static_assert(kThreads % 32 == 0 && kThreads <= 1024,
              "block_reduce needs whole warps, at most 32 of them");

// σ(x) = 1 / (1 + e^-x) and log σ(x) = min(x, 0) - log(1 + e^-|x|) (no overflow, no log 0): the
// CPU's vsigmoid and vlog_sigmoid themselves (math/scalar_math.h, written once for both devices).
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

// Mirrors fused_mixture_nll's per-row loop: for chunk row i (context row r = r0 + i, target
// t = targets[r / K]), over the scores s of the row's logits z + b,
//   m = max_j s_j,  log_sum = log Σ_j exp(s_j - m) (summed in double),
//   lse[r] = m + log_sum,  comp[r] = (s_t - m) - log_sum = log q(t | z_r + b).
// One block per row: V is large, so the block's threads share the row (adjacent threads read
// adjacent logits) and combine their partial max and sum with block_reduce. The row is read from
// global memory once (kStaged): the max pass keeps each score in shared memory (float4 loads where
// V, z and b allow: vec4, which the launcher sets only when V % 4 == 0) and the sum pass reads
// them there. With both passes reading z, a 32M-logit chunk (128 MB) took 126 µs on an H100: ~1
// TB/s counting the row once, a third of the memory's rate.
// A row longer than a block's shared memory (V above ~58,000 on an H100) reads z twice instead.
// z itself is never written here: backward reads it again, as on the CPU (which keeps
// sigsoftmax's scores in a scratch row for the same reason).
// z [rows,V] (chunk rows, without the bias), b [V], targets [N], lse and comp [R] (written at
// r0..r0+rows-1); dynamic shared memory [V] when kStaged.
template <bool kSig, bool kStaged>
__global__ void head_row_stats_kernel(const float* __restrict__ z, const float* __restrict__ b,
                                      int64_t V, int64_t r0, int64_t K,
                                      const int64_t* __restrict__ targets, bool vec4,
                                      float* __restrict__ lse, float* __restrict__ comp) {
  extern __shared__ __align__(16) float scores[];  // [V]: s_j of this row (kStaged); float4 stores
  __shared__ float max_scratch[33];
  __shared__ double sum_scratch[33];
  const int64_t i = blockIdx.x, r = r0 + i, t = targets[r / K];
  const float* zr = z + i * V;
  float m = -INFINITY;
  if (kStaged && vec4) {
    const float4* z4 = reinterpret_cast<const float4*>(zr);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    for (int64_t q = threadIdx.x; q < V / 4; q += blockDim.x) {
      const float4 zq = z4[q], bq = b4[q];
      const float4 sq = make_float4(score<kSig>(zq.x + bq.x), score<kSig>(zq.y + bq.y),
                                    score<kSig>(zq.z + bq.z), score<kSig>(zq.w + bq.w));
      reinterpret_cast<float4*>(scores)[q] = sq;
      m = fmaxf(m, fmaxf(fmaxf(sq.x, sq.y), fmaxf(sq.z, sq.w)));
    }
  } else {
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float sj = score<kSig>(zr[j] + b[j]);
      if (kStaged) scores[j] = sj;
      m = fmaxf(m, sj);
    }
  }
  m = block_reduce(m, -INFINITY, MaxOp(), max_scratch);  // its barrier also publishes scores
  auto score_at = [&](int64_t j) { return kStaged ? scores[j] : score<kSig>(zr[j] + b[j]); };
  double sum = 0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum += expf(score_at(j) - m);
  sum = block_reduce(sum, 0.0, SumOp(), sum_scratch);
  if (threadIdx.x == 0) {
    const float log_sum = static_cast<float>(log(sum));
    lse[r] = m + log_sum;
    comp[r] = (score_at(t) - m) - log_sum;
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

// Mirrors logits_to_grad: overwrites chunk row i (context row r = r0 + i, target t; z_j here is the
// logit with its bias, zr[j] + b[j]) with
//   d loss / d z_j = c (q_j - δ_jt)                c = g inv_n resp[r], q_j = exp(z_j - lse[r])
//                  = c (q_j - δ_jt) (2 - σ(z_j))   sigsoftmax, q_j = exp(z_j + log σ(z_j) - lse[r])
// The CPU writes the whole row and then subtracts the target's term from zr[t], using z_t read
// before the row was overwritten. Here every element is read and written by exactly one thread,
// and the thread that owns j == t subtracts the term itself, from the z_t it has just read: the
// same float operations, and no thread ever reads an element another thread writes (no barrier).
// One block per row, as in head_row_stats: the row's c, lse and t are loaded once. The output
// gradient g is read on the device (the host never waits for it); scale = g / N as on the CPU.
// z [rows,V] (chunk rows without the bias, overwritten), b [V], targets [N], resp and lse [R],
// g [1].
template <bool kSig>
__global__ void head_logits_to_grad_kernel(float* __restrict__ z, const float* __restrict__ b,
                                           int64_t V, int64_t r0, int64_t K,
                                           const int64_t* __restrict__ targets,
                                           const float* __restrict__ resp,
                                           const float* __restrict__ lse,
                                           const float* __restrict__ g, float inv_n) {
  const int64_t i = blockIdx.x, r = r0 + i, t = targets[r / K];
  const float scale = *g * inv_n;
  const float c = scale * resp[r], l = lse[r];
  float* zr = z + i * V;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const float zj = zr[j] + b[j];
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

// The dynamic shared memory a staged row-stats block may have: the GPU's per-block opt-in limit
// less the kernel's static reductions' scratch, allowed once per kernel.
template <bool kSig>
size_t row_stats_staged_limit() {
  static const size_t limit = [] {
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes attributes{};
    CUDA_CHECK(cudaFuncGetAttributes(&attributes, head_row_stats_kernel<kSig, true>));
    const int dynamic = optin - static_cast<int>(attributes.sharedSizeBytes);
    CUDA_CHECK(cudaFuncSetAttribute(head_row_stats_kernel<kSig, true>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
    return static_cast<size_t>(dynamic);
  }();
  return limit;
}

template <bool kSig>
void launch_row_stats(const float* z, const float* b, int64_t rows, int64_t V, int64_t r0,
                      int64_t K, const int64_t* targets, float* lse, float* comp) {
  const size_t bytes = static_cast<size_t>(V) * sizeof(float);
  const auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec4 = V % 4 == 0 && aligned(z) && aligned(b);  // then every row starts aligned too
  if (bytes <= row_stats_staged_limit<kSig>())
    head_row_stats_kernel<kSig, true><<<static_cast<unsigned>(rows), kThreads, bytes>>>(
        z, b, V, r0, K, targets, vec4, lse, comp);
  else
    head_row_stats_kernel<kSig, false>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, b, V, r0, K, targets, false, lse, comp);
  CUDA_CHECK_LAUNCH(kSig ? "head_row_stats_kernel<sig>" : "head_row_stats_kernel");
}

}  // namespace

int64_t cuda_head_row_stats_staged_max_v() {
  return static_cast<int64_t>(
      std::min(row_stats_staged_limit<false>(), row_stats_staged_limit<true>()) / sizeof(float));
}

// z [rows,V] chunk logits (no bias) of context rows r0..r0+rows-1, b [V], targets [N]; writes lse,
// comp [R] there.
void cuda_head_row_stats(const float* z, const float* b, int64_t rows, int64_t V, int64_t r0,
                         int64_t K, const int64_t* targets, bool sig, float* lse, float* comp) {
  if (rows <= 0 || V <= 0) return;
  if (sig)
    launch_row_stats<true>(z, b, rows, V, r0, K, targets, lse, comp);
  else
    launch_row_stats<false>(z, b, rows, V, r0, K, targets, lse, comp);
}

// comp, log_pi (or null), resp [N,K]; nll [N].
void cuda_head_mix(const float* comp, const float* log_pi, int64_t N, int64_t K, float* resp,
                   float* nll) {
  if (N <= 0 || K <= 0) return;
  head_mix_kernel<<<grid_for(N, kThreads), kThreads>>>(comp, log_pi, N, K, resp, nll);
  CUDA_CHECK_LAUNCH("head_mix_kernel");
}

// z [rows,V] chunk logits without the bias (overwritten with their gradient), b [V], targets [N],
// resp and lse [R].
void cuda_head_logits_to_grad(float* z, const float* b, int64_t rows, int64_t V, int64_t r0,
                              int64_t K, const int64_t* targets, const float* resp,
                              const float* lse, const float* g, float inv_n, bool sig) {
  if (rows <= 0 || V <= 0) return;
  if (sig) {
    head_logits_to_grad_kernel<true>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, b, V, r0, K, targets, resp, lse, g, inv_n);
    CUDA_CHECK_LAUNCH("head_logits_to_grad_kernel<sig>");
  } else {
    head_logits_to_grad_kernel<false>
        <<<static_cast<unsigned>(rows), kThreads>>>(z, b, V, r0, K, targets, resp, lse, g, inv_n);
    CUDA_CHECK_LAUNCH("head_logits_to_grad_kernel");
  }
}

}  // namespace mg
