// The GPU LSTM's persistent recurrence: the whole forward (or BPTT) time loop of one layer in one
// cooperative launch, for cuda/lstm_fused.cu. The step kernels of cuda/lstm_steps.cu re-read W_hh
// (14.7 MB at mos-paper's H = 960) from L2 at every step and pay a launch per step: at B = 12 a
// step took ~16 µs for ~2 µs of arithmetic. Here each block keeps its slice of W_hh in shared
// memory for all T steps (the GPU's shared memory together holds ~30 MB) and the blocks meet at a
// grid-wide barrier once per step, the "persistent RNN" of Diamos et al. (2016).
//
// Forward, block = hidden units j0 .. j0+U-1 (U = H / multiprocessors, rounded up), holding their
// four gate rows of W_hh [4U,H]; per step t:
//   1. copy h_{t-1} [B,H] (written by every block at step t-1) into shared memory;
//   2. warp (u, s) forms unit u's four gate rows times every staged row over inner slice s;
//   3. one thread per (b, j): the slices' sums in order, plus x_t W_ih^T and the bias, then
//      lstm_cell_forward (math/formulas.h, the CPU's own), writing acts, c_t, h_t;
//   4. grid barrier: every h_t is written before any block reads it.
// BPTT, block = units j0 .. j0+U-1 (U a multiple of 4), holding their columns of W_hh as rows of
// W_hh^T [U,4H]; per step t = T-1 .. 0: dh_t = dG_{t+1} W_hh for its units (dG_{t+1}'s rows
// staged in column chunks where they do not fit at once), lstm_cell_backward per (b, j), barrier.
// Every sum runs in a fixed order, so the bits are the same every run. Where the shared memory or
// the grid's co-residency does not allow a shape, its plan says so and cuda/lstm_fused.cu runs the
// step kernels instead. bench/RESULTS_LSTM_CUDA.md has the timings and where a step's time goes.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "cuda/check.h"
#include "cuda/lstm_steps.h"
#include "cuda/warp_products.h"
#include "math/formulas.h"

