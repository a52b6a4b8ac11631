// The GPU LSTM's one-kernel steps (the recurrent product and the gates in one launch), which
// cuda/lstm_fused.cu's forward and BPTT loops call: per hidden unit (lstm_step_*_kernel) or with
// the step's input rows staged in shared memory (lstm_step_*_staged_kernel). cuda/lstm_fused.cu
// says which runs when; the cell's formulas are math/formulas.h's, the CPU's own.
#include "cuda/lstm_steps.h"

#include <cstdint>

#include "cuda/check.h"
#include "cuda/warp_products.h"
#include "math/formulas.h"

namespace mg {

namespace {

// ---- One kernel per step: the recurrent product and the gates together ----
// At the batch sizes of language modelling (B = 10-20) a step's product h_{t-1} W_hh^T is a
// [B,H] x [H,4H] GEMM of a few dozen MFLOP: cuBLAS spends more time launching and tiling it than
// computing it, and the gate kernel is a second launch. These kernels do both in one launch. One
// block per hidden unit j, one warp per gate q: warp q forms the dot products of W_hh's row q*H + j
// with every batch row of h_{t-1} (lanes stride over the inner dimension, so the weight row is read
// once and coalesced; h is small and stays in cache) and reduces them across the warp; lane b of
// warp 0 then applies the gates of (b, j). MaxB, the batch bucket (8, 16 or 32 rows), sizes the
// per-lane accumulators; wider batches take the cuBLAS path.

// acc[b] = Σ_k w[k] x[b*ld + k] for k < n and b < B, summed by each lane over its strided k, then
// across the warp in a fixed butterfly (every lane ends with every sum). vec4: float4 loads (the
// host checks that n, ld and both base addresses allow them).
template <int MaxB>
__device__ __forceinline__ void warp_dots(const float* __restrict__ w, const float* __restrict__ x,
                                          int64_t ld, int64_t n, int B, bool vec4,
                                          float (&acc)[MaxB]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int b = 0; b < MaxB; ++b) acc[b] = 0.0f;
  if (vec4) {
    const float4* w4 = reinterpret_cast<const float4*>(w);
    for (int64_t k = lane; k < n / 4; k += 32) {
      const float4 wv = w4[k];
#pragma unroll
      for (int b = 0; b < MaxB; ++b)
        if (b < B) {
          const float4 xv = reinterpret_cast<const float4*>(x + b * ld)[k];
          acc[b] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
        }
    }
  } else {
    for (int64_t k = lane; k < n; k += 32) {
      const float wv = w[k];
#pragma unroll
      for (int b = 0; b < MaxB; ++b)
        if (b < B) acc[b] += wv * x[b * ld + k];
    }
  }
#pragma unroll
  for (int b = 0; b < MaxB; ++b)
    if (b < B)
      for (int o = 16; o > 0; o >>= 1) acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], o);
}

// Lane b keeps sum b: part[q][b] = acc[b] without indexing the register array by a run-time
// number (which would move it to local memory).
template <int MaxB>
__device__ __forceinline__ void store_own_sum(const float (&acc)[MaxB], int B, float* part) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int b = 0; b < MaxB; ++b)
    if (b == lane && b < B) part[b] = acc[b];
}

// Step t of the forward, block j = unit j: gates [B,4H] hold x_t W_ih^T; adds h_{t-1} W_hh^T
// (w_hh [4H,H], h_prev [B,H]) and the bias, then gates_forward for (b = lane of warp 0, j).
template <int MaxB>
__global__ void lstm_step_forward_kernel(int B, int64_t H, bool vec4,
                                         const float* __restrict__ w_hh,
                                         const float* __restrict__ h_prev,
                                         const float* __restrict__ bias, float* __restrict__ gates,
                                         const float* __restrict__ c_prev, float* __restrict__ c,
                                         float* __restrict__ h) {
  __shared__ float part[4][MaxB];  // part[q][b] = (h_{t-1} W_hh^T)[b, q*H + j]
  const int64_t j = blockIdx.x;
  const int q = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float acc[MaxB];
  warp_dots<MaxB>(w_hh + (q * H + j) * H, h_prev, H, H, B, vec4, acc);
  store_own_sum<MaxB>(acc, B, part[q]);
  __syncthreads();
  if (q != 0 || lane >= B) return;
  const int64_t b = lane, idx = b * H + j;
  float* zr = gates + b * 4 * H + j;
  const LstmCell u =
      lstm_cell_forward(zr[0] + part[0][b] + bias[j], zr[H] + part[1][b] + bias[H + j],
                        zr[2 * H] + part[2][b] + bias[2 * H + j],
                        zr[3 * H] + part[3][b] + bias[3 * H + j], c_prev[idx]);
  zr[0] = u.i, zr[H] = u.f, zr[2 * H] = u.g, zr[3 * H] = u.o;
  c[idx] = u.c;
  h[idx] = u.h;
}

