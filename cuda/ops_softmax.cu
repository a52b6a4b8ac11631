// softmax / log_softmax and their backward: the GPU side of autograd/ops_softmax.cpp. Lines as in
// cuda/line_reduce.h; each output computed by one thread or by one block's fixed tree, so the same
// input gives the same bits on every run. Sums in double, as on the CPU, in another order: results
// agree with it to rounding, not to the bit.
#include "cuda/line_reduce.h"
#include "math/formulas.h"

namespace mg {

namespace {

using namespace line_reduce;

// ---- softmax / log_softmax (ops_softmax.cpp softmax_kernel): y has x's shape ----
// y_j = (x_j - m) - log Σ (log space: not x_j - (m + log Σ), which would round m + log Σ to float
// first), or exp(x_j - m) * (1 / Σ).

// inner == 1, long lines: block per line.
__global__ void softmax_block_kernel(const float* x, int64_t lines, int64_t n, float* y,
                                     bool log_space) {
  for (int64_t w = blockIdx.x; w < lines; w += gridDim.x) {
    const float* line = x + w * n;
    float* oline = y + w * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = line[j] > m ? line[j] : m;
    m = block_reduce(m, MaxOp(), -INFINITY);
    double acc = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) acc += expf(line[j] - m);
    acc = block_reduce(acc, SumOp(), 0.0);
    const float log_sum = static_cast<float>(log(acc));
    const float inv_sum = static_cast<float>(1.0 / acc);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float shifted = line[j] - m;
      oline[j] = log_space ? shifted - log_sum : expf(shifted) * inv_sum;
    }
  }
}

// Thread per line.
__global__ void softmax_thread_kernel(const float* x, CudaSplit s, float* y, bool log_space) {
  const int64_t lines = s.outer * s.inner;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < lines;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (w / s.inner) * s.n * s.inner + (w % s.inner);
    const float* line = x + base;
    float* oline = y + base;
    float m = -INFINITY;
    for (int64_t j = 0; j < s.n; ++j) m = line[j * s.inner] > m ? line[j * s.inner] : m;
    double acc = 0;
    for (int64_t j = 0; j < s.n; ++j) acc += expf(line[j * s.inner] - m);
    const float log_sum = static_cast<float>(log(acc));
    const float inv_sum = static_cast<float>(1.0 / acc);
    for (int64_t j = 0; j < s.n; ++j) {
      const float shifted = line[j * s.inner] - m;
      oline[j * s.inner] = log_space ? shifted - log_sum : expf(shifted) * inv_sum;
    }
  }
}

// ---- backward (ops_softmax.cpp softmax_backward_kernel): dx has y's shape ----
//   log_softmax: dx_j = g_j - exp(y_j) * Σ_k g_k
//   softmax:     dx_j = y_j * (g_j - Σ_k g_k y_k)
// The sum in double, rounded to float once, as on the CPU.

// inner == 1, long lines: block per line.
__global__ void softmax_backward_block_kernel(const float* g, const float* y, int64_t lines,
                                              int64_t n, float* dx, bool log_space) {
  for (int64_t w = blockIdx.x; w < lines; w += gridDim.x) {
    const float* gl = g + w * n;
    const float* yl = y + w * n;
    float* ol = dx + w * n;
    double acc = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) acc += log_space ? gl[j] : gl[j] * yl[j];
    const float total = static_cast<float>(block_reduce(acc, SumOp(), 0.0));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      ol[j] = softmax_backward_entry(gl[j], yl[j], total, log_space);
  }
}

// Thread per line.
__global__ void softmax_backward_thread_kernel(const float* g, const float* y, CudaSplit s,
                                               float* dx, bool log_space) {
  const int64_t lines = s.outer * s.inner;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < lines;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (w / s.inner) * s.n * s.inner + (w % s.inner);
    double acc = 0;
    for (int64_t j = 0; j < s.n; ++j) {
      const int64_t k = base + j * s.inner;
      acc += log_space ? g[k] : g[k] * y[k];
    }
    const float total = static_cast<float>(acc);
    for (int64_t j = 0; j < s.n; ++j) {
      const int64_t k = base + j * s.inner;
      dx[k] = softmax_backward_entry(g[k], y[k], total, log_space);
    }
  }
}

}  // namespace

void cuda_softmax(const float* x, CudaSplit s, float* y, bool log_space) {
  check_split(s, "cuda_softmax");
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.n == 0) return;
  if (block_per_line(s)) {
    softmax_block_kernel<<<line_blocks(lines), kThreads>>>(x, lines, s.n, y, log_space);
    CUDA_CHECK_LAUNCH("softmax_block_kernel");
  } else {
    softmax_thread_kernel<<<thread_blocks(lines), kThreads>>>(x, s, y, log_space);
    CUDA_CHECK_LAUNCH("softmax_thread_kernel");
  }
}

void cuda_softmax_backward(const float* g, const float* y, CudaSplit s, float* dx, bool log_space) {
  check_split(s, "cuda_softmax_backward");
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.n == 0) return;
  if (block_per_line(s)) {
    softmax_backward_block_kernel<<<line_blocks(lines), kThreads>>>(g, y, lines, s.n, dx,
                                                                    log_space);
    CUDA_CHECK_LAUNCH("softmax_backward_block_kernel");
  } else {
    softmax_backward_thread_kernel<<<thread_blocks(lines), kThreads>>>(g, y, s, dx, log_space);
    CUDA_CHECK_LAUNCH("softmax_backward_thread_kernel");
  }
}

}  // namespace mg