namespace mg {

namespace {

namespace cg = cooperative_groups;

constexpr int kPersistentThreads = 512;  // at most, per block (so 128 registers a thread)

// Batch rows per pass (the accumulators per lane): 8 where B <= 8, else 16.
int rows_per_pass(int64_t B) {
#ifdef MG_PERSISTENT_PROFILE
  if (const char* e = std::getenv("MG_PERSIST_ROWS")) return std::atoi(e) == 8 ? 8 : 16;
#endif
  return B <= 8 ? 8 : 16;
}
int threads_at_most() {
#ifdef MG_PERSISTENT_PROFILE
  if (const char* e = std::getenv("MG_PERSIST_THREADS")) return std::atoi(e);
#endif
  return kPersistentThreads;
}

#ifdef MG_PERSISTENT_PROFILE
// A development instrument (bench/bench_lstm_cuda built with -DMG_PERSISTENT_PROFILE; never in
// the library's build): the cycles block 0's thread 0 spends in each phase of a step, summed over
// launches. [forward, backward][staging, products, cell, barrier, steps counted]
__device__ long long g_phase_cycles[2][5];
#define MG_PHASES long long mark_at = clock64()
#define MG_MARK(dir, phase)                      \
  if (blockIdx.x == 0 && threadIdx.x == 0) {     \
    const long long now = clock64();             \
    g_phase_cycles[dir][phase] += now - mark_at; \
    mark_at = now;                               \
    if (phase == 3) g_phase_cycles[dir][4] += 1; \
  }
#else
#define MG_PHASES
#define MG_MARK(dir, phase)
#endif

// The forward time loop. w_hh [4H,H], h0/c0 [B,H], bias [4H]; acts [T*B,4H] hold x_t W_ih^T on
// entry and i, f, g, o on return; cells [T*B,H] = c_t; y [T+1,B,H] rows 0..T-1 = h_t. Launched
// cooperatively with ceil(H/U) blocks of 32*U*S >= U*B threads (warp = unit u, inner slice s;
// thread p < units*B also owns the cell of (b, u) = (p / units, p % units), its c and bias kept in
// registers across the steps).
template <int N>
__global__ void __launch_bounds__(kPersistentThreads, 1)
    lstm_forward_persistent_kernel(int T, int B, int H, int U, int S, bool vec4,
                                   const float* __restrict__ w_hh, const float* __restrict__ h0,
                                   const float* __restrict__ c0, const float* __restrict__ bias,
                                   float* acts, float* cells, float* y) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float4 smem4[];
  float* w_s = reinterpret_cast<float*>(smem4);  // [4U,H]: row 4u + q = W_hh row q*H + j0 + u
  float* h_s = w_s + 4 * U * H;                  // [B,H]: h_{t-1}
  float* part = h_s + B * H;                     // [S,U,4,B]: each slice's sums
  const int j0 = blockIdx.x * U, units = min(U, H - j0);
  for (int i = threadIdx.x; i < 4 * U * H; i += blockDim.x) {
    const int row = i / H, k = i - row * H, u = row >> 2, q = row & 3;
    w_s[i] = u < units ? w_hh[(static_cast<int64_t>(q) * H + j0 + u) * H + k] : 0.0f;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int u = warp % U, s = warp / U;
  const int loads = vec4 ? H / 4 : H;  // a row of h, in loads
  const int k_begin = s * loads / S, k_end = (s + 1) * loads / S;
  constexpr int kShift = 5 - log2_of(N);  // lane l ends with the sums of row b0 + (l >> kShift)
  const int64_t BH = static_cast<int64_t>(B) * H, G = 4 * static_cast<int64_t>(H);
  const bool cell_thread = static_cast<int>(threadIdx.x) < units * B;
  const int cb = cell_thread ? threadIdx.x / units : 0, cu = threadIdx.x - cb * units;
  const int64_t cj = j0 + cu, cidx = cb * static_cast<int64_t>(H) + cj;
  float bias_j[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c_prev = 0.0f;
  if (cell_thread) {
#pragma unroll
    for (int q = 0; q < 4; ++q) bias_j[q] = bias[q * H + cj];
    c_prev = c0[cidx];
  }
  MG_PHASES;
  for (int t = 0; t < T; ++t) {
    float* zr = acts + (t * static_cast<int64_t>(B) + cb) * G + cj;  // x_t W_ih^T, unit cj
    float zx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (cell_thread)  // loaded now, used after the products: the latency hides behind them
#pragma unroll
      for (int q = 0; q < 4; ++q) zx[q] = zr[q * H];
    stage_from_grid(t > 0 ? y + (t - 1) * BH : h0, H, B, H, vec4, h_s);
    __syncthreads();  // h_s (and at t = 0, w_s) complete
    MG_MARK(0, 0);
    for (int b0 = 0; b0 < B; b0 += N) {
      float acc[4][N];
      zero_accumulators(acc);
      accumulate_four_rows<N>(w_s + 4 * u * H, H, h_s + b0 * H, H, min(N, B - b0), vec4, k_begin,
                              k_end, acc);
      const int b = b0 + (lane >> kShift);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float sum = WarpScatter<N, 16>::run(acc[q], lane);
        if ((lane & ((1 << kShift) - 1)) == 0 && b < B) part[((s * U + u) * 4 + q) * B + b] = sum;
      }
    }
    __syncthreads();  // every slice's sums in part
    MG_MARK(0, 1);
    if (cell_thread) {
      float z[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float acc = 0.0f;
        for (int ss = 0; ss < S; ++ss) acc += part[((ss * U + cu) * 4 + q) * B + cb];
        z[q] = acc;
      }
      const LstmCell cell =
          lstm_cell_forward(zx[0] + z[0] + bias_j[0], zx[1] + z[1] + bias_j[1],
                            zx[2] + z[2] + bias_j[2], zx[3] + z[3] + bias_j[3], c_prev);
      zr[0] = cell.i, zr[H] = cell.f, zr[2 * H] = cell.g, zr[3 * H] = cell.o;
      cells[t * BH + cidx] = cell.c;
      y[t * BH + cidx] = cell.h;
      c_prev = cell.c;
    }
    MG_MARK(0, 2);
    if (t + 1 < T) grid.sync();  // h_t everywhere before step t+1 stages it
    MG_MARK(0, 3);
  }
}

// The BPTT loop. w_hh_t = W_hh^T [H,4H]; acts [T*B,4H] (i, f, g, o), cells [T*B,H], c0 [B,H],
// grad_y [T+1,B,H]; dc [B,H] holds d c_T on entry and d c_0 on return; writes d_gates [T*B,4H].
// Launched cooperatively with ceil(H/U) blocks of 32*(U/4)*S >= U*B threads (warp = units 4g ..
// 4g+3 of the block, inner slice s; thread p < units*B owns the cell of (p / units, p % units),
// its d c kept in a register). Batch rows are taken N at a time, and for each, dG_{t+1}'s rows are
// staged in C column chunks of 4H/C, the products summed over the chunks in registers.
template <int N>
__global__ void __launch_bounds__(kPersistentThreads, 1)
    lstm_backward_persistent_kernel(int T, int B, int H, int U, int S, int C, bool vec4,
                                    const float* __restrict__ w_hh_t,
                                    const float* __restrict__ acts, const float* __restrict__ cells,
                                    const float* __restrict__ c0, const float* __restrict__ grad_y,
                                    float* dc, float* d_gates) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float4 smem4[];
  const int G = 4 * H, chunk = G / C;
  float* wt_s = reinterpret_cast<float*>(smem4);  // [U,4H]: row u = W_hh^T row j0 + u
  float* g_s = wt_s + U * G;                      // [min(N,B),chunk]: a chunk of dG_{t+1}'s rows
  float* part = g_s + min(N, B) * chunk;          // [S,U,B]: each slice's sums
  const int j0 = blockIdx.x * U, units = min(U, H - j0);
  for (int i = threadIdx.x; i < U * G; i += blockDim.x) {
    const int u = i / G;
    wt_s[i] = u < units ? w_hh_t[static_cast<int64_t>(j0) * G + i] : 0.0f;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, groups = U / 4;
  const int g = warp % groups, s = warp / groups;
  const int loads = vec4 ? chunk / 4 : chunk;  // a staged row, in loads
  const int k_begin = s * loads / S, k_end = (s + 1) * loads / S;
  constexpr int kShift = 5 - log2_of(N);
  const int64_t BH = static_cast<int64_t>(B) * H;
  const bool cell_thread = static_cast<int>(threadIdx.x) < units * B;
  const int cb = cell_thread ? threadIdx.x / units : 0, cu = threadIdx.x - cb * units;
  const int64_t cj = j0 + cu, cidx = cb * static_cast<int64_t>(H) + cj;
  float dc_t = cell_thread ? dc[cidx] : 0.0f;  // d c_t, from d c_T down
  MG_PHASES;
  for (int t = T - 1; t >= 0; --t) {
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c_t = 0.0f, c_prev = 0.0f, dy = 0.0f;
    if (cell_thread) {  // loaded now, used after the products
      const float* ar = acts + (t * static_cast<int64_t>(B) + cb) * G + cj;
#pragma unroll
      for (int q = 0; q < 4; ++q) a[q] = ar[q * H];
      c_t = cells[t * BH + cidx];
      c_prev = t > 0 ? cells[(t - 1) * BH + cidx] : c0[cidx];
      dy = grad_y[t * BH + cidx];
    }
    if (t + 1 < T) {
      const float* dg_next = d_gates + (t + 1) * static_cast<int64_t>(B) * G;
      for (int b0 = 0; b0 < B; b0 += N) {
        const int rows = min(N, B - b0);
        float acc[4][N];
        zero_accumulators(acc);
        for (int c = 0; c < C; ++c) {
          stage_from_grid(dg_next + b0 * static_cast<int64_t>(G) + c * chunk, G, rows, chunk, vec4,
                          g_s);
          __syncthreads();  // the chunk (and at the first, wt_s) complete
          MG_MARK(1, 0);
          accumulate_four_rows<N>(wt_s + 4 * g * G + c * chunk, G, g_s, chunk, rows, vec4, k_begin,
                                  k_end, acc);
          __syncthreads();  // every warp done with the chunk before the next overwrites it
          MG_MARK(1, 1);
        }
        const int b = b0 + (lane >> kShift);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float sum = WarpScatter<N, 16>::run(acc[r], lane);
          if ((lane & ((1 << kShift) - 1)) == 0 && b < B) part[(s * U + 4 * g + r) * B + b] = sum;
        }
      }
      __syncthreads();  // every slice's sums in part
    }
    if (cell_thread) {
      float dh = 0.0f;
      if (t + 1 < T)
        for (int ss = 0; ss < S; ++ss) dh += part[(ss * U + cu) * B + cb];
      const LstmCellGrad d = lstm_cell_backward(a[0], a[1], a[2], a[3], c_t, c_prev, dy + dh, dc_t);
      float* dz = d_gates + (t * static_cast<int64_t>(B) + cb) * G + cj;
      dz[0] = d.di, dz[H] = d.df, dz[2 * H] = d.dg, dz[3 * H] = d.d_o;
      dc_t = d.dc_prev;
    }
    MG_MARK(1, 2);
    if (t > 0) grid.sync();  // dG_t everywhere before step t-1 stages it
    MG_MARK(1, 3);
  }
  if (cell_thread) dc[cidx] = dc_t;  // d c_0
}

// What this GPU allows: multiprocessors, cooperative launches, a block's shared memory (opt-in).
struct DeviceLimits {
  int sms = 0, cooperative = 0, smem = 0;
};
DeviceLimits device_limits() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  DeviceLimits d;
  CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&d.cooperative, cudaDevAttrCooperativeLaunch, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&d.smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return d;
}