// Step t of BPTT, block j = unit j: dh = dG_{t+1} W_hh (w_hh_t = W_hh^T [H,4H], so unit j's column
// is a row; warp q sums over gate block q, and the four parts are added in order), then
// gates_backward for (b = lane of warp 0, j). dg_next is null at t = T-1 (no later step).
template <int MaxB>
__global__ void lstm_step_backward_kernel(
    int B, int64_t H, bool vec4, const float* __restrict__ w_hh_t,
    const float* __restrict__ dg_next, const float* __restrict__ act, const float* __restrict__ c,
    const float* __restrict__ c_prev, const float* __restrict__ dy, float* __restrict__ dc,
    float* __restrict__ dz) {
  __shared__ float part[4][MaxB];
  const int64_t j = blockIdx.x;
  const int q = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (dg_next) {
    float acc[MaxB];
    warp_dots<MaxB>(w_hh_t + j * 4 * H + q * H, dg_next + q * H, 4 * H, H, B, vec4, acc);
    store_own_sum<MaxB>(acc, B, part[q]);
  }
  __syncthreads();
  if (q != 0 || lane >= B) return;
  const int64_t b = lane, idx = b * H + j;
  const float dh = dg_next ? (part[0][b] + part[1][b]) + (part[2][b] + part[3][b]) : 0.0f;
  const float* a = act + b * 4 * H + j;
  float* d = dz + b * 4 * H + j;
  const LstmCellGrad g = lstm_cell_backward(a[0], a[H], a[2 * H], a[3 * H], c[idx], c_prev[idx],
                                            dy[idx] + dh, dc[idx]);
  d[0] = g.di, d[H] = g.df, d[2 * H] = g.dg, d[3 * H] = g.d_o;
  dc[idx] = g.dc_prev;
}

// float4 loads need every row start 16-byte aligned: H a multiple of 4 and aligned base addresses.
bool vec4_ok(int64_t H, const float* a, const float* b) {
  return H % 4 == 0 &&
         ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
}

// ---- One kernel per forward step, h_{t-1} staged in shared memory ----
// The per-unit kernel above has each of its warps read every row of h_{t-1} from the cache for one
// weight row: 16·B·H² bytes per step, 177 MB at mos-paper's B = 12, H = 960, which is why it loses
// to cuBLAS there (the table in cuda/lstm_fused.cu). Here a block first copies h_{t-1} [B,H] into
// shared memory (B·H·4 bytes: 46 KB at mos-paper), then each warp takes one hidden unit j and forms
// all four of its gate rows against every staged row: the warp reads its four weight rows of W_hh
// once (from L2, where W_hh stays from one step to the next) and h from shared memory. The backward
// does the same with dG_{t+1} [B,4H] staged and four hidden units per warp (rows of W_hh^T). The
// batch is taken in passes of kStagedRows rows.
constexpr int kStagedUnits = 4;  // hidden units per block, one warp each
constexpr int kStagedRows = 16;  // batch rows per pass: the accumulators per gate and lane

// Copies rows [n] (n = B*len floats) into the block's shared memory; vec4: as float4s, eight loads
// in flight per thread before the first store (a plain copy loop waits out the L2's latency once
// per float4: on an H200 that made staging, not the products, most of a step).
constexpr int kStageBatch = 8;
__device__ __forceinline__ void stage_rows(const float* __restrict__ src, int n, bool vec4,
                                           float4* staged4) {
  if (vec4) {
    const float4* src4 = reinterpret_cast<const float4*>(src);
    const int n4 = n / 4, step = static_cast<int>(blockDim.x);
    for (int k0 = threadIdx.x; k0 < n4; k0 += kStageBatch * step) {
      float4 v[kStageBatch];
#pragma unroll
      for (int u = 0; u < kStageBatch; ++u)
        if (k0 + u * step < n4) v[u] = src4[k0 + u * step];
#pragma unroll
      for (int u = 0; u < kStageBatch; ++u)
        if (k0 + u * step < n4) staged4[k0 + u * step] = v[u];
    }
  } else {
    float* staged = reinterpret_cast<float*>(staged4);
    for (int k = threadIdx.x; k < n; k += blockDim.x) staged[k] = src[k];
  }
  __syncthreads();
}

