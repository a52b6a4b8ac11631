// The GPU LSTM's one-kernel steps (cuda/lstm_steps.cu), for the loops of cuda/lstm_fused.cu. Each
// launch does step t's recurrent product and its cell update together, on the default stream, so
// step t+1 starts only after step t. Pointers are device memory; shapes as in cuda/lstm_fused.cu:
// w_hh [4H,H], w_hh_t = W_hh^T [H,4H], h_prev/c_prev/c/h/dy/dc [B,H], gates/act/dz/dg_next [B,4H]
// (row-major, one step's rows), bias [4H] (b_ih + b_hh).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mg {

// The widest batch the one-kernel steps take (their per-lane accumulators); wider ones use cuBLAS.
constexpr int kMaxRecurrentB = 32;

// One block per hidden unit, one warp per gate; h_{t-1} (dG_{t+1}) read through the cache.
void launch_step_forward(int64_t B, int64_t H, const float* w_hh, const float* h_prev,
                         const float* bias, float* gates, const float* c_prev, float* c, float* h);
void launch_step_backward(int64_t B, int64_t H, const float* w_hh_t, const float* dg_next,
                          const float* act, const float* c, const float* c_prev, const float* dy,
                          float* dc, float* dz);

// h_{t-1} [B,H] (dG_{t+1} [B,4H]) staged in shared memory, a warp per hidden unit (per four units
// in the backward). staged_fits: whether B*rows_len floats fit one block's shared memory.
bool staged_fits(int64_t B, int64_t rows_len);
void launch_step_forward_staged(int64_t B, int64_t H, const float* w_hh, const float* h_prev,
                                const float* bias, float* gates, const float* c_prev, float* c,
                                float* h);
void launch_step_backward_staged(int64_t B, int64_t H, const float* w_hh_t, const float* dg_next,
                                 const float* act, const float* c, const float* c_prev,
                                 const float* dy, float* dc, float* dz);

// The persistent recurrence (cuda/lstm_persistent.cu): one cooperative launch runs all T steps of
// one layer, each block holding its slice of W_hh in shared memory. A plan says how the hidden
// units split between blocks on this GPU, and ok = false where it cannot run (no cooperative
// launches, B > kMaxRecurrentB, or the slice and the staged rows do not fit a multiprocessor).
struct PersistentPlan {
  bool ok = false;
  int units = 0;   // hidden units per block
  int slices = 0;  // warps splitting each unit's (each four units') inner dimension
  int chunks = 1;  // BPTT: column chunks dG_{t+1} is staged in
  int rows = 16;   // batch rows per pass (8 or 16)
  int threads = 0, blocks = 0;
  size_t smem_bytes = 0;
};
PersistentPlan persistent_forward_plan(int64_t B, int64_t H);
PersistentPlan persistent_backward_plan(int64_t B, int64_t H);
// All T forward steps: acts [T*B,4H] hold x_t W_ih^T on entry, i, f, g, o on return; writes
// cells [T*B,H] and rows 0..T-1 of y [T+1,B,H].
void launch_forward_persistent(const PersistentPlan& plan, int64_t T, int64_t B, int64_t H,
                               const float* w_hh, const float* h0, const float* c0,
                               const float* bias, float* acts, float* cells, float* y);
// All T BPTT steps: dc [B,H] holds d c_T on entry, d c_0 on return; writes d_gates [T*B,4H].
void launch_backward_persistent(const PersistentPlan& plan, int64_t T, int64_t B, int64_t H,
                                const float* w_hh_t, const float* acts, const float* cells,
                                const float* c0, const float* grad_y, float* dc, float* d_gates);
#ifdef MG_PERSISTENT_PROFILE
void persistent_profile_print(const char* label);
#endif

}  // namespace mg
