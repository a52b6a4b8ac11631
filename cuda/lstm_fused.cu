// The fused LSTM on the GPU: mirrors nn/lstm_fused.cpp (read that file first; the equations and the
// packed output Y [T+1,B,H] = h_1..h_T, then c_T, are the same).
//
// Forward: one cuBLAS GEMM for the input projections of all steps, [T*B,in] x [in,4H], then per
// step
//   1. acts_t += h_{t-1} W_hh^T                 (one GEMM, [B,H] x [H,4H])
//   2. one gate kernel over the B*H units        (bias, nonlinearities, cell and hidden update)
// Backward (BPTT, t = T-1 .. 0), per step
//   1. one gate-backward kernel over B*H units   (d h_t, d c_t -> dG_t, d c_{t-1})
//   2. dh = dG_t W_hh                            (one GEMM, [B,4H] x [4H,H]: d h_{t-1})
// For B <= 32 and H <= 768 (the small presets, mos-paper's last layer) each step's 1 and 2 are one
// launch instead (lstm_step_*_kernel below): at these sizes a step is latency, not FLOPs, and the
// launch count is what costs.
// The weight and input gradients are then big GEMMs over all steps, run by the caller as on the
// CPU.
//
// Where the CPU splits the hidden units between the threads of one OpenMP team and needs a barrier
// per step, the GPU gets the same ordering for free: every kernel and GEMM goes on one stream, so
// step t+1 starts only after step t has finished. The per-step loops below do no host
// synchronisation and no allocation, so they can later be captured into a CUDA graph as they are.
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/check.h"

namespace mg {

namespace {

constexpr int kThreads = 256;  // threads per block of the gate kernels

// The CPU's vsigmoid form, with the precise expf/tanhf (no fast math): matches it to a few ulp.
__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// Mirrors gates_forward (nn/lstm_fused.cpp) for one step:
//   i, f, o = σ(z + b),  g = tanh(z + b),  c_t = f ⊙ c_{t-1} + i ⊙ g,  h_t = o ⊙ tanh(c_t)
// One thread per (batch row b, hidden unit j): the four gates of a unit are independent of every
// other unit once the GEMM has summed over H, so B*H threads is the natural split and needs no
// communication. At B = 20, H = 1150 that is ~90 blocks: a few microseconds.
// gates [B,4H] pre-activations (gate block q of row b at b*4H + q*H), overwritten with i, f, g, o;
// bias [4H] (b_ih + b_hh); c_prev, c, h [B,H].
__global__ void lstm_gates_forward_kernel(int64_t B, int64_t H, float* __restrict__ gates,
                                          const float* __restrict__ bias,
                                          const float* __restrict__ c_prev, float* __restrict__ c,
                                          float* __restrict__ h) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= B * H) return;
  const int64_t b = idx / H, j = idx - b * H;
  float* z = gates + b * 4 * H + j;  // unit j of row b; gate q at z[q*H]
  const float i = sigmoid(z[0] + bias[j]), f = sigmoid(z[H] + bias[H + j]);
  const float g = tanhf(z[2 * H] + bias[2 * H + j]), o = sigmoid(z[3 * H] + bias[3 * H + j]);
  z[0] = i, z[H] = f, z[2 * H] = g, z[3 * H] = o;
  const float cv = f * c_prev[idx] + i * g;  // c_t = f ⊙ c_{t-1} + i ⊙ g
  c[idx] = cv;
  h[idx] = o * tanhf(cv);  // h_t = o ⊙ tanh(c_t)
}

// Mirrors gates_backward (nn/lstm_fused.cpp) for one step, from d h_t (dy from the layer above plus
// dh from step t+1) and d c_t (dc, overwritten with d c_{t-1}) to the pre-activation gradients:
//   dc_t = dc + dh_t ⊙ o ⊙ (1 - tanh²(c_t))
//   di = dc_t ⊙ g ⊙ σ'(i),  df = dc_t ⊙ c_{t-1} ⊙ σ'(f),  dg = dc_t ⊙ i ⊙ (1 - g²),
//   do = dh_t ⊙ tanh(c_t) ⊙ σ'(o),  with σ' = σ(1 - σ);   d c_{t-1} = dc_t ⊙ f
// One thread per (b, j), as in the forward: each unit's update reads and writes only its own dc
// and its own four dG entries.
// act [B,4H] post-activations i, f, g, o of step t; c, c_prev, dy, dh, dc [B,H]; dz [B,4H] (dG_t).
__global__ void lstm_gates_backward_kernel(int64_t B, int64_t H, const float* __restrict__ act,
                                           const float* __restrict__ c,
                                           const float* __restrict__ c_prev,
                                           const float* __restrict__ dy,
                                           const float* __restrict__ dh, float* __restrict__ dc,
                                           float* __restrict__ dz) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= B * H) return;
  const int64_t b = idx / H, j = idx - b * H;
  const float* a = act + b * 4 * H + j;  // gate q of unit j at a[q*H]
  float* d = dz + b * 4 * H + j;
  const float i = a[0], f = a[H], g = a[2 * H], o = a[3 * H];
  const float tc = tanhf(c[idx]);
  const float dh_t = dy[idx] + dh[idx];
  const float dc_t = dc[idx] + dh_t * o * (1 - tc * tc);
  d[0] = dc_t * g * i * (1 - i);  // σ' = σ(1 - σ)
  d[H] = dc_t * c_prev[idx] * f * (1 - f);
  d[2 * H] = dc_t * i * (1 - g * g);  // tanh' = 1 - tanh²
  d[3 * H] = dh_t * tc * o * (1 - o);
  dc[idx] = dc_t * f;  // d c_{t-1}
}