// Whether the blocks of a plan can all be resident at once (the barrier needs every block running):
// allows the kernel its shared memory, then asks the occupancy calculator.
template <typename Kernel>
bool co_resident(Kernel kernel, const PersistentPlan& plan, const DeviceLimits& d) {
  if (plan.smem_bytes > static_cast<size_t>(d.smem)) return false;
  // The most this GPU allows, not this plan's bytes: another shape's plan must not lower it.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, d.smem));
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, plan.threads,
                                                           plan.smem_bytes));
  return plan.blocks <= per_sm * d.sms;
}

PersistentPlan forward_plan_for(int64_t B, int64_t H) {
  PersistentPlan plan;
  if (B < 1 || B > kMaxRecurrentB || H < 1) return plan;
  const DeviceLimits d = device_limits();
  if (!d.cooperative || d.sms < 1) return plan;
  const int64_t U = (H + d.sms - 1) / d.sms;  // one block per multiprocessor
  if (32 * U > threads_at_most()) return plan;
  plan.units = static_cast<int>(U);
  plan.rows = rows_per_pass(B);
  plan.slices = std::max<int>(1, threads_at_most() / (32 * plan.units));
  plan.chunks = 1;
  plan.threads = 32 * plan.units * plan.slices;
  plan.blocks = static_cast<int>((H + U - 1) / U);
  plan.smem_bytes =
      sizeof(float) * static_cast<size_t>(4 * U * H + B * H + plan.slices * U * 4 * B);
  if (U * B > plan.threads) return plan;  // a thread per cell
  plan.ok = plan.rows == 8 ? co_resident(lstm_forward_persistent_kernel<8>, plan, d)
                           : co_resident(lstm_forward_persistent_kernel<16>, plan, d);
  return plan;
}

