// Reductions: the GPU side of autograd/ops_reduce.cpp (sum, sum over a dim, logsumexp) and
// lm/optim.cpp's sum of squares for clip_grad_norm (softmax: cuda/ops_softmax.cu).
//
// Deterministic: no atomics. Every output is computed by one thread, or by one block with a
// fixed-shape tree, so the same input gives the same bits on every run. Sums are accumulated in
// double (as on the CPU, except that its sum over a dim with inner > 1 adds float rows); the order
// differs from the CPU's, so results agree with it to rounding, not to the bit.
//
// A reduction over one dim of a contiguous tensor is seen, as on the CPU (tensor/kernels.h
// DimSplit), as outer*inner lines of n elements: line w starts at (w / inner)*n*inner + w % inner
// and its elements are inner apart. Two shapes of work:
//   - inner == 1 and n long (softmax over V = 10,000 words): one block per line, its threads
//     striding along the line (coalesced) and combining with a block reduction;
//   - otherwise (inner > 1, or short lines such as K = 15 experts): one thread per line,
//     neighbouring threads taking neighbouring lines (coalesced when inner > 1); sum_dim splits
//     each line over a few threads as well (see sum_dim_columns_kernel).
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/line_reduce.h"

namespace mg {

namespace {

using namespace line_reduce;

constexpr int kMaxPartials =
    1024;  // sum_all / sum_squares: at most this many per-block partial sums

// ---- sum of all elements (ops_reduce.cpp sum) and of squares (lm/optim.cpp clip_grad_norm) ----

// Pass 1: block b sums x [n] (or x² when kSquares) over elements b*kThreads + t +
// k*gridDim.x*kThreads into partial[b] (double). The grid size depends only on n, so the grouping
// is fixed.
template <bool kSquares>
__global__ void sum_partials_kernel(const float* x, int64_t n, double* partial) {
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    acc += kSquares ? v * v : v;
  }
  acc = block_reduce(acc, SumOp(), 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Pass 2, one block: total = Σ partial [P]; written as a float to *out_f and/or a double to *out_d.
__global__ void sum_finish_kernel(const double* partial, int P, float* out_f, double* out_d) {
  double acc = 0;
  for (int i = threadIdx.x; i < P; i += blockDim.x) acc += partial[i];
  acc = block_reduce(acc, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    if (out_f) *out_f = static_cast<float>(acc);
    if (out_d) *out_d = acc;
  }
}

// Number of pass-1 blocks for n elements: one element per thread up to kMaxPartials blocks.
int partial_count(int64_t n) {
  const int64_t p = (n + kThreads - 1) / kThreads;
  return static_cast<int>(p < 1 ? 1 : (p > kMaxPartials ? kMaxPartials : p));
}

// Both passes: the total to *out_f (a float) and/or *out_d (a double), both on the device.
template <bool kSquares>
void sum_two_pass(const float* x, int64_t n, float* out_f, double* out_d) {
  const int P = partial_count(n);
  const size_t bytes = sizeof(double) * static_cast<size_t>(P);
  double* scratch = static_cast<double*>(cuda_allocate_bytes(bytes));
  try {
    sum_partials_kernel<kSquares><<<P, kThreads>>>(x, n, scratch);
    CUDA_CHECK_LAUNCH(kSquares ? "sum_partials_kernel<squares>" : "sum_partials_kernel");
    sum_finish_kernel<<<1, kThreads>>>(scratch, P, out_f, out_d);
    CUDA_CHECK_LAUNCH("sum_finish_kernel");
  } catch (...) {
    cuda_release_bytes(scratch, bytes);
    throw;
  }
  // Released while the kernels may still run: fine, because every launch is on the default stream,
  // so whoever gets this memory next writes it only after they have finished.
  cuda_release_bytes(scratch, bytes);
}

// ---- sum over one dim (ops_reduce.cpp sum_dim_kernel): out [outer*inner] ----

// inner == 1, long lines: block per line, out[w] = Σ_j x[w*n + j].
__global__ void sum_dim_block_kernel(const float* x, int64_t lines, int64_t n, float* out) {
  for (int64_t w = blockIdx.x; w < lines;
       w += gridDim.x) {  // block-uniform: safe around block_reduce
    const float* line = x + w * n;
    double acc = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) acc += line[j];
    acc = block_reduce(acc, SumOp(), 0.0);
    if (threadIdx.x == 0) out[w] = static_cast<float>(acc);
  }
}

// Everything else (inner > 1, e.g. bias gradients: [N, V] summed over N is outer 1, n N, inner V;
// or short lines): a block of kColumnLines x kColumnParts threads takes kColumnLines neighbouring
// lines; thread (l, p) sums elements j = p, p + kColumnParts, ... of line l, and thread (l, 0) then
// adds the kColumnParts partial sums in order p = 0, 1, ...: kColumnParts times the parallelism of
// a thread per line (a single outer has only `inner` lines), and still a fixed order.
constexpr int kColumnLines = 32, kColumnParts = 8;
__global__ void sum_dim_columns_kernel(const float* x, CudaSplit s, float* out) {
  __shared__ double part[kColumnParts][kColumnLines];
  const int l = threadIdx.x, p = threadIdx.y;
  const int64_t lines = s.outer * s.inner;
  for (int64_t w0 = static_cast<int64_t>(blockIdx.x) * kColumnLines; w0 < lines;
       w0 += static_cast<int64_t>(gridDim.x) *
             kColumnLines) {  // block-uniform: safe around __syncthreads
    const int64_t w = w0 + l;
    double acc = 0;
    if (w < lines) {
      const float* line = x + (w / s.inner) * s.n * s.inner + (w % s.inner);
      for (int64_t j = p; j < s.n; j += kColumnParts) acc += line[j * s.inner];
    }
    part[p][l] = acc;
    __syncthreads();
    if (p == 0 && w < lines) {
      double total = 0;
      for (int q = 0; q < kColumnParts; ++q) total += part[q][l];
      out[w] = static_cast<float>(total);
    }
    __syncthreads();  // part is rewritten by the next iteration
  }
}

// ---- logsumexp over one dim (ops_reduce.cpp logsumexp): out [outer*inner] ----

// inner == 1, long lines: block per line. max, then Σ exp(x - max) in double; a line whose max is
// ±inf gives that max (as the CPU's `if (std::isinf(m))`).
__global__ void logsumexp_block_kernel(const float* x, int64_t lines, int64_t n, float* out) {
  for (int64_t w = blockIdx.x; w < lines; w += gridDim.x) {
    const float* line = x + w * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = line[j] > m ? line[j] : m;
    m = block_reduce(m, MaxOp(), -INFINITY);
    if (isinf(m)) {  // m is the same in every thread: the whole block skips the sum together
      if (threadIdx.x == 0) out[w] = m;
      continue;
    }
    double acc = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) acc += expf(line[j] - m);
    acc = block_reduce(acc, SumOp(), 0.0);
    if (threadIdx.x == 0) out[w] = m + static_cast<float>(log(acc));
  }
}

// Thread per line: the same arithmetic, sequentially.
__global__ void logsumexp_thread_kernel(const float* x, CudaSplit s, float* out) {
  const int64_t lines = s.outer * s.inner;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < lines;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float* line = x + (w / s.inner) * s.n * s.inner + (w % s.inner);
    float m = -INFINITY;
    for (int64_t j = 0; j < s.n; ++j) m = line[j * s.inner] > m ? line[j * s.inner] : m;
    if (isinf(m)) {
      out[w] = m;
      continue;
    }
    double acc = 0;
    for (int64_t j = 0; j < s.n; ++j) acc += expf(line[j * s.inner] - m);
    out[w] = m + static_cast<float>(log(acc));
  }
}

}  // namespace

