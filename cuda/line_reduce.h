// What the line reductions of cuda/ops_reduce.cu and cuda/ops_softmax.cu share: a reduction over
// one dim of a contiguous tensor is seen, as on the CPU (tensor/kernels.h DimSplit), as
// outer*inner lines of n elements, taken a block per line (inner == 1, n long) or a thread per
// line; the block's fixed reduction tree; the grids. Device code, for .cu files only.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda/backend.h"
#include "cuda/check.h"

namespace mg {
namespace line_reduce {

constexpr int kThreads =
    256;  // threads per block; a multiple of 32 (block_reduce needs whole warps)
constexpr int64_t kLongLine = 128;  // inner == 1 lines at least this long get a block each
constexpr unsigned kMaxGrid =
    65535;  // block-per-line kernels loop when there are more lines than this

struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// The reduction of v over the block's threads, returned to every thread. A fixed tree (shuffles
// within each warp, then warp 0 over the warps' results), so the result's bits depend only on the
// inputs. Every thread of the block must call it (it synchronises); blockDim.x a multiple of 32.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T warp_part[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? warp_part[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;  // the next call writes warp_part and result only after a __syncthreads: safe to
                  // reuse
}

// Which decomposition a split gets: a block per line for long lines of adjacent elements.
inline bool block_per_line(const CudaSplit& s) {
  return s.inner == 1 && s.n >= kLongLine;
}

// Grids: block-per-line kernels get one block per line (looping beyond kMaxGrid); thread-per-line
// kernels one thread per line (looping beyond kMaxGrid blocks).
inline unsigned line_blocks(int64_t lines) {
  return static_cast<unsigned>(lines < kMaxGrid ? lines : kMaxGrid);
}
inline unsigned thread_blocks(int64_t lines) {
  const unsigned b = grid_for(lines, kThreads);
  return b < kMaxGrid ? b : kMaxGrid;
}

inline void check_split(const CudaSplit& s, const char* what) {
  if (s.outer < 0 || s.n < 0 || s.inner < 0)
    throw std::invalid_argument(std::string(what) +
                                ": negative size in the [outer, n, inner] split");
}

}  // namespace line_reduce
}  // namespace mg
