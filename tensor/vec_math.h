// exp that the compiler can vectorize. glibc's expf is a scalar call, and softmax-style loops over a
// 10,000-word vocabulary spend most of their time in it. This one is branch-free, so loops using it
// compile to AVX-512/AVX2 code; accuracy ~2 ulp (relative error < 3e-7) over the float range.
//   exp(x) = 2^n · exp(r),  n = round(x / ln 2),  r = x − n·ln 2 (Cody–Waite, two-part ln 2),
//   exp(r) = 1 + r + r²·P(r) on |r| ≤ ln2/2 (minimax coefficients as in Cephes' expf).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mg {

inline float vexp(float x) {
  // Below -87.3 the result is under FLT_MIN: return 0 (as expf does, up to denormals).
  const float lo = -87.33654f, hi = 88.72283f;
  const bool underflow = x < lo;
  x = x < lo ? lo : (x > hi ? hi : x);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f;      // ln 2, high part (exact in float)
  r = r - n * -2.12194440e-4f;         // ln 2, low part
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = 1.0f + r + r * r * p;
  // 2^n by building the float's exponent bits; n is in [-126, 128] after the clamp.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t half = ni / 2;  // split so 2^n never overflows the exponent field when n = 128
  int32_t b1 = (half + 127) << 23, b2 = (ni - half + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  return underflow ? 0.0f : e * s1 * s2;
}

}  // namespace mg

namespace mg {

// Σ_j exp(x[j] - shift) over one row, optionally storing each exp(x[j] - shift) in out. Sixteen
// float partial sums in a fixed pattern (then added in double): vectorizes, and the result depends
// only on the row, never on threads.
template <bool kStore>
inline double sum_exp(const float* x, int64_t n, float shift, float* out) {
  float acc[16] = {0};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) {
      const float e = vexp(x[j + l] - shift);
      if (kStore) out[j + l] = e;
      acc[l] += e;
    }
  double total = 0;
  for (; j < n; ++j) {
    const float e = vexp(x[j] - shift);
    if (kStore) out[j] = e;
    total += e;
  }
  for (int l = 0; l < 16; ++l) total += acc[l];
  return total;
}

// max_j x[j] (−inf for n = 0), vectorizable.
inline float row_max(const float* x, int64_t n) {
  float m[16];
  for (int l = 0; l < 16; ++l) m[l] = -INFINITY;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
  float r = -INFINITY;
  for (; j < n; ++j) r = x[j] > r ? x[j] : r;
  for (int l = 0; l < 16; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

}  // namespace mg
