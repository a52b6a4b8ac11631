// exp, log, log1p, sigmoid, tanh and log-sigmoid written once for both devices: branch-free, so
// that CPU loops using them vectorize (glibc's expf is a scalar call, and softmax-style loops over
// a 10,000-word vocabulary spend most of their time in it), and __host__ __device__, so that the
// GPU's kernels compute the very same formulas (math/formulas.h, the LSTM's gates, the elementwise
// maps). tensor/vec_math.h adds the CPU-only parts (AVX-512, the softmax row helpers). It sits in
// math/, the lowest layer, because both sides include it; without nvcc it is plain C++.
// vexp: accuracy ~1 ulp (relative error < 1.2e-7) on [-87.3, 88.7].
//   exp(x) = 2^n · exp(r),  n = round(x / ln 2),  r = x − n·ln 2 (Cody–Waite, two-part ln 2),
//   exp(r) = 1 + r + r²·P(r) on |r| ≤ ln2/2 (minimax coefficients as in Cephes' expf).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "math/host_device.h"

namespace mg {

// `c ? if_true : if_false`, written as a select of bits. The plain conditional gives the same
// value, but GCC 12's partial redundancy elimination turned several of them below into branches
// (e.g. vexp's clamp: the formula folds to a constant on the bound's side), and a branch in a loop
// stops its vectorization: every loop calling vexp, vsigmoid, vtanh or vlog ran one float at a
// time on AVX2 CPUs (`-fopt-info-vec-missed`: "control flow in loop"). A NaN compares false.
// On the GPU the conditional stays (one select instruction; GPU kernels are not vectorized loops).
MG_HOST_DEVICE inline float select_float(bool c, float if_true, float if_false) {
#ifdef __CUDA_ARCH__
  return c ? if_true : if_false;
#else
  const uint32_t take = 0u - static_cast<uint32_t>(c);  // all ones or all zeros
  return float_from_bits((bits_of_float(if_true) & take) | (bits_of_float(if_false) & ~take));
#endif
}

// kNonPositive: the caller guarantees x <= 0 (or NaN), as for the shifted logits x - max of a
// softmax; see vexp_nonpositive below.
template <bool kNonPositive>
MG_HOST_DEVICE inline float vexp_impl(float x) {
  // Clamped to the normal range: below -87.3 the result stays at ~1.2e-38 (FLT_MIN) instead of
  // reaching 0 — harmless in sums and logs, and without a final select, so that vexp composes with
  // vlog inside one vectorized loop (the select stopped GCC's if-conversion).
  const float lo = -87.33654f, hi = 88.72283f;
  x = select_float(x < lo, lo, x);
  if (!kNonPositive) x = select_float(x > hi, hi, x);
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
  // A NaN n (from a NaN x) is converted as 0: converting NaN to an integer is undefined behaviour
  // (x86 gives INT_MIN). The result is NaN anyway, since e is NaN.
  const int32_t ni = static_cast<int32_t>(select_float(n == n, n, 0.0f));
  // Shifted as unsigned: a left shift of a negative int would be undefined.
  if (kNonPositive) {
    // n in [-126, 0]: 2^n is one normal float. e * 2^n rounds once, as e * 2^half * 2^(n-half)
    // does below (its first product is exact): the same bits, a third fewer instructions.
    return e * float_from_bits(static_cast<uint32_t>(ni + 127) << 23);
  }
  // 2^n by building the float's exponent bits; n is in [-126, 128] after the clamp.
  const int32_t half = ni / 2;  // split so 2^n never overflows the exponent field when n = 128
  const float s1 = float_from_bits(static_cast<uint32_t>(half + 127) << 23),
              s2 = float_from_bits(static_cast<uint32_t>(ni - half + 127) << 23);
  return e * s1 * s2;
}

MG_HOST_DEVICE inline float vexp(float x) {
  return vexp_impl<false>(x);
}

// exp(x) for x <= 0 only (x > 0 gives wrong results): the softmax's exp(x - max) and
// exp(x - logsumexp). Bit for bit vexp there (tests/tensor/test_vec_math.cpp), ~30% fewer
// instructions; it is most of the time of the passes over the head's 35M logits per small-mos step.
MG_HOST_DEVICE inline float vexp_nonpositive(float x) {
  return vexp_impl<true>(x);
}

// exp(x) for x <= 64: the same code as vexp_nonpositive, which is right (bit for bit vexp) past 0
// too, as long as 2^n with n = round(x / ln 2) is one normal float (n <= 127; x <= 64 gives n <=
// 93). The fused head's exp(z - shift) needs it: its shift may trail a row's max by up to 64
// (nn/fused_head_loss.cpp, RunningLse).
MG_HOST_DEVICE inline float vexp_at_most_64(float x) {
  return vexp_impl<true>(x);
}

// Natural log for x > 0 (normal floats), branch-free so loops vectorize; ~1 ulp.
//   x = m·2^e with m in [√½, √2),  log x = e·ln 2 + log m,  log(1+f) = f − f²/2 + f³·P(f)
//   (minimax coefficients as in Cephes' logf; ln 2 in two parts as in vexp).
MG_HOST_DEVICE inline float vlog(float x) {
  const uint32_t bits = bits_of_float(x);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xff) - 126;  // x = m·2^e with m in [0.5, 1)
  const float m = float_from_bits((bits & 0x007fffffu) | 0x3f000000u);
  const bool small = m < 0.707106781186547524f;  // move m into [√½, √2)
  e -= static_cast<int32_t>(small);
  const float f = select_float(small, m + m - 1.0f, m - 1.0f);
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
MG_HOST_DEVICE inline float vlog1p(float y) {
  const float u = 1.0f + y;
  return vlog(u) - ((u - 1.0f) - y) / u;
}

MG_HOST_DEVICE inline float vsigmoid(float x) {
  return 1.0f / (1.0f + vexp(-x));
}

// tanh, branch-free so that the LSTM's gate loops vectorize; ~2 ulp (glibc's tanhf is a scalar call
// and was 8% of a small-model training step). Two forms, as in Cephes' tanhf:
//   |x| < 0.625:  x + x³·P(x²)            (1 − 2/(e^{2x}+1) would cancel catastrophically near 0)
//   otherwise:    ±(1 − 2/(e^{2|x|} + 1)) (vexp clamps, so large |x| gives exactly ±1, never NaN)
MG_HOST_DEVICE inline float vtanh(float x) {
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float near_zero = x + x * z * p;
  const float ax = std::fabs(x);
  const float far = std::copysign(1.0f - 2.0f / (vexp(ax + ax) + 1.0f), x);
  return select_float(ax < 0.625f, near_zero, far);
}

// e^−|x|, in (0, 1]: the one exponential log σ(x) and σ(x) both need.
MG_HOST_DEVICE inline float vexp_neg_abs(float x) {
  return vexp_nonpositive(select_float(x < 0.0f, x, -x));  // −|x| (std::fmin/fabs: library calls)
}

// log σ(x) = min(x, 0) − log(1 + e^−|x|), given u = vexp_neg_abs(x): no overflow, no log(0).
MG_HOST_DEVICE inline float vlog_sigmoid_given(float x, float u) {
  return select_float(x < 0.0f, x, 0.0f) - vlog1p(u);
}

// log σ(x): branch-free, so loops calling it vectorize.
MG_HOST_DEVICE inline float vlog_sigmoid(float x) {
  return vlog_sigmoid_given(x, vexp_neg_abs(x));
}

}  // namespace mg