void cuda_sum_all(const float* x, int64_t n, float* out) {
  if (n <= 0) {  // the empty sum: 0 (the CPU's sum of no partials)
    cuda_fill(out, 1, 0.0f);
    return;
  }
  sum_two_pass<false>(x, n, out, nullptr);
}

void cuda_sum_squares(int count, const float* const* xs, const int64_t* ns, double* host_totals) {
  if (count <= 0) return;
  const size_t bytes = sizeof(double) * static_cast<size_t>(count);
  double* totals = static_cast<double*>(cuda_allocate_bytes(bytes));
  try {
    for (int i = 0; i < count; ++i) {
      if (ns[i] <= 0)
        CUDA_CHECK(cudaMemsetAsync(totals + i, 0, sizeof(double), 0));
      else
        sum_two_pass<true>(xs[i], ns[i], nullptr, totals + i);
    }
    cuda_copy_to_host(host_totals, totals, bytes);  // the one synchronisation
  } catch (...) {
    cuda_release_bytes(totals, bytes);
    throw;
  }
  cuda_release_bytes(totals, bytes);
}

void cuda_sum_dim(const float* x, CudaSplit s, float* out) {
  check_split(s, "cuda_sum_dim");
  const int64_t lines = s.outer * s.inner;
  if (lines == 0) return;
  if (block_per_line(s)) {
    sum_dim_block_kernel<<<line_blocks(lines), kThreads>>>(x, lines, s.n, out);
    CUDA_CHECK_LAUNCH("sum_dim_block_kernel");
  } else {
    const int64_t groups = (lines + kColumnLines - 1) / kColumnLines;
    const unsigned blocks = static_cast<unsigned>(groups < kMaxGrid ? groups : kMaxGrid);
    sum_dim_columns_kernel<<<blocks, dim3(kColumnLines, kColumnParts)>>>(x, s, out);
    CUDA_CHECK_LAUNCH("sum_dim_columns_kernel");
  }
}

void cuda_logsumexp_dim(const float* x, CudaSplit s, float* out) {
  check_split(s, "cuda_logsumexp_dim");
  const int64_t lines = s.outer * s.inner;
  if (lines == 0) return;
  if (block_per_line(s)) {
    logsumexp_block_kernel<<<line_blocks(lines), kThreads>>>(x, lines, s.n, out);
    CUDA_CHECK_LAUNCH("logsumexp_block_kernel");
  } else {
    logsumexp_thread_kernel<<<thread_blocks(lines), kThreads>>>(x, s, out);
    CUDA_CHECK_LAUNCH("logsumexp_thread_kernel");
  }
}

}  // namespace mg
