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
// That is the reference, the cuBLAS path. For B <= 32 a step is latency, not FLOPs, and three
// faster paths do the same work:
//   - persistent (cuda/lstm_persistent.cu): all T steps in one cooperative launch, each block
//     holding its hidden units' slice of W_hh in shared memory, a grid barrier per step; Auto
//     takes it wherever the slice and a step's staged rows fit a multiprocessor;
//   - staged (lstm_step_*_staged_kernel): one launch per step doing 1 and 2 together, h_{t-1}
//     (dG_{t+1}) staged in shared memory;
//   - per unit (lstm_step_*_kernel): one launch per step, one block per hidden unit.
// forward_path / backward_path below choose; cuda_lstm_set_steps forces a path for tests and
// bench/bench_lstm_cuda. The cell's formulas are math/formulas.h's, the CPU's own.
// The weight and input gradients are then big GEMMs over all steps, run by the caller as on the
// CPU.
//
// Where the CPU splits the hidden units between the threads of one OpenMP team and needs a barrier
// per step, the GPU gets the same ordering for free: every kernel and GEMM goes on one stream, so
// step t+1 starts only after step t has finished (the persistent loop, one launch, has its grid
// barrier instead). The per-step loops below do no host
// synchronisation and no allocation, so they can later be captured into a CUDA graph as they are.
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/lstm_steps.h"
#include "math/formulas.h"

