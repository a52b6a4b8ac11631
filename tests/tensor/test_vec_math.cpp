// The vectorizable math of tensor/vec_math.h against the C library, over the ranges the kernels
// use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/row_logsumexp.h"
#include "tensor/vec_math.h"

TEST(VecMath, ExpLogLog1pLogSigmoidAreAccurate) {
  double worst_exp = 0, worst_log = 0, worst_log1p = 0, worst_ls = 0;
  for (double x = -87.0; x < 88.7; x += 0.0173) {
    const float f = static_cast<float>(x);
    worst_exp =
        std::max(worst_exp, std::fabs(mg::vexp(f) - std::exp(double{f})) / std::exp(double{f}));
  }
  for (double x = 1e-30; x < 1e30; x *= 1.013) {
    const float f = static_cast<float>(x);
    const double ref = std::log(double{f});
    if (std::fabs(ref) > 1e-3)
      worst_log = std::max(worst_log, std::fabs(mg::vlog(f) - ref) / std::fabs(ref));
  }
  for (double y = 1e-12; y <= 1.0; y *= 1.01) {
    const float f = static_cast<float>(y);
    worst_log1p = std::max(
        worst_log1p, std::fabs(mg::vlog1p(f) - std::log1p(double{f})) / std::log1p(double{f}));
  }
  for (double x = -80; x < 60; x += 0.0131) {  // log σ(x) down to ~1e-26 in magnitude
    const float f = static_cast<float>(x);
    const double ref = std::min(double{f}, 0.0) - std::log1p(std::exp(-std::fabs(double{f})));
    worst_ls = std::max(worst_ls, std::fabs(mg::vlog_sigmoid(f) - ref) / std::fabs(ref));
  }
  EXPECT_LT(worst_exp, 2.5e-7);
  EXPECT_LT(worst_log, 2.5e-7);
  EXPECT_LT(worst_log1p, 2.5e-7);
  EXPECT_LT(worst_ls, 5e-7);
  EXPECT_FLOAT_EQ(mg::vexp(0.0f), 1.0f);
  EXPECT_LT(mg::vexp(-1000.0f), 1.2e-38f);  // clamped to the smallest normal, never NaN
  EXPECT_FLOAT_EQ(mg::vsigmoid(0.0f), 0.5f);
  EXPECT_FLOAT_EQ(mg::vsigmoid(100.0f), 1.0f);
}

// vexp_nonpositive is vexp, bit for bit, wherever it may be used (x <= 0, NaN): every float in
// [-1, 0], a dense sweep down to the clamp and past it, where e * 2^n rounds to a denormal-free
// FLT_MIN neighbourhood, and the special values.
TEST(VecMath, ExpOfNonPositiveIsExpBitForBit) {
  auto same = [](float x) {
    const float a = mg::vexp(x), b = mg::vexp_nonpositive(x);
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    return ua == ub;
  };
  int64_t checked = 0, differ = 0;
  float first_bad = 0;
  auto check = [&](float x) {
    ++checked;
    if (!same(x) && differ++ == 0) first_bad = x;
  };
  for (uint32_t bits = 0x80000000u; bits <= 0xbf800000u; bits += 61) {  // -0 .. -1, every 61st
    float x;
    std::memcpy(&x, &bits, 4);
    check(x);
  }
  for (double x = -1.0; x > -100.0; x -= 1.37e-4) check(static_cast<float>(x));
  for (float x : {-0.0f, 0.0f, -87.33654f, -87.3365f, -87.336548f, -86.9f, -88.0f, -1e30f,
                  -INFINITY, NAN, -std::numeric_limits<float>::denorm_min()})
    check(x);
  EXPECT_EQ(differ, 0) << "first difference at x = " << first_bad << " of " << checked;
  EXPECT_GT(checked, 10000000);
}

