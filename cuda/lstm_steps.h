// The GPU LSTM's one-kernel steps (cuda/lstm_steps.cu), for the loops of cuda/lstm_fused.cu. Each
// launch does step t's recurrent product and its cell update together, on the default stream, so
// step t+1 starts only after step t. Pointers are device memory; shapes as in cuda/lstm_fused.cu:
// w_hh [4H,H], w_hh_t = W_hh^T [H,4H], h_prev/c_prev/c/h/dy/dc [B,H], gates/act/dz/dg_next [B,4H]
// (row-major, one step's rows), bias [4H] (b_ih + b_hh).
#pragma once

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

}  // namespace mg
