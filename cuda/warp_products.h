// Warp-level products for the GPU LSTM's step kernels (cuda/lstm_steps.cu,
// cuda/lstm_persistent.cu): a warp's four weight rows times a batch of rows staged in shared
// memory, reduced across the warp in a fixed order (so every run gives the same bits). Device code,
// for .cu files only.
#pragma once

#include <cuda_runtime.h>

namespace mg {

// Reduce-scatter across a warp: on entry each lane holds partials v[0..N) of N sums (N a power of
// two, at most 32); on return each lane holds one whole sum, number lane >> (5 - log2 N). Each
// halving step trades half of the values with the lane `Off` away (the lane with that bit set keeps
// the upper half): N - 1 shuffles, then a butterfly over the lane bits left, instead of 5 per sum.
// The order is fixed, so the result is the same every run.
template <int N, int Off>
struct WarpScatter {
  static __device__ __forceinline__ float run(float* v, int lane) {
    const bool upper = (lane & Off) != 0;
#pragma unroll
    for (int r = 0; r < N / 2; ++r) {
      const float send = upper ? v[r] : v[r + N / 2];
      const float keep = upper ? v[r + N / 2] : v[r];
      v[r] = keep + __shfl_xor_sync(0xffffffffu, send, Off);
    }
    return WarpScatter<N / 2, Off / 2>::run(v, lane);
  }
};
template <int Off>
struct WarpScatter<1, Off> {
  static __device__ __forceinline__ float run(float* v, int) {
    float s = v[0];
#pragma unroll
    for (int o = Off; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
  }
};

__host__ __device__ constexpr int log2_of(int n) {
  return n <= 1 ? 0 : 1 + log2_of(n / 2);
}

// One warp's products of four weight rows w[q] [len] with staged rows b0 .. b0+N-1 (those < B) of
// the staged matrix [B,len], over the columns [k_begin, k_end) counted in loads (float4s when vec4,
// floats otherwise; the whole row is 0 .. len/4 or 0 .. len): on return sum[q] = that part of
// w[q] · staged[b0 + (lane >> kShift)] on every lane, kShift = 5 - log2 N. Lanes stride over k, so
// each weight row is read once, coalesced; the staged rows come from shared memory. vec4: len % 4
// == 0 and aligned rows. The weights may be in global or in shared memory.
template <int N>
__device__ __forceinline__ void four_rows_times_staged(const float* const (&w)[4],
                                                       const float4* staged4, int len, int B,
                                                       int b0, bool vec4, int k_begin, int k_end,
                                                       float (&sum)[4]) {
  const int lane = threadIdx.x & 31;
  float acc[4][N];
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int r = 0; r < N; ++r) acc[q][r] = 0.0f;
  if (vec4) {
    const int len4 = len / 4;
#pragma unroll 2  // the next weights' loads issue before this iteration's products
    for (int k = k_begin + lane; k < k_end; k += 32) {
      float4 wq[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) wq[q] = reinterpret_cast<const float4*>(w[q])[k];
#pragma unroll
      for (int r = 0; r < N; ++r)
        if (b0 + r < B) {
          const float4 x = staged4[(b0 + r) * len4 + k];
#pragma unroll
          for (int q = 0; q < 4; ++q)
            acc[q][r] += wq[q].x * x.x + wq[q].y * x.y + wq[q].z * x.z + wq[q].w * x.w;
        }
    }
  } else {
    const float* staged = reinterpret_cast<const float*>(staged4);
    for (int k = k_begin + lane; k < k_end; k += 32) {
      float wq[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) wq[q] = w[q][k];
#pragma unroll
      for (int r = 0; r < N; ++r)
        if (b0 + r < B) {
          const float x = staged[(b0 + r) * len + k];
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[q][r] += wq[q] * x;
        }
    }
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) sum[q] = WarpScatter<N, 16>::run(acc[q], lane);
}

// dst [rows,len] (shared memory) = rows of src, row stride src_ld floats, read through L2 only:
// the rows were written by other blocks of this grid before the last barrier, and a load must not
// be served from this multiprocessor's L1. vec4 (len % 4 == 0, src_ld % 4 == 0, aligned rows):
// asynchronous 16-byte copies (cp.async.cg, which skips L1), all in flight at once and costing no
// registers; otherwise __ldcg loads. The caller then waits at a __syncthreads.
__device__ __forceinline__ void stage_from_grid(const float* src, int64_t src_ld, int rows, int len,
                                                bool vec4, float* dst) {
  const int step = static_cast<int>(blockDim.x);
  if (vec4) {
    const int len4 = len / 4, n4 = rows * len4;
    for (int i = threadIdx.x; i < n4; i += step) {
      const int r = i / len4;
      const float* from = src + r * src_ld + 4 * (i - r * len4);
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // cp.async: Ampere and later
      const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst + 4 * i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from) : "memory");
#else  // older GPUs: the same copy through registers, still past L1
      reinterpret_cast<float4*>(dst)[i] = __ldcg(reinterpret_cast<const float4*>(from));
#endif
    }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
  } else {
    for (int i = threadIdx.x; i < rows * len; i += step) {
      const int r = i / len;
      dst[i] = __ldcg(src + r * src_ld + (i - r * len));
    }
  }
}

// acc[q][r] += the part over loads [k_begin, k_end) of w_q · x_r, for the four weight rows
// w_q = w + q*w_ld and the staged rows x_r = x + r*len, r < rows (<= N); lanes stride over k.
// Both operands are in shared memory, so nothing is prefetched (fewer live registers than
// four_rows_times_staged, whose weights come from L2), and each product is its own fused
// multiply-add. vec4: float4 loads (len and w_ld multiples of 4, aligned rows).
template <int N>
__device__ __forceinline__ void accumulate_four_rows(const float* w, int w_ld, const float* x,
                                                     int len, int rows, bool vec4, int k_begin,
                                                     int k_end, float (&acc)[4][N]) {
  const int lane = threadIdx.x & 31;
  if (vec4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int len4 = len / 4;
    for (int k = k_begin + lane; k < k_end; k += 32) {
      float4 wq[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) wq[q] = reinterpret_cast<const float4*>(w + q * w_ld)[k];
#pragma unroll
      for (int r = 0; r < N; ++r)
        if (r < rows) {
          const float4 v = x4[r * len4 + k];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            acc[q][r] = fmaf(wq[q].x, v.x, acc[q][r]);
            acc[q][r] = fmaf(wq[q].y, v.y, acc[q][r]);
            acc[q][r] = fmaf(wq[q].z, v.z, acc[q][r]);
            acc[q][r] = fmaf(wq[q].w, v.w, acc[q][r]);
          }
        }
    }
  } else {
    for (int k = k_begin + lane; k < k_end; k += 32) {
      float wq[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) wq[q] = w[q * w_ld + k];
#pragma unroll
      for (int r = 0; r < N; ++r)
        if (r < rows) {
          const float v = x[r * len + k];
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[q][r] = fmaf(wq[q], v, acc[q][r]);
        }
    }
  }
}

template <int N>
__device__ __forceinline__ void zero_accumulators(float (&acc)[4][N]) {
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int r = 0; r < N; ++r) acc[q][r] = 0.0f;
}

}  // namespace mg