// vexp_at_most_64 is vexp, bit for bit, on (0, 64] too (the fused head's exp(z - shift) with a
// shift trailing the max): every 61st float in (0, 1], a dense sweep to 64, and 64 itself.
TEST(VecMath, ExpUpTo64IsExpBitForBit) {
  int64_t checked = 0, differ = 0;
  float first_bad = 0;
  auto check = [&](float x) {
    const float a = mg::vexp(x), b = mg::vexp_at_most_64(x);
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    ++checked;
    if (ua != ub && differ++ == 0) first_bad = x;
  };
  for (uint32_t bits = 1; bits <= 0x3f800000u; bits += 61) {
    float x;
    std::memcpy(&x, &bits, 4);
    check(x);
  }
  for (double x = 1.0; x <= 64.0; x += 1.37e-4) check(static_cast<float>(x));
  for (float x : {-3.5f, 0.0f, 63.99f, 64.0f}) check(x);
  EXPECT_EQ(differ, 0) << "of " << checked << " inputs; first at x = " << first_bad;
  EXPECT_GT(mg::vexp_at_most_64(64.0f), 6.2e27f);
  EXPECT_LT(mg::vexp_at_most_64(64.0f), 6.3e27f);
}

#if defined(__AVX512F__)
// The AVX-512 form the head's exponential passes use (vscalefps for 2^n): the scalar form's bits
// wherever exp(x) is a normal float, the true exp below (subnormal, then 0) where the scalar form
// stays at FLT_MIN, 0 for -inf, NaN for NaN.
TEST(VecMath, Exp16IsExpAtMost64BitForBitOverTheNormalRange) {
  int64_t checked = 0, differ = 0;
  float first_bad = 0;
  float in[16], out[16];
  auto run = [&](int lanes) {
    _mm512_storeu_ps(out, mg::vexp16_at_most_64(_mm512_loadu_ps(in)));
    for (int l = 0; l < lanes; ++l) {
      const float want = mg::vexp_at_most_64(in[l]);
      ++checked;
      if (std::memcmp(&want, &out[l], 4) != 0 && differ++ == 0) first_bad = in[l];
    }
  };
  int filled = 0;
  auto check = [&](float x) {
    in[filled++] = x;
    if (filled == 16) run(16), filled = 0;
  };
  for (double x = -87.33; x <= 64.0; x += 3.1e-4) check(static_cast<float>(x));
  for (uint32_t bits = 1; bits <= 0x3f800000u; bits += 61) {  // tiny magnitudes, both signs
    float x;
    std::memcpy(&x, &bits, 4);
    check(x), check(-x);
  }
  for (float x : {-87.33f, -3.5f, -0.0f, 0.0f, 63.99f, 64.0f}) check(x);
  for (int l = filled; l < 16; ++l) in[l] = 0.0f;
  run(filled);
  EXPECT_EQ(differ, 0) << "of " << checked << " inputs; first at x = " << first_bad;
  EXPECT_GT(checked, 900000);

  const float below[16] = {-87.5f,  -90.0f, -95.0f,    -100.0f, -103.0f, -103.9f, -104.5f, -110.0f,
                           -200.0f, -1e30f, -INFINITY, NAN,     -88.0f,  -99.0f,  -102.0f, -150.0f};
  _mm512_storeu_ps(out, mg::vexp16_at_most_64(_mm512_loadu_ps(below)));
  for (int l = 0; l < 16; ++l) {
    const double x = below[l], want = std::exp(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(out[l]));
    } else if (want < 0.5 * std::numeric_limits<float>::denorm_min()) {
      EXPECT_EQ(out[l], 0.0f) << "x = " << x;
    } else {  // one rounding of a subnormal: within half its spacing, 2^-150
      EXPECT_NEAR(out[l], want, std::ldexp(1.0, -149) + 2e-7 * want) << "x = " << x;
      EXPECT_GT(out[l], 0.0f) << "x = " << x;
    }
  }
}
#endif