// Step t of the forward: gates [B,4H] hold x_t W_ih^T; adds h_{t-1} W_hh^T (w_hh [4H,H], h_prev
// [B,H]) and the bias, then lstm_cell_forward for every (b, j). Warp = hidden unit j, its four
// rows the gate rows q*H + j of W_hh.
template <int N>
__global__ void lstm_step_forward_staged_kernel(
    int B, int H, bool vec4, const float* __restrict__ w_hh, const float* __restrict__ h_prev,
    const float* __restrict__ bias, float* __restrict__ gates, const float* __restrict__ c_prev,
    float* __restrict__ c, float* __restrict__ h) {
  extern __shared__ float4 staged4[];  // h_{t-1} [B,H]
  stage_rows(h_prev, B * H, vec4, staged4);
  const int lane = threadIdx.x & 31;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kStagedUnits + (threadIdx.x >> 5);
  if (j >= H) return;  // the whole warp: no shuffle is left half-done
  const float* w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) w[q] = w_hh + (q * static_cast<int64_t>(H) + j) * H;
  constexpr int kShift = 5 - log2_of(N);  // lane l ends with the sums of row l >> kShift
  for (int b0 = 0; b0 < B; b0 += N) {
    float sum[4];
    four_rows_times_staged<N>(w, staged4, H, B, b0, vec4, 0, vec4 ? H / 4 : H, sum);
    const int64_t b = b0 + (lane >> kShift);
    if ((lane & ((1 << kShift) - 1)) != 0 || b >= B) continue;
    const int64_t idx = b * H + j;
    float* zr = gates + b * 4 * H + j;
    const LstmCell u = lstm_cell_forward(zr[0] + sum[0] + bias[j], zr[H] + sum[1] + bias[H + j],
                                         zr[2 * H] + sum[2] + bias[2 * H + j],
                                         zr[3 * H] + sum[3] + bias[3 * H + j], c_prev[idx]);
    zr[0] = u.i, zr[H] = u.f, zr[2 * H] = u.g, zr[3 * H] = u.o;
    c[idx] = u.c;
    h[idx] = u.h;
  }
}

// Step t of BPTT: dh = dG_{t+1} W_hh (dg_next [B,4H] staged; w_hh_t = W_hh^T [H,4H], so unit j's
// column of W_hh is row j), then lstm_cell_backward for every (b, j). Warp = four consecutive
// hidden units 4w .. 4w+3, its four rows theirs in W_hh^T. dg_next is null at t = T-1.
template <int N>
__global__ void lstm_step_backward_staged_kernel(
    int B, int H, bool vec4, const float* __restrict__ w_hh_t, const float* __restrict__ dg_next,
    const float* __restrict__ act, const float* __restrict__ c, const float* __restrict__ c_prev,
    const float* __restrict__ dy, float* __restrict__ dc, float* __restrict__ dz) {
  extern __shared__ float4 staged4[];  // dG_{t+1} [B,4H]
  if (dg_next) stage_rows(dg_next, B * 4 * H, vec4, staged4);
  const int lane = threadIdx.x & 31;
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * kStagedUnits + (threadIdx.x >> 5)) * 4;
  if (j0 >= H) return;  // the whole warp
  const float* w[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) w[u] = w_hh_t + (j0 + u < H ? j0 + u : j0) * 4 * H;
  constexpr int kShift = 5 - log2_of(N);
  for (int b0 = 0; b0 < B; b0 += N) {
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (dg_next)
      four_rows_times_staged<N>(w, staged4, 4 * H, B, b0, vec4, 0, vec4 ? H : 4 * H, sum);
    const int64_t b = b0 + (lane >> kShift);
    if ((lane & ((1 << kShift) - 1)) != 0 || b >= B) continue;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t j = j0 + u, idx = b * H + j;
      if (j >= H) break;
      const float* a = act + b * 4 * H + j;
      float* d = dz + b * 4 * H + j;
      const LstmCellGrad g = lstm_cell_backward(a[0], a[H], a[2 * H], a[3 * H], c[idx], c_prev[idx],
                                                dy[idx] + sum[u], dc[idx]);
      d[0] = g.di, d[H] = g.df, d[2 * H] = g.dg, d[3 * H] = g.d_o;
      dc[idx] = g.dc_prev;
    }
  }
}

// The most dynamic shared memory a block may have on this GPU (227 KB on Hopper).
size_t staged_smem_limit() {
  static int limit = -1;
  if (limit < 0) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  }
  return static_cast<size_t>(limit);
}