PersistentPlan backward_plan_for(int64_t B, int64_t H) {
  PersistentPlan plan;
  if (B < 1 || B > kMaxRecurrentB || H < 1) return plan;
  const DeviceLimits d = device_limits();
  if (!d.cooperative || d.sms < 1) return plan;
  const int64_t U = 4 * ((H + 4 * d.sms - 1) / (4 * d.sms));  // four units a warp
  if (32 * (U / 4) > threads_at_most()) return plan;
  plan.units = static_cast<int>(U);
  plan.rows = rows_per_pass(B);
  plan.slices = std::max<int>(1, threads_at_most() / (32 * (plan.units / 4)));
  plan.threads = 32 * (plan.units / 4) * plan.slices;
  plan.blocks = static_cast<int>((H + U - 1) / U);
  // A pass's rows of dG_{t+1} in as few column chunks as fit beside the weights (1, 2 or 4; a
  // chunk of H columns, one gate block, always divides 4H).
  const int64_t staged_rows = std::min<int64_t>(plan.rows, B);
  for (int C : {1, 2, 4}) {
    plan.chunks = C;
    plan.smem_bytes = sizeof(float) * static_cast<size_t>(U * 4 * H + staged_rows * (4 * H / C) +
                                                          plan.slices * U * B);
    if (plan.smem_bytes <= static_cast<size_t>(d.smem)) break;
  }
  if (U * B > plan.threads) return plan;  // a thread per cell
  plan.ok = plan.rows == 8 ? co_resident(lstm_backward_persistent_kernel<8>, plan, d)
                           : co_resident(lstm_backward_persistent_kernel<16>, plan, d);
  return plan;
}