namespace mg {

namespace {

constexpr int kThreads = 256;  // threads per block of the gate kernels

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
  const LstmCell u =
      lstm_cell_forward(z[0] + bias[j], z[H] + bias[H + j], z[2 * H] + bias[2 * H + j],
                        z[3 * H] + bias[3 * H + j], c_prev[idx]);
  z[0] = u.i, z[H] = u.f, z[2 * H] = u.g, z[3 * H] = u.o;
  c[idx] = u.c;  // c_t = f ⊙ c_{t-1} + i ⊙ g
  h[idx] = u.h;  // h_t = o ⊙ tanh(c_t)
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
  const LstmCellGrad g = lstm_cell_backward(a[0], a[H], a[2 * H], a[3 * H], c[idx], c_prev[idx],
                                            dy[idx] + dh[idx], dc[idx]);
  d[0] = g.di, d[H] = g.df, d[2 * H] = g.dg, d[3 * H] = g.d_o;
  dc[idx] = g.dc_prev;  // d c_{t-1}
}

// ---- Which path each step takes ----
CudaLstmSteps g_steps = CudaLstmSteps::Auto;  // cuda_lstm_set_steps

// Up to this H the per-unit kernel beats cuBLAS's GEMM plus the gate kernel.
// Measured on an H100 with bench/bench_lstm_cuda (forward + backward of one sequence, median):
//   T=35 B=20 in=200 H=400  1.48 ms vs 1.66 ms      T=35 B=10 H=400 (eval)  0.90 vs 1.28 ms
//   T=70 B=12 in=960 H=620  2.70 ms vs 3.40 ms      T=70 B=12 in=280 H=960  5.09 vs 3.41 ms
// Each warp re-reads all B rows of h for its weight row, so the kernel's cache traffic grows as
// B*H*4H; by H = 960 that outweighs the launches it saves. The backward alone on an H200
// (f+b minus forward): per-unit 0.83 vs cuBLAS 0.89 ms at small's H = 400, 1.49 vs
// 1.89 ms at H = 620, 2.95 vs 1.84 ms at H = 960. The staged forward beat both at every shape
// there (mos-paper layer 1: 1.35 ms against per-unit 2.07 and cuBLAS 1.88), so Auto's forward
// takes it wherever it fits and the persistent loop does not. The persistent loop beat every
// other path at every preset shape there (bench/RESULTS_LSTM_CUDA.md):
// mos-paper layer 1 forward 0.66 ms against staged 1.14, forward + backward 1.78 against 3.22
// (cuBLAS backward), small-mos layer 1 0.27 / 0.70 against 0.54 / 1.15.
constexpr int64_t kFusedStepMaxH = 768;

enum class StepPath { Persistent, Staged, PerUnit, Gemm };

// The persistent loop (cuda/lstm_persistent.cu) wherever its plan fits this GPU: Auto and
// Persistent take it first. Where it does not fit, a forced Persistent falls back as Auto does:
// the forward to the staged kernel (or cuBLAS), BPTT to the per-unit kernel (H <= 768) or cuBLAS.
bool persistent_wanted() {
  return g_steps == CudaLstmSteps::Auto || g_steps == CudaLstmSteps::Persistent;
}

StepPath forward_path(int64_t B, int64_t H) {
  if (g_steps == CudaLstmSteps::Gemm || B > kMaxRecurrentB) return StepPath::Gemm;
  if (g_steps == CudaLstmSteps::PerUnit) return StepPath::PerUnit;
  if (persistent_wanted() && persistent_forward_plan(B, H).ok) return StepPath::Persistent;
  if (staged_fits(B, H)) return StepPath::Staged;
  return g_steps == CudaLstmSteps::Auto && H <= kFusedStepMaxH ? StepPath::PerUnit : StepPath::Gemm;
}

// The staged backward holds dG_{t+1} [B,4H], four times h's size (B = 12, H = 960: 184 KB, one
// block per multiprocessor), and Auto does not take it: on an H200 (bench_lstm_cuda, before
// stage_rows batched its loads) it lost to both other paths: mos-paper's layer 1 backward
// 4.1 ms against cuBLAS's 1.8 ms, small's layer 1 1.6 ms against the per-unit kernel's 0.8 ms.
StepPath backward_path(int64_t B, int64_t H) {
  if (g_steps == CudaLstmSteps::Gemm || B > kMaxRecurrentB) return StepPath::Gemm;
  if (g_steps == CudaLstmSteps::PerUnit) return StepPath::PerUnit;
  if (persistent_wanted() && persistent_backward_plan(B, H).ok) return StepPath::Persistent;
  if (g_steps == CudaLstmSteps::Staged)
    return staged_fits(B, 4 * H) ? StepPath::Staged : StepPath::Gemm;
  return H <= kFusedStepMaxH ? StepPath::PerUnit : StepPath::Gemm;
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
  const StepPath path = forward_path(B, H);
  if (path == StepPath::Persistent)  // every step in one launch
    launch_forward_persistent(persistent_forward_plan(B, H), T, B, H, w_hh, h0, c0, bias, acts,
                              cells, y);
  for (int64_t t = 0; path != StepPath::Persistent && t < T; ++t) {
    const float* h_prev = t > 0 ? y + (t - 1) * BH : h0;
    const float* c_prev = t > 0 ? cells + (t - 1) * BH : c0;
    float* gates = acts + t * B * G;
    if (path == StepPath::Staged) {  // product and gates in one launch, h_{t-1} staged
      launch_step_forward_staged(B, H, w_hh, h_prev, bias, gates, c_prev, cells + t * BH,
                                 y + t * BH);
      continue;
    }
    if (path == StepPath::PerUnit) {  // product and gates in one launch
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
  const StepPath path = backward_path(B, H);
  if (path != StepPath::Gemm) {
    // One launch per step; the product for step t reads dG_{t+1} through W_hh^T, made once here.
    float* w_hh_t = static_cast<float*>(cuda_allocate_bytes(sizeof(float) * G * H));
    CudaLayout src, dst;
    src.rank = dst.rank = 2;
    src.shape[0] = dst.shape[0] = H, src.shape[1] = dst.shape[1] = G;
    src.strides[0] = 1, src.strides[1] = H;  // W_hh [4H,H] read as its transpose
    dst.strides[0] = G, dst.strides[1] = 1;
    try {
      cuda_copy_strided(w_hh, src, w_hh_t, dst);
      if (path == StepPath::Persistent)  // every step in one launch
        launch_backward_persistent(persistent_backward_plan(B, H), T, B, H, w_hh_t, acts, cells, c0,
                                   grad_y, dc, d_gates);
      for (int64_t t = T - 1; path != StepPath::Persistent && t >= 0; --t) {
        const float* c_prev = t > 0 ? cells + (t - 1) * BH : c0;
        const float* dg_next = t + 1 < T ? d_gates + (t + 1) * B * G : nullptr;
        if (path == StepPath::Staged)
          launch_step_backward_staged(B, H, w_hh_t, dg_next, acts + t * B * G, cells + t * BH,
                                      c_prev, grad_y + t * BH, dc, d_gates + t * B * G);
        else
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

void cuda_lstm_set_steps(CudaLstmSteps steps) {
  g_steps = steps;
}

}  // namespace mg