// Beyond 48 KB a kernel must be allowed its dynamic shared memory, once.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes, size_t* allowed) {
  if (bytes <= *allowed) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(staged_smem_limit())));
  *allowed = staged_smem_limit();
}

}  // namespace

// The launches, with the batch bucket chosen at run time.
void launch_step_forward(int64_t B, int64_t H, const float* w_hh, const float* h_prev,
                         const float* bias, float* gates, const float* c_prev, float* c, float* h) {
  const bool v = vec4_ok(H, w_hh, h_prev);
  const int b = static_cast<int>(B);
  const unsigned grid = static_cast<unsigned>(H);
  if (B <= 8)
    lstm_step_forward_kernel<8><<<grid, 128>>>(b, H, v, w_hh, h_prev, bias, gates, c_prev, c, h);
  else if (B <= 16)
    lstm_step_forward_kernel<16><<<grid, 128>>>(b, H, v, w_hh, h_prev, bias, gates, c_prev, c, h);
  else
    lstm_step_forward_kernel<32><<<grid, 128>>>(b, H, v, w_hh, h_prev, bias, gates, c_prev, c, h);
  CUDA_CHECK_LAUNCH("lstm_step_forward_kernel");
}

void launch_step_backward(int64_t B, int64_t H, const float* w_hh_t, const float* dg_next,
                          const float* act, const float* c, const float* c_prev, const float* dy,
                          float* dc, float* dz) {
  const bool v = dg_next && vec4_ok(H, w_hh_t, dg_next);
  const int b = static_cast<int>(B);
  const unsigned grid = static_cast<unsigned>(H);
  if (B <= 8)
    lstm_step_backward_kernel<8>
        <<<grid, 128>>>(b, H, v, w_hh_t, dg_next, act, c, c_prev, dy, dc, dz);
  else if (B <= 16)
    lstm_step_backward_kernel<16>
        <<<grid, 128>>>(b, H, v, w_hh_t, dg_next, act, c, c_prev, dy, dc, dz);
  else
    lstm_step_backward_kernel<32>
        <<<grid, 128>>>(b, H, v, w_hh_t, dg_next, act, c, c_prev, dy, dc, dz);
  CUDA_CHECK_LAUNCH("lstm_step_backward_kernel");
}

// The staged kernels hold B*H floats (forward) or B*4H floats (backward) in shared memory.
bool staged_fits(int64_t B, int64_t rows_len) {
  return static_cast<size_t>(B * rows_len) * sizeof(float) <= staged_smem_limit();
}

void launch_step_forward_staged(int64_t B, int64_t H, const float* w_hh, const float* h_prev,
                                const float* bias, float* gates, const float* c_prev, float* c,
                                float* h) {
  const size_t bytes = static_cast<size_t>(B * H) * sizeof(float);
  static size_t allowed = 48 * 1024;
  allow_shared_memory(lstm_step_forward_staged_kernel<kStagedRows>, bytes, &allowed);
  const unsigned grid = static_cast<unsigned>((H + kStagedUnits - 1) / kStagedUnits);
  lstm_step_forward_staged_kernel<kStagedRows><<<grid, 32 * kStagedUnits, bytes>>>(
      static_cast<int>(B), static_cast<int>(H), vec4_ok(H, w_hh, h_prev), w_hh, h_prev, bias, gates,
      c_prev, c, h);
  CUDA_CHECK_LAUNCH("lstm_step_forward_staged_kernel");
}

void launch_step_backward_staged(int64_t B, int64_t H, const float* w_hh_t, const float* dg_next,
                                 const float* act, const float* c, const float* c_prev,
                                 const float* dy, float* dc, float* dz) {
  const size_t bytes = dg_next ? static_cast<size_t>(B * 4 * H) * sizeof(float) : 0;
  static size_t allowed = 48 * 1024;
  allow_shared_memory(lstm_step_backward_staged_kernel<kStagedRows>, bytes, &allowed);
  const int64_t warps = (H + 3) / 4;  // four units each
  const unsigned grid = static_cast<unsigned>((warps + kStagedUnits - 1) / kStagedUnits);
  lstm_step_backward_staged_kernel<kStagedRows><<<grid, 32 * kStagedUnits, bytes>>>(
      static_cast<int>(B), static_cast<int>(H), dg_next && vec4_ok(H, w_hh_t, dg_next), w_hh_t,
      dg_next, act, c, c_prev, dy, dc, dz);
  CUDA_CHECK_LAUNCH("lstm_step_backward_staged_kernel");
}

}  // namespace mg