// A plan costs a few driver queries; a training run asks for the same few shapes every batch.
PersistentPlan cached_plan(bool backward, int64_t B, int64_t H) {
  static std::mutex mutex;
  static std::map<std::tuple<int, bool, int64_t, int64_t>, PersistentPlan> plans;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const auto key = std::make_tuple(dev, backward, B, H);
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = plans.find(key);
  if (found != plans.end()) return found->second;
  return plans[key] = backward ? backward_plan_for(B, H) : forward_plan_for(B, H);
}

}  // namespace

PersistentPlan persistent_forward_plan(int64_t B, int64_t H) {
  return cached_plan(false, B, H);
}

PersistentPlan persistent_backward_plan(int64_t B, int64_t H) {
  return cached_plan(true, B, H);
}

void launch_forward_persistent(const PersistentPlan& plan, int64_t T, int64_t B, int64_t H,
                               const float* w_hh, const float* h0, const float* c0,
                               const float* bias, float* acts, float* cells, float* y) {
  int t = static_cast<int>(T), b = static_cast<int>(B), h = static_cast<int>(H);
  int u = plan.units, s = plan.slices;
  bool v =
      H % 4 == 0 && (reinterpret_cast<uintptr_t>(h0) | reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  void* args[] = {&t, &b, &h, &u, &s, &v, &w_hh, &h0, &c0, &bias, &acts, &cells, &y};
  CUDA_CHECK(cudaLaunchCooperativeKernel(
      plan.rows == 8 ? reinterpret_cast<const void*>(lstm_forward_persistent_kernel<8>)
                     : reinterpret_cast<const void*>(lstm_forward_persistent_kernel<16>),
      dim3(plan.blocks), dim3(plan.threads), args, plan.smem_bytes, 0));
  CUDA_CHECK_LAUNCH("lstm_forward_persistent_kernel");
}

void launch_backward_persistent(const PersistentPlan& plan, int64_t T, int64_t B, int64_t H,
                                const float* w_hh_t, const float* acts, const float* cells,
                                const float* c0, const float* grad_y, float* dc, float* d_gates) {
  int t = static_cast<int>(T), b = static_cast<int>(B), h = static_cast<int>(H);
  int u = plan.units, s = plan.slices, c = plan.chunks;
  bool v = (4 * H / c) % 4 == 0 && reinterpret_cast<uintptr_t>(d_gates) % 16 == 0;
  void* args[] = {&t, &b, &h, &u, &s, &c, &v, &w_hh_t, &acts, &cells, &c0, &grad_y, &dc, &d_gates};
  CUDA_CHECK(cudaLaunchCooperativeKernel(
      plan.rows == 8 ? reinterpret_cast<const void*>(lstm_backward_persistent_kernel<8>)
                     : reinterpret_cast<const void*>(lstm_backward_persistent_kernel<16>),
      dim3(plan.blocks), dim3(plan.threads), args, plan.smem_bytes, 0));
  CUDA_CHECK_LAUNCH("lstm_backward_persistent_kernel");
}

#ifdef MG_PERSISTENT_PROFILE
// Prints block 0's microseconds per step in each phase since the last call, then resets.
void persistent_profile_print(const char* label) {
  long long c[2][5];
  CUDA_CHECK(cudaMemcpyFromSymbol(c, g_phase_cycles, sizeof c));
  int dev = 0, khz = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  for (int d = 0; d < 2; ++d) {
    const double steps = c[d][4] > 0 ? static_cast<double>(c[d][4]) : 1.0, us = 1e3 / khz;
    std::printf(
        "  %-28s %s: stage %.2f  products %.2f  cell %.2f  barrier %.2f us/step (%lld steps)\n",
        label, d ? "bptt" : "fwd ", c[d][0] * us / steps, c[d][1] * us / steps,
        c[d][2] * us / steps, c[d][3] * us / steps, c[d][4]);
  }
  const long long zero[2][5] = {};
  CUDA_CHECK(cudaMemcpyToSymbol(g_phase_cycles, zero, sizeof zero));
}
#endif

}  // namespace mg