// select_float (math/scalar_math.h) is `c ? a : b` bit for bit, signed zeros and NaNs included;
// and the functions built on it keep a NaN a NaN (anomaly mode looks for them).
TEST(VecMath, SelectFloatIsTheConditionalAndNaNsPassThrough) {
  // Read through volatile, so that the compiler cannot fold the calls at compile time.
  volatile float values[] = {0.0f, -0.0f, 1.5f, -87.5f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f};
  for (float a : values)
    for (float b : values)
      for (bool c : {false, true}) {
        const float want = c ? a : b, got = mg::select_float(c, a, b);
        EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << c << " " << a << " " << b;
      }
  const float nan = values[6], low = values[3] * 100, high = -low;  // NaN, -8750, 8750
  EXPECT_TRUE(std::isnan(mg::vexp(nan)));
  EXPECT_TRUE(std::isnan(mg::vexp_nonpositive(nan)));
  EXPECT_TRUE(std::isnan(mg::vtanh(nan)));
  EXPECT_TRUE(std::isnan(mg::vsigmoid(nan)));
  EXPECT_TRUE(std::isnan(mg::vlog_sigmoid(nan)));
  EXPECT_EQ(mg::vexp(low), mg::vexp(-87.33654f));  // the clamp below
  EXPECT_EQ(mg::vexp(high), mg::vexp(88.72283f));  // and above
}

TEST(VecMath, TanhIsAccurateEverywhere) {
  // Relative error against double tanh, densely near 0 (where the two forms meet and where a naive
  // 1 − 2/(e^{2x}+1) loses digits) and out to where tanh is ±1 in float.
  double worst = 0, worst_at = 0;
  auto check = [&](double x) {
    const float f = static_cast<float>(x);
    const double ref = std::tanh(double{f});
    const double err =
        ref == 0 ? std::fabs(mg::vtanh(f)) : std::fabs(mg::vtanh(f) - ref) / std::fabs(ref);
    if (err > worst) worst = err, worst_at = f;
  };
  for (double x = 1e-30; x < 50; x *= 1.0007) check(x), check(-x);
  for (double x = 0.6; x < 0.65; x += 1e-6) check(x), check(-x);  // around the switch at 0.625
  EXPECT_LT(worst, 2.5e-7) << "worst at x = " << worst_at;
  EXPECT_EQ(mg::vtanh(0.0f), 0.0f);
  EXPECT_EQ(mg::vtanh(100.0f), 1.0f);
  EXPECT_EQ(mg::vtanh(-1e30f), -1.0f);
}

TEST(VecMath, RowMaxAndSumExpMatchScalarLoops) {
  std::vector<float> x(1003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * i) * 30);
  float m = -INFINITY;
  double s = 0;
  for (float v : x) m = std::max(m, v);
  for (float v : x) s += std::exp(double{v} - m);
  EXPECT_EQ(mg::row_max(x.data(), 1003), m);
  std::vector<float> out(1003);
  EXPECT_NEAR(mg::sum_exp<true>(x.data(), 1003, m, out.data()), s, 1e-6 * s);
  EXPECT_NEAR(out[500], std::exp(double{x[500]} - m), 1e-6);
}

