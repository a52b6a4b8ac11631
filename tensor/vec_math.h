// The CPU-only parts of the vectorizable math: vexp on 16 floats with AVX-512 and the row helpers
// of softmax (row_max, sum_exp). The scalar formulas (vexp, vlog, vlog1p,
// vsigmoid, vtanh, vlog_sigmoid) are in math/scalar_math.h, written once for the CPU and the GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "math/scalar_math.h"

namespace mg {

#if defined(__AVX512F__)
// vexp_at_most_64 on 16 floats, for the passes over the head's 35M logits per small-mos step:
// the same n, r and polynomial, but 2^n applied by vscalefps, which also handles results below
// the normal range, so the clamp (a compare and two blends) and the exponent-field arithmetic go:
// ~25% faster. Bit for bit vexp_at_most_64 where exp(x) is a normal float (x >= -87.33); below,
// exp(x) itself (rounded to a subnormal, then 0) where vexp stays at FLT_MIN. -inf gives 0, NaN
// stays NaN (tests/tensor/test_vec_math.cpp).
// (The maskz forms with every lane set are the plain instructions; the plain intrinsics start
// from _mm512_undefined_ps, which GCC 12 reports as maybe-uninitialized.)
constexpr __mmask16 kAll16 = 0xffff;
inline __m512 vexp16_at_most_64(__m512 x) {
  // Below -110 exp(x) is 0 in float; the floor keeps -inf out of r (-inf + inf would be NaN).
  // vmaxps returns its second operand when either is NaN, so a NaN x passes through.
  x = _mm512_maskz_max_ps(kAll16, _mm512_set1_ps(-110.0f), x);
  const __m512 n =
      _mm512_maskz_roundscale_ps(kAll16, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(r, r), p, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(kAll16, e, n);
}
#endif

// Σ_j exp(x[j] - shift) over one row, optionally storing each exp(x[j] - shift) in out (which may
// be x itself). x[j] - shift must be <= 64: softmax passes the row's max, the fused head a shift
// at most 64 below it (vexp_at_most_64; vexp16_at_most_64 with AVX-512, which differs only where
// exp(x) is below the normal range). Sixteen float partial sums in a fixed
// pattern (then added in double): vectorizes, and the result depends only on the row, never on
// threads.
template <bool kStore>
inline double sum_exp(const float* x, int64_t n, float shift, float* out) {
  float acc[16] = {0};
  int64_t j = 0;
#if defined(__AVX512F__)
  __m512 acc16 = _mm512_setzero_ps();
  for (; j + 16 <= n; j += 16) {
    const __m512 z = _mm512_sub_ps(_mm512_loadu_ps(x + j), _mm512_set1_ps(shift));
    const __m512 e = vexp16_at_most_64(z);
    if (kStore) _mm512_storeu_ps(out + j, e);
    acc16 = _mm512_add_ps(acc16, e);
  }
  _mm512_storeu_ps(acc, acc16);
#endif
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) {
      const float e = vexp_at_most_64(x[j + l] - shift);
      if (kStore) out[j + l] = e;
      acc[l] += e;
    }
  double total = 0;
  for (; j < n; ++j) {
    const float e = vexp_at_most_64(x[j] - shift);
    if (kStore) out[j] = e;
    total += e;
  }
  for (int l = 0; l < 16; ++l) total += acc[l];
  return total;
}

// max_j x[j] (−inf for n = 0), vectorizable. A NaN is skipped (the comparison is false), as in
// the scalar form. Without `omp simd` GCC 12 kept the sixteen lanes as sixteen scalar maxss, and
// the softmax's first pass over the logits (fused_mixture_nll) ran at a quarter of its speed.
inline float row_max(const float* x, int64_t n) {
  float m[16];
  for (int l = 0; l < 16; ++l) m[l] = -INFINITY;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
#pragma omp simd
    for (int l = 0; l < 16; ++l) m[l] = std::max(m[l], x[j + l]);  // (m < x) ? x : m
  }
  float r = -INFINITY;
  for (; j < n; ++j) r = x[j] > r ? x[j] : r;
  for (int l = 0; l < 16; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

}  // namespace mg
