// exp, log, log1p, sigmoid, tanh and log-sigmoid that the compiler can vectorize (vexp, vlog, ...),
// and the row helpers of softmax (row_max, sum_exp). glibc's expf is a scalar call, and
// softmax-style loops over a 10,000-word vocabulary spend most of their time in it. These are
// branch-free, so loops using them compile to AVX-512/AVX2 code. vexp: accuracy ~1 ulp (relative
// error < 1.2e-7) on [-87.3, 88.7].
//   exp(x) = 2^n · exp(r),  n = round(x / ln 2),  r = x − n·ln 2 (Cody–Waite, two-part ln 2),
//   exp(r) = 1 + r + r²·P(r) on |r| ≤ ln2/2 (minimax coefficients as in Cephes' expf).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mg {

// kNonPositive: the caller guarantees x <= 0 (or NaN), as for the shifted logits x - max of a
// softmax; see vexp_nonpositive below.
template <bool kNonPositive>
inline float vexp_impl(float x) {
  // Clamped to the normal range: below -87.3 the result stays at ~1.2e-38 (FLT_MIN) instead of
  // reaching 0 — harmless in sums and logs, and without a final select, so that vexp composes with
  // vlog inside one vectorized loop (the select stopped GCC's if-conversion).
  const float lo = -87.33654f, hi = 88.72283f;
  x = kNonPositive ? (x < lo ? lo : x) : (x < lo ? lo : (x > hi ? hi : x));
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f;  // ln 2, high part (exact in float)
  r = r - n * -2.12194440e-4f;     // ln 2, low part
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = 1.0f + r + r * r * p;
  const int32_t ni = static_cast<int32_t>(n);
  // Shifted as unsigned: for a NaN input n is NaN, the conversion gives INT_MIN on x86 and the
  // result is NaN anyway (e is NaN), but a left shift of that negative int would be undefined.
  if (kNonPositive) {
    // n in [-126, 0]: 2^n is one normal float. e * 2^n rounds once, as e * 2^half * 2^(n-half)
    // does below (its first product is exact): the same bits, a third fewer instructions.
    const uint32_t b = static_cast<uint32_t>(ni + 127) << 23;
    float s;
    std::memcpy(&s, &b, sizeof s);
    return e * s;
  }
  // 2^n by building the float's exponent bits; n is in [-126, 128] after the clamp.
  const int32_t half = ni / 2;  // split so 2^n never overflows the exponent field when n = 128
  const uint32_t b1 = static_cast<uint32_t>(half + 127) << 23,
                 b2 = static_cast<uint32_t>(ni - half + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  return e * s1 * s2;
}

inline float vexp(float x) {
  return vexp_impl<false>(x);
}

// exp(x) for x <= 0 only (x > 0 gives wrong results): the softmax's exp(x - max) and
// exp(x - logsumexp). Bit for bit vexp there (tests/test_vec_math.cpp), ~30% fewer instructions;
// it is most of the time of the passes over the head's 35M logits per small-mos step.
inline float vexp_nonpositive(float x) {
  return vexp_impl<true>(x);
}

// exp(x) for x <= 64: the same code as vexp_nonpositive, which is right (bit for bit vexp) past 0
// too, as long as 2^n with n = round(x / ln 2) is one normal float (n <= 127; x <= 64 gives n <=
// 93). The fused head's exp(z - shift) needs it: its shift may trail a row's max by up to 64
// (nn/fused_head_loss.cpp, RunningLse).
inline float vexp_at_most_64(float x) {
  return vexp_impl<true>(x);
}

#if defined(__AVX512F__)
// vexp_at_most_64 on 16 floats, for the passes over the head's 35M logits per small-mos step:
// the same n, r and polynomial, but 2^n applied by vscalefps, which also handles results below
// the normal range, so the clamp (a compare and two blends) and the exponent-field arithmetic go:
// ~25% faster. Bit for bit vexp_at_most_64 where exp(x) is a normal float (x >= -87.33); below,
// exp(x) itself (rounded to a subnormal, then 0) where vexp stays at FLT_MIN. -inf gives 0, NaN
// stays NaN (tests/test_vec_math.cpp).
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
  const __m512 e =
      _mm512_fmadd_ps(_mm512_mul_ps(r, r), p, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(kAll16, e, n);
}
#endif

}  // namespace mg

namespace mg {

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

namespace mg {

// Natural log for x > 0 (normal floats), branch-free so loops vectorize; ~1 ulp.
//   x = m·2^e with m in [√½, √2),  log x = e·ln 2 + log m,  log(1+f) = f − f²/2 + f³·P(f)
//   (minimax coefficients as in Cephes' logf; ln 2 in two parts as in vexp).
inline float vlog(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int32_t e = ((bits >> 23) & 0xff) - 126;  // x = m·2^e with m in [0.5, 1)
  int32_t mbits = (bits & 0x007fffff) | 0x3f000000;
  float m;
  std::memcpy(&m, &mbits, sizeof m);
  const bool small = m < 0.707106781186547524f;  // move m into [√½, √2)
  e = small ? e - 1 : e;
  const float f = small ? m + m - 1.0f : m - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const float fe = static_cast<float>(e);
  float y = p * f * z + fe * -2.12194440e-4f - 0.5f * z;
  return f + y + fe * 0.693359375f;
}

// log(1 + y) for y >= 0, accurate for tiny y too: u = 1 + y rounds, and the first-order correction
// −((u − 1) − y)/u puts the lost part of y back (for tiny y: log u = 0 and the result is y). No
// branch, so loops vectorize (a compare-and-select on d = u − 1 did not).
inline float vlog1p(float y) {
  const float u = 1.0f + y;
  return vlog(u) - ((u - 1.0f) - y) / u;
}

inline float vsigmoid(float x) {
  return 1.0f / (1.0f + vexp(-x));
}

// tanh, branch-free so that the LSTM's gate loops vectorize; ~2 ulp (glibc's tanhf is a scalar call
// and was 8% of a small-model training step). Two forms, as in Cephes' tanhf:
//   |x| < 0.625:  x + x³·P(x²)            (1 − 2/(e^{2x}+1) would cancel catastrophically near 0)
//   otherwise:    ±(1 − 2/(e^{2|x|} + 1)) (vexp clamps, so large |x| gives exactly ±1, never NaN)
inline float vtanh(float x) {
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float near_zero = x + x * z * p;
  const float ax = std::fabs(x);
  const float far = std::copysign(1.0f - 2.0f / (vexp(ax + ax) + 1.0f), x);
  return ax < 0.625f ? near_zero : far;
}

// log σ(x) = min(x, 0) − log(1 + e^−|x|): no overflow, no log(0), vectorizable.
inline float vlog_sigmoid(float x) {
  const float neg_abs = x < 0.0f ? x : -x;  // −|x| (std::fmin/fabs forms became library calls)
  return (x < 0.0f ? x : 0.0f) - vlog1p(vexp_nonpositive(neg_abs));
}

}  // namespace mg