// ---- One kernel per step: the recurrent product and the gates together ----
// At the batch sizes of language modelling (B = 10-20) a step's product h_{t-1} W_hh^T is a
// [B,H] x [H,4H] GEMM of a few dozen MFLOP: cuBLAS spends more time launching and tiling it than
// computing it, and the gate kernel is a second launch. These kernels do both in one launch. One
// block per hidden unit j, one warp per gate q: warp q forms the dot products of W_hh's row q*H + j
// with every batch row of h_{t-1} (lanes stride over the inner dimension, so the weight row is read
// once and coalesced; h is small and stays in cache) and reduces them across the warp; lane b of
// warp 0 then applies the gates of (b, j). MaxB, the batch bucket (8, 16 or 32 rows), sizes the
// per-lane accumulators; wider batches take the cuBLAS path.
constexpr int kMaxRecurrentB = 32;

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
  const float i = sigmoid(zr[0] + part[0][b] + bias[j]),
              f = sigmoid(zr[H] + part[1][b] + bias[H + j]);
  const float g = tanhf(zr[2 * H] + part[2][b] + bias[2 * H + j]);
  const float o = sigmoid(zr[3 * H] + part[3][b] + bias[3 * H + j]);
  zr[0] = i, zr[H] = f, zr[2 * H] = g, zr[3 * H] = o;
  const float cv = f * c_prev[idx] + i * g;  // c_t = f ⊙ c_{t-1} + i ⊙ g
  c[idx] = cv;
  h[idx] = o * tanhf(cv);  // h_t = o ⊙ tanh(c_t)
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
  const float i = a[0], f = a[H], g = a[2 * H], o = a[3 * H];
  const float tc = tanhf(c[idx]);
  const float dh_t = dy[idx] + dh;
  const float dc_t = dc[idx] + dh_t * o * (1 - tc * tc);
  d[0] = dc_t * g * i * (1 - i);
  d[H] = dc_t * c_prev[idx] * f * (1 - f);
  d[2 * H] = dc_t * i * (1 - g * g);
  d[3 * H] = dh_t * tc * o * (1 - o);
  dc[idx] = dc_t * f;
}

// float4 loads need every row start 16-byte aligned: H a multiple of 4 and aligned base addresses.
bool vec4_ok(int64_t H, const float* a, const float* b) {
  return H % 4 == 0 &&
         ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
}

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

bool g_fused_steps = true;  // cuda_lstm_set_fused_steps

// Up to this H the one-kernel step is faster; above it, cuBLAS's GEMM plus the gate kernel.
// Measured on an H100 with bench/bench_lstm_cuda (forward + backward of one sequence, median):
//   T=35 B=20 in=200 H=400  1.48 ms vs 1.66 ms      T=35 B=10 H=400 (eval)  0.90 vs 1.28 ms
//   T=70 B=12 in=960 H=620  2.70 ms vs 3.40 ms      T=70 B=12 in=280 H=960  5.09 vs 3.41 ms
// Each warp re-reads all B rows of h for its weight row, so the kernel's cache traffic grows as
// B*H*4H; by H = 960 that outweighs the launches it saves.
constexpr int64_t kFusedStepMaxH = 768;

bool use_fused_steps(int64_t B, int64_t H) {
  return g_fused_steps && B <= kMaxRecurrentB && H <= kFusedStepMaxH;
}

}  // namespace

