// Row lookups and their scatter backward: the GPU side of autograd/ops_index.cpp (index_select,
// the embedding; gather_rows, reading one element per row) and autograd/ops_loss.cpp (nll_loss's
// backward, a scatter of one value per row).
//
// Index arrays are int64 device arrays, already range-checked on the host by the caller (as the CPU
// ops do before touching memory). No atomics: the embedding backward gets, from the caller, the
// positions grouped by row (see cuda_index_add), so each gradient row has exactly one owner.
#include <algorithm>

#include "cuda/backend.h"
#include "cuda/check.h"

namespace mg {

namespace {

constexpr int kThreads = 256;     // threads per block for the one-thread-per-element kernels
constexpr int kRowThreads = 128;  // threads per block for index_add (one block per gradient row)
constexpr unsigned kMaxGrid = 65535;

// Blocks for a grid-stride loop over n items (one per thread up to kMaxGrid blocks).
unsigned blocks_for(int64_t n) {
  return std::min<unsigned>(grid_for(n, kThreads), kMaxGrid);
}

// ops_index.cpp index_select: out [n, C] row i = table [R, C] row index[i]. One thread per output
// element (flattened i*C + c), so a warp reads and writes C-contiguous runs: coalesced.
__global__ void index_select_kernel(const float* table, int64_t C, const int64_t* index, int64_t n,
                                    float* out) {
  const int64_t total = n * C;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k / C, c = k % C;
    out[k] = table[index[i] * C + c];
  }
}

// index_select's backward (the embedding gradient): grad [R, C] row index[...] += rows of g [n, C].
// The CPU adds the rows of g into grad in position order, one thread per column. Here block u owns
// the u-th distinct row: its positions order[starts[u] .. starts[u+1]) are in increasing position
// order (a stable sort by index), and each thread adds them, column by column, into a float
// accumulator that starts at grad's current value: the same additions in the same order as the
// CPU, so the same bits, and no two blocks ever touch the same row (no atomics).
__global__ void index_add_kernel(const float* g, int64_t C, const int64_t* index,
                                 const int64_t* order, const int64_t* starts, int64_t U,
                                 float* grad) {
  for (int64_t u = blockIdx.x; u < U; u += gridDim.x) {
    const int64_t k0 = starts[u], k1 = starts[u + 1];
    if (k0 >= k1) continue;  // an empty group (not produced by a proper grouping, but harmless)
    float* dst = grad + index[order[k0]] * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = dst[c];
      for (int64_t k = k0; k < k1; ++k) acc += g[order[k] * C + c];
      dst[c] = acc;
    }
  }
}

// ops_index.cpp gather_rows: out [N] = x [N, C] at (i, index[i]). One thread per row.
__global__ void gather_rows_kernel(const float* x, int64_t N, int64_t C, const int64_t* index,
                                   float* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = x[i * C + index[i]];
}

// gather_rows' and nll_loss's backward: grad [N, C] at (i, index[i]) = g [N] [i] * scale, or scale
// alone when g is null (nll_loss: -g/N for every row). One thread per row; every other element of
// grad stays as the caller left it (zero).
__global__ void scatter_rows_kernel(const float* g, float scale, int64_t N, int64_t C,
                                    const int64_t* index, float* grad) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    grad[i * C + index[i]] = g ? g[i] * scale : scale;
}

}  // namespace

void cuda_index_select(const float* table, int64_t C, const int64_t* index, int64_t n, float* out) {
  if (n <= 0 || C <= 0) return;
  index_select_kernel<<<blocks_for(n * C), kThreads>>>(table, C, index, n, out);
  CUDA_CHECK_LAUNCH("index_select_kernel");
}

void cuda_index_add(const float* g, int64_t C, const int64_t* index, const int64_t* order,
                    const int64_t* starts, int64_t U, float* grad) {
  if (U <= 0 || C <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(U, kMaxGrid));
  index_add_kernel<<<blocks, kRowThreads>>>(g, C, index, order, starts, U, grad);
  CUDA_CHECK_LAUNCH("index_add_kernel");
}

void cuda_gather_rows(const float* x, int64_t N, int64_t C, const int64_t* index, float* out) {
  if (N <= 0) return;
  gather_rows_kernel<<<blocks_for(N), kThreads>>>(x, N, C, index, out);
  CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

void cuda_scatter_rows(const float* g, float scale, int64_t N, int64_t C, const int64_t* index,
                       float* grad) {
  if (N <= 0) return;
  scatter_rows_kernel<<<blocks_for(N), kThreads>>>(g, scale, N, C, index, grad);
  CUDA_CHECK_LAUNCH("scatter_rows_kernel");
}

}  // namespace mg
