// The fused head loss's passes over one row of logits (nn/fused_head_loss.cpp), beside the
// vectorizable math they use (tensor/vec_math.h): add the bias, take the max, turn the row into
// exponentials, and carry a row's logsumexp across the vocabulary slabs it is computed in. Each
// runs once per vocabulary entry per row, so each is written to vectorize, and each sums in a fixed
// order (the same bits for any thread count).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/vec_math.h"

namespace mg {

// z_row [n] += b [n].
inline void add_bias(float* z_row, const float* b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) z_row[j] += b[j];
}

// add_bias and then row_max in one pass: the same sums and the same max (a NaN skipped as
// row_max skips it), one trip through the tile fewer.
inline float add_bias_max(float* __restrict z_row, const float* __restrict b, int64_t n) {
  float m[16];
  for (int l = 0; l < 16; ++l) m[l] = -INFINITY;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
#pragma omp simd
    for (int l = 0; l < 16; ++l) {
      const float z = z_row[j + l] + b[j + l];
      z_row[j + l] = z;
      m[l] = std::max(m[l], z);
    }
  }
  float r = -INFINITY;
  for (; j < n; ++j) {
    z_row[j] += b[j];
    r = z_row[j] > r ? z_row[j] : r;
  }
  for (int l = 0; l < 16; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

// add_bias_max and then RunningLse's exponentials in one pass, once a row's shift is known (every
// slab after its first): z_row becomes exp(z + b - shift), and the max of z + b comes back in
// *max_out for the caller to check against the shift (when it passed shift + kShiftSlack the
// exponentials are wrong, and the slab is recomputed). The same sums in the same order as the
// two passes, so the same bits.
inline double add_bias_exp_sum(float* __restrict z_row, const float* __restrict b, int64_t n,
                               float shift, float* max_out) {
  float m[16], acc[16];
  for (int l = 0; l < 16; ++l) m[l] = -INFINITY, acc[l] = 0.0f;
  int64_t j = 0;
#if defined(__AVX512F__)
  // The loop below, with vexp16_at_most_64 (vscalefps): the same lanes, the same bits where
  // exp(z - shift) is a normal float. vmaxps(m, z) returns z when either is NaN, where std::max
  // keeps m: the running max is kept as max(z, m) instead, which skips a NaN z as std::max does.
  __m512 m16 = _mm512_set1_ps(-INFINITY), acc16 = _mm512_setzero_ps();
  const __m512 shift16 = _mm512_set1_ps(shift);
  for (; j + 16 <= n; j += 16) {
    const __m512 z = _mm512_add_ps(_mm512_loadu_ps(z_row + j), _mm512_loadu_ps(b + j));
    m16 = _mm512_maskz_max_ps(kAll16, z, m16);
    const __m512 e = vexp16_at_most_64(_mm512_sub_ps(z, shift16));
    _mm512_storeu_ps(z_row + j, e);
    acc16 = _mm512_add_ps(acc16, e);
  }
  _mm512_storeu_ps(m, m16);
  _mm512_storeu_ps(acc, acc16);
#endif
  for (; j + 16 <= n; j += 16) {
#pragma omp simd
    for (int l = 0; l < 16; ++l) {
      const float z = z_row[j + l] + b[j + l];
      m[l] = std::max(m[l], z);
      const float e = vexp_at_most_64(z - shift);
      z_row[j + l] = e;
      acc[l] += e;
    }
  }
  float r = -INFINITY;
  double total = 0;
  for (; j < n; ++j) {
    const float z = z_row[j] + b[j];
    r = z > r ? z : r;
    const float e = vexp_at_most_64(z - shift);
    z_row[j] = e;
    total += e;
  }
  for (int l = 0; l < 16; ++l) r = m[l] > r ? m[l] : r, total += acc[l];
  *max_out = r;
  return total;
}

// Sigsoftmax's pass over one slab of a row (Kanai et al. 2018, eq. 9): s [n] = z + log σ(z), the
// logits its softmax normalises, and slope [n] = d s / d z = 2 − σ(z), the factor its gradient
// carries. One exponential u = e^{−|z|} serves both: log σ(z) = min(z, 0) − log1p(u) (s has
// the bits of z + vlog_sigmoid(z)) and σ(z) = (z ≥ 0 ? 1 : u) / (1 + u), which never overflows.
inline void sig_logits_and_slopes(const float* __restrict z, int64_t n, float* __restrict s,
                                  float* __restrict slope) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float x = z[j];
    const float u = vexp_neg_abs(x);
    s[j] = x + vlog_sigmoid_given(x, u);
    slope[j] = 2.0f - select_float(x < 0.0f, u, 1.0f) / (1.0f + u);
  }
}

// A row's running logsumexp over the slabs seen so far: Σ_j exp(x_j - shift) for a shift that
// moves only when a slab's max passes it by more than kShiftSlack (on the first finite slab, and
// rarely after). A shift that followed the running max exactly would move in ~3 of a row's 14
// slabs, and every move rescales what is stored; trailing the max by up to 64 keeps exp(x - shift)
// <= e^64 (6e27), far from overflow, and logsumexp = shift + log Σ stays exact.
// With `stored` (the row's first column) the exponentials are written over x, and a move of the
// shift rescales the slabs already stored: backward reads exp(z - shift) and scales each row by
// exp(shift - lse) (backward_from_exps), instead of a second exp pass over all the logits.
// (Sigsoftmax's x is a scratch row; the fused head stores its exponentials into the row
// multiplied by 2 - σ(z).)
constexpr float kShiftSlack = 64.0f;
struct RunningLse {
  float shift = -INFINITY;
  double sum = 0;
  // Folds in one slab x [n] (columns c0.. of the row) whose max is slab_max.
  void add(float* x, int64_t n, float slab_max, float* stored, int64_t c0) {
    if (slab_max > shift + kShiftSlack) {  // -inf + 64 is -inf: the first finite slab moves it
      const double rescale = std::exp(static_cast<double>(shift) - slab_max);  // 0 from -inf
      if (shift != -INFINITY) {
        sum *= rescale;
        for (int64_t j = 0; stored && j < c0; ++j) stored[j] *= static_cast<float>(rescale);
      }
      shift = slab_max;
    }
    if (shift == -INFINITY) {  // nothing but -inf so far: every exponential is 0
      if (stored) std::fill(x, x + n, 0.0f);
      return;
    }
    sum += stored ? sum_exp<true>(x, n, shift, x) : sum_exp<false>(x, n, shift, nullptr);
  }
};

}  // namespace mg