// Mirrors lstm_fused's forward. x [T*B,in], h0/c0 [B,H], w_ih [4H,in], w_hh [4H,H], bias [4H];
// writes acts [T*B,4H], cells [T*B,H], y [T+1,B,H].
void cuda_lstm_forward(int64_t T, int64_t B, int64_t in, int64_t H, const float* x, const float* h0,
                       const float* c0, const float* w_ih, const float* w_hh, const float* bias,
                       float* acts, float* cells, float* y) {
  if (T <= 0 || B <= 0 || H <= 0) return;
  const int64_t G = 4 * H, BH = B * H;
  // Gates of all steps from the inputs: acts [T*B,4H] = x [T*B,in] W_ih^T.
  if (in > 0)
    cuda_gemm(false, true, T * B, G, in, 1.0f, x, in, w_ih, in, 0.0f, acts, G);
  else  // no inputs: the projections are zero (a GEMM with an empty inner dimension is not relied
        // on)
    CUDA_CHECK(cudaMemsetAsync(acts, 0, sizeof(float) * T * B * G, 0));
  for (int64_t t = 0; t < T; ++t) {
    const float* h_prev = t > 0 ? y + (t - 1) * BH : h0;
    const float* c_prev = t > 0 ? cells + (t - 1) * BH : c0;
    float* gates = acts + t * B * G;
    if (use_fused_steps(B, H)) {  // product and gates in one launch
      launch_step_forward(B, H, w_hh, h_prev, bias, gates, c_prev, cells + t * BH, y + t * BH);
      continue;
    }
    // gates [B,4H] += h_{t-1} [B,H] W_hh^T; cuBLAS reads W_hh [4H,H] in place, transposed.
    cuda_gemm(false, true, B, G, H, 1.0f, h_prev, H, w_hh, H, 1.0f, gates, G);
    lstm_gates_forward_kernel<<<grid_for(BH, kThreads), kThreads>>>(B, H, gates, bias, c_prev,
                                                                    cells + t * BH, y + t * BH);
    CUDA_CHECK_LAUNCH("lstm_gates_forward_kernel");
  }
  // Row T of the packed output is c_T.
  cuda_copy_on_device(y + T * BH, cells + (T - 1) * BH, sizeof(float) * BH);
}

// Mirrors lstm_backward's BPTT loop. acts [T*B,4H], cells [T*B,H], c0 [B,H], w_hh [4H,H],
// grad_y [T+1,B,H]; writes d_gates [T*B,4H], dh [B,H] (d h0) and dc [B,H] (d c0).
void cuda_lstm_backward(int64_t T, int64_t B, int64_t H, const float* acts, const float* cells,
                        const float* c0, const float* w_hh, const float* grad_y, bool need_dh0,
                        float* d_gates, float* dh, float* dc) {
  if (T <= 0 || B <= 0 || H <= 0) return;
  const int64_t G = 4 * H, BH = B * H;
  // dh: d loss / d h_t arriving from step t+1 (none after the last step); dc starts as d c_T.
  CUDA_CHECK(cudaMemsetAsync(dh, 0, sizeof(float) * BH, 0));
  cuda_copy_on_device(dc, grad_y + T * BH, sizeof(float) * BH);
  if (use_fused_steps(B, H)) {
    // One launch per step; the product for step t reads dG_{t+1} through W_hh^T, made once here.
    float* w_hh_t = static_cast<float*>(cuda_allocate_bytes(sizeof(float) * G * H));
    CudaLayout src, dst;
    src.rank = dst.rank = 2;
    src.shape[0] = dst.shape[0] = H, src.shape[1] = dst.shape[1] = G;
    src.strides[0] = 1, src.strides[1] = H;  // W_hh [4H,H] read as its transpose
    dst.strides[0] = G, dst.strides[1] = 1;
    try {
      cuda_copy_strided(w_hh, src, w_hh_t, dst);
      for (int64_t t = T - 1; t >= 0; --t) {
        const float* c_prev = t > 0 ? cells + (t - 1) * BH : c0;
        const float* dg_next = t + 1 < T ? d_gates + (t + 1) * B * G : nullptr;
        launch_step_backward(B, H, w_hh_t, dg_next, acts + t * B * G, cells + t * BH, c_prev,
                             grad_y + t * BH, dc, d_gates + t * B * G);
      }
    } catch (...) {
      cuda_release_bytes(w_hh_t, sizeof(float) * G * H);
      throw;
    }
    cuda_release_bytes(w_hh_t,
                       sizeof(float) * G * H);  // stream-ordered: reused only after these kernels
    if (need_dh0)
      cuda_gemm(false, false, B, H, G, 1.0f, d_gates, G, w_hh, H, 0.0f, dh, H);  // d h0 = dG_0 W_hh
    return;
  }
  for (int64_t t = T - 1; t >= 0; --t) {
    const float* c_prev = t > 0 ? cells + (t - 1) * BH : c0;
    float* dg = d_gates + t * B * G;
    lstm_gates_backward_kernel<<<grid_for(BH, kThreads), kThreads>>>(
        B, H, acts + t * B * G, cells + t * BH, c_prev, grad_y + t * BH, dh, dc, dg);
    CUDA_CHECK_LAUNCH("lstm_gates_backward_kernel");
    // d h_{t-1} [B,H] = dG_t [B,4H] W_hh [4H,H]. Overwriting dh is safe: the kernel above, which
    // read it, runs before this GEMM on the same stream.
    if (t > 0 || need_dh0) cuda_gemm(false, false, B, H, G, 1.0f, dg, G, w_hh, H, 0.0f, dh, H);
  }
}

void cuda_lstm_set_fused_steps(bool on) {
  g_fused_steps = on;
}

}  // namespace mg
