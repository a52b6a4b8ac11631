// The optimizer update on the GPU: mirrors Optimizer::step in lm/optim.cpp, one kernel per rule.
// The host side (step count, bias corrections bc1 = 1 - β1^t, bc2 = 1 - β2^t, the ASGD weight
// mu = 1/t, which parameters have a gradient) stays in Optimizer::step; this file is its inner
// loop.
//
// Every parameter element is updated independently of all others, so each kernel is one thread per
// element. The expressions are written exactly as on the CPU, in the same order, with the precise
// division and square root (no fast math), so the results agree with the CPU to the last bit or
// so: both compilers may fuse a*b + c into one FMA, and where they choose differently the results
// differ in the last bit.
#include <stdexcept>

#include "cuda/backend.h"
#include "cuda/check.h"

namespace mg {

namespace {

constexpr int kThreads = 256;

// Mirrors the SGD case: p -= lr (g + wd p).
// p, g [n].
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g, int64_t n, float lr,
                           float wd) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  p[i] -= lr * (g[i] + wd * p[i]);
}

// Mirrors the ASGD case: the SGD step, then the running mean of the iterates a += mu (p - a)
// with mu = 1/t (read from the updated p, as on the CPU).
// p, g, a [n].
__global__ void asgd_kernel(float* __restrict__ p, const float* __restrict__ g,
                            float* __restrict__ a, int64_t n, float lr, float wd, float mu) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float pi = p[i] - lr * (g[i] + wd * p[i]);
  p[i] = pi;
  a[i] += mu * (pi - a[i]);
}

// Mirrors the Adam case (Kingma & Ba 2015, with L2 weight decay added to the gradient):
//   g' = g + wd p,  a = β1 a + (1-β1) g',  b = β2 b + (1-β2) g'²,
//   p -= lr (a / bc1) / (sqrt(b / bc2) + eps)
// p, g, a (first moment), b (second moment) [n].
__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g,
                            float* __restrict__ a, float* __restrict__ b, int64_t n, float lr,
                            float wd, float beta1, float beta2, float eps, float bc1, float bc2) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i] + wd * p[i];
  const float ai = beta1 * a[i] + (1 - beta1) * gi;
  const float bi = beta2 * b[i] + (1 - beta2) * gi * gi;
  a[i] = ai;
  b[i] = bi;
  p[i] -= lr * (ai / bc1) / (sqrtf(bi / bc2) + eps);
}

}  // namespace

// p, g [n]; a, b [n] the optimizer buffers: a for ASGD (the average) and Adam (first moment),
// b for Adam (second moment); null where the rule has none.
void cuda_optimizer_step(CudaOptimizer kind, float* p, const float* g, float* a, float* b,
                         int64_t n, float lr, float wd, float mu, float beta1, float beta2,
                         float eps, float bc1, float bc2) {
  if (n <= 0) return;
  switch (kind) {
    case CudaOptimizer::SGD:
      sgd_kernel<<<grid_for(n, kThreads), kThreads>>>(p, g, n, lr, wd);
      CUDA_CHECK_LAUNCH("sgd_kernel");
      break;
    case CudaOptimizer::ASGD:
      if (!a)
        throw std::runtime_error("cuda_optimizer_step: ASGD needs its average buffer (a is null)");
      asgd_kernel<<<grid_for(n, kThreads), kThreads>>>(p, g, a, n, lr, wd, mu);
      CUDA_CHECK_LAUNCH("asgd_kernel");
      break;
    case CudaOptimizer::Adam:
      if (!a || !b)
        throw std::runtime_error(
            "cuda_optimizer_step: Adam needs both moment buffers (a or b is null)");
      adam_kernel<<<grid_for(n, kThreads), kThreads>>>(p, g, a, b, n, lr, wd, beta1, beta2, eps,
                                                       bc1, bc2);
      CUDA_CHECK_LAUNCH("adam_kernel");
      break;
  }
}

}  // namespace mg