// The head's row passes (tensor/row_logsumexp.h: an explicit vector path on AVX-512, the
// compiler's vectorization elsewhere) must give the bits of the plain 16-lane loop written here:
// lane l sums columns l, l+16, ...; the tail goes into the double total; the max skips a NaN.
TEST(VecMath, RowPassesGiveTheBitsOfThePlainSixteenLaneLoop) {
  for (int64_t n : {5, 16, 37, 768, 1003, -37, -768}) {  // negative: the same n with a NaN
    const bool with_nan = n < 0;
    n = std::abs(n);
    std::vector<float> z(n), b(n);
    for (int64_t j = 0; j < n; ++j)
      z[j] = static_cast<float>(std::sin(0.37 * j) * 30), b[j] = static_cast<float>(0.01 * (j % 7));
    if (with_nan)  // the row's max, then a NaN in the same lane: in each half of the 16 lanes
      z[3] = 60.0f, z[19] = NAN, z[10] = 61.0f, z[26] = NAN;
    const float shift = 25.0f;
    float m[16], acc[16];
    for (int l = 0; l < 16; ++l) m[l] = -INFINITY, acc[l] = 0.0f;
    std::vector<float> want_e(n);
    double want_sum = 0;
    float want_max = -INFINITY;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
      for (int l = 0; l < 16; ++l) {
        const float x = z[j + l] + b[j + l];
        m[l] = std::max(m[l], x);
        want_e[j + l] = mg::vexp_at_most_64(x - shift);
        acc[l] += want_e[j + l];
      }
    for (; j < n; ++j) {
      const float x = z[j] + b[j];
      want_max = x > want_max ? x : want_max;
      want_e[j] = mg::vexp_at_most_64(x - shift);
      want_sum += want_e[j];
    }
    for (int l = 0; l < 16; ++l) want_max = m[l] > want_max ? m[l] : want_max, want_sum += acc[l];

    std::vector<float> got = z;
    float got_max = 0;
    const double got_sum = mg::add_bias_exp_sum(got.data(), b.data(), n, shift, &got_max);
    auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
    EXPECT_TRUE(same(got_sum, want_sum)) << "n = " << n << ": " << got_sum << " vs " << want_sum;
    EXPECT_EQ(got_max, want_max) << "n = " << n;
    EXPECT_EQ(std::memcmp(got.data(), want_e.data(), 4 * n), 0) << "n = " << n;

    // sum_exp over z + b (the first slab's pass) gives the same exponentials and sum.
    std::vector<float> x(n), out(n);
    for (int64_t i = 0; i < n; ++i) x[i] = z[i] + b[i];
    const double sum = mg::sum_exp<true>(x.data(), n, shift, out.data());
    EXPECT_TRUE(same(sum, want_sum)) << "n = " << n << ": " << sum << " vs " << want_sum;
    EXPECT_EQ(std::memcmp(out.data(), want_e.data(), 4 * n), 0) << "n = " << n;
  }
}

// Sigsoftmax's slab pass (the fused head keeps exp(s - shift)(2 - σ(z)) for backward): s must be
// z + vlog_sigmoid(z) bit for bit (the loss is the same whichever pass computed it), and the slope
// 2 - σ(z) accurate on both sides of 0 out to where σ saturates or underflows, with no NaN or inf
// from a finite or infinite z. A ragged length covers the loop's tail.
TEST(VecMath, SigLogitsAndSlopesAreZPlusLogSigmoidAndTwoMinusSigmoid) {
  std::vector<float> z;
  for (double x = -100; x < 100; x += 0.0371) z.push_back(static_cast<float>(x));
  for (float x : {0.0f, -0.0f, 88.0f, -88.0f, 1e30f, -1e30f, INFINITY, -INFINITY}) z.push_back(x);
  const int64_t n = static_cast<int64_t>(z.size());
  std::vector<float> s(n), slope(n);
  mg::sig_logits_and_slopes(z.data(), n, s.data(), slope.data());
  double worst = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float x = z[j];
    if (std::isfinite(x)) {
      const float want_s = x + mg::vlog_sigmoid(x);
      EXPECT_EQ(std::memcmp(&s[j], &want_s, sizeof(float)), 0) << "s at z = " << x;
    }
    const double sigma = x >= 0 ? 1.0 / (1.0 + std::exp(-double{x}))
                                : std::exp(double{x}) / (1.0 + std::exp(double{x}));
    worst = std::max(worst, std::fabs(slope[j] - (2.0 - sigma)) / (2.0 - sigma));
    EXPECT_TRUE(std::isfinite(slope[j])) << "slope at z = " << x;
  }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_FLOAT_EQ(slope[n - 8], 1.5f);  // z = 0: σ = 1/2
  EXPECT_EQ(slope[n - 4], 1.0f);        // z = 1e30: σ = 1
  EXPECT_EQ(slope[n - 3], 2.0f);        // z = -1e30: σ = 0
}
