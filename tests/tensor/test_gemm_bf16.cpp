// The bf16 GEMM (--precision bf16, tensor/gemm_avx512_bf16.cpp) against the FP32 triple loop run
// on the same bf16-rounded inputs, for every transpose combination, edge sizes (1, odd, not a
// multiple of the 8 x 48 tile, odd k blocks), alpha/beta, strided operands and thread counts.
//
// Why the comparison is tight: a product of two bf16 numbers (8-bit significands) is exact in
// FP32, so the kernel computes exactly the products of the rounded inputs and differs from the
// reference (double accumulation) only by its FP32 additions: |error| <= gamma_K sum_k |â b̂| with
// gamma_K ~ K eps (Higham 3.1), the same bound as the FP32 GEMM test
// (tests/tensor/gemm_test_util.h). One more term: VDPBF16PS ignores MXCSR and flushes denormals.
// Inputs below 2^-126 are already zero after rounding (the conversion treats them as zero, as
// bf16_from_float does); a product below 2^-126 is flushed to zero, an error of less than 2^-126
// per product, so the bound gains K * 2^-126 * |alpha| (FlushesDenormalProducts shows it happen).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/bf16.h"
#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"

namespace {

using mg::GemmKernel;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kSentinel = 12345.0f;

bool have_bf16() {
  return mg::gemm_kernel_supported(GemmKernel::kAvx512Bf16);
}
#define SKIP_WITHOUT_BF16()                                                          \
  if (!have_bf16())                                                                  \
  GTEST_SKIP() << "this CPU has no AVX512_BF16: the bf16 GEMM cannot run here (and " \
                  "--precision bf16 is refused, see PrecisionSwitch)"

struct Case {
  bool ta = false, tb = false;
  int64_t M = 1, N = 1, K = 1;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;  // extra storage columns of A, B and C (NaN in A and B, sentinel in C)
  std::string str() const {
    return std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " M=" + std::to_string(M) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " pad=" + std::to_string(pad);
  }
};

struct Problem {
  Case c;
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C0;
  Problem(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
    const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
    lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
    A.assign(static_cast<size_t>(std::max<int64_t>(1, a_rows * lda)), kNaN);
    B.assign(static_cast<size_t>(std::max<int64_t>(1, b_rows * ldb)), kNaN);
    for (int64_t i = 0; i < a_rows; ++i)
      for (int64_t j = 0; j < a_cols; ++j) A[i * lda + j] = u(rng);
    for (int64_t i = 0; i < b_rows; ++i)
      for (int64_t j = 0; j < b_cols; ++j) B[i * ldb + j] = u(rng);
    C0.assign(static_cast<size_t>(std::max<int64_t>(1, c.M * ldc)), kSentinel);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) C0[i * ldc + j] = u(rng);
  }
  std::vector<float> bf16() const {
    std::vector<float> C = C0;
    EXPECT_TRUE(mg::gemm_with_kernel(GemmKernel::kAvx512Bf16, c.ta, c.tb, c.M, c.N, c.K, c.alpha,
                                     A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc));
    return C;
  }
};

std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = std::isnan(x[i]) ? x[i] : mg::round_to_bf16(x[i]);
  return r;
}

// The reference on the rounded inputs, and the bound derived above, element by element; C's
// padding must be untouched.
void expect_matches_rounded_reference(const Problem& p, const std::vector<float>& got) {
  const Case& c = p.c;
  const std::vector<float> Ar = rounded(p.A), Br = rounded(p.B);
  std::vector<float> want = p.C0;
  mg::gemm_reference(c.ta, c.tb, c.M, c.N, c.K, c.alpha, Ar.data(), p.lda, Br.data(), p.ldb, c.beta,
                     want.data(), p.ldc);
  int failures = 0;
  for (int64_t i = 0; i < c.M && failures < 5; ++i)
    for (int64_t j = 0; j < c.N && failures < 5; ++j) {
      double abs_sum = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const float a = c.ta ? Ar[k * p.lda + i] : Ar[i * p.lda + k];
        const float b = c.tb ? Br[j * p.ldb + k] : Br[k * p.ldb + j];
        abs_sum += std::fabs(static_cast<double>(a) * b);
      }
      const double c0 = c.beta == 0 ? 0.0 : std::fabs(c.beta * p.C0[i * p.ldc + j]);
      const double tol = (c.K + 4) * FLT_EPSILON * (std::fabs(c.alpha) * abs_sum + c0) +
                         c.K * std::ldexp(1.0, -126) * std::fabs(c.alpha) + 1e-30;
      const float g = got[i * p.ldc + j], w = want[i * p.ldc + j];
      if (!(std::fabs(static_cast<double>(g) - w) <= tol)) {
        ADD_FAILURE() << c.str() << ": C[" << i << "," << j << "] = " << g
                      << ", FP32 reference on bf16-rounded inputs " << w << ", tolerance " << tol;
        ++failures;
      }
    }
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < p.ldc; ++j)
      if (got[i * p.ldc + j] != kSentinel) {
        ADD_FAILURE() << c.str() << ": wrote C padding at [" << i << "," << j << "]";
        return;
      }
}

void check(const Case& c, uint32_t seed) {
  const Problem p(c, seed);
  expect_matches_rounded_reference(p, p.bf16());
}

TEST(GemmBf16, RoundingMatchesTheHardwareConversion) {
  SKIP_WITHOUT_BF16();
  // C[0, j] = 1 * x_j with K = 1: the product of two bf16 is exact, so C shows the hardware's
  // rounding of x_j bit for bit, to compare with the scalar mirror in tensor/bf16.h.
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           1.00390625f /* tie: even is 1 */,
                           1.01171875f /* tie: even is 1.015625 */,
                           1.0019531f,
                           -3.14159265f,
                           1e-39f /* denormal: zero */,
                           -1e-39f,
                           1e-45f,
                           FLT_MIN,
                           3.4e38f /* Inf */,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000; ++i) {
    const uint32_t b = bits(rng);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (!std::isnan(x)) xs.push_back(x);
  }
  const float one = 1.0f;
  std::vector<float> C(xs.size(), kSentinel);
  ASSERT_TRUE(mg::gemm_with_kernel(
      GemmKernel::kAvx512Bf16, false, false, 1, static_cast<int64_t>(xs.size()), 1, 1.0f, &one, 1,
      xs.data(), static_cast<int64_t>(xs.size()), 0.0f, C.data(), static_cast<int64_t>(xs.size())));
  for (size_t j = 0; j < xs.size(); ++j) {
    // + 0.0f: the accumulator starts at +0, and +0 + -0 = +0, so a -0 input comes out as +0.
    const float want = mg::round_to_bf16(xs[j]) + 0.0f;
    EXPECT_EQ(0, std::memcmp(&C[j], &want, sizeof want))
        << "x = " << xs[j] << ": hardware " << C[j] << ", bf16_from_float " << want;
  }
  float nan_in = kNaN, nan_out = 0;
  mg::gemm_with_kernel(GemmKernel::kAvx512Bf16, false, false, 1, 1, 1, 1.0f, &one, 1, &nan_in, 1,
                       0.0f, &nan_out, 1);
  EXPECT_TRUE(std::isnan(nan_out));
  EXPECT_TRUE(std::isnan(mg::round_to_bf16(kNaN)));
}

TEST(GemmBf16, FlushesDenormalProducts) {
  SKIP_WITHOUT_BF16();
  // 2^-70 * 2^-70 = 2^-140: representable as an FP32 denormal, but VDPBF16PS flushes it to zero.
  // This is the K * 2^-126 term of the tolerance, seen happening.
  const float a = std::ldexp(1.0f, -70), b = std::ldexp(1.0f, -70);
  float c = kSentinel;
  ASSERT_TRUE(mg::gemm_with_kernel(GemmKernel::kAvx512Bf16, false, false, 1, 1, 1, 1.0f, &a, 1, &b,
                                   1, 0.0f, &c, 1));
  EXPECT_EQ(c, 0.0f) << "a denormal product was not flushed: the tolerance's derivation is wrong";
}

TEST(GemmBf16, AllTransposesEdgeSizes) {
  SKIP_WITHOUT_BF16();
  const int64_t sizes[] = {1, 2, 7, 8, 9, 17, 33, 49};
  uint32_t seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{17}, int64_t{33}}) {
            Case c;
            c.ta = ta, c.tb = tb, c.M = M, c.N = N, c.K = K;
            check(c, seed++);
          }
}

TEST(GemmBf16, LargerSizesOddKBlocksAlphaBetaStrides) {
  SKIP_WITHOUT_BF16();
  uint32_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case c;
      c.ta = ta, c.tb = tb;
      c.M = 257, c.N = 65, c.K = 257;  // ragged tiles, an odd K
      check(c, seed++);
      c.M = 33, c.N = 97, c.K = 1100;  // three k blocks of 367, 367, 366: odd blocks padded
      check(c, seed++);
      c.M = 300, c.N = 700, c.K = 45, c.alpha = -0.5f, c.beta = 0.3f, c.pad = 3;  // the nc panel
      check(c, seed++);
      c.M = 20, c.N = 1600, c.K = 400, c.alpha = 2.0f, c.beta = 1.0f, c.pad = 0;  // LSTM step
      check(c, seed++);
    }
}

TEST(GemmBf16, BetaZeroOverwritesNaN) {
  SKIP_WITHOUT_BF16();
  Case c;
  c.M = 21, c.N = 50, c.K = 31, c.pad = 2;
  Problem p(c, 400);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) p.C0[i * p.ldc + j] = kNaN;
  expect_matches_rounded_reference(p, p.bf16());
}

TEST(GemmBf16, BitwiseIndependentOfThreadCount) {
  SKIP_WITHOUT_BF16();
  const int saved = mg::num_threads();
  uint32_t seed = 700;
  for (const Case& shape : {Case{false, false, 20, 1600, 400}, Case{false, true, 300, 500, 701},
                            Case{true, false, 133, 97, 450}, Case{true, true, 61, 333, 129}}) {
    const Problem p(shape, seed++);
    mg::set_num_threads(1);
    const std::vector<float> one = p.bf16();
    mg::set_num_threads(2);
    const std::vector<float> two = p.bf16();
    mg::set_num_threads(3);
    const std::vector<float> three = p.bf16();
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << shape.str();
    EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float))) << shape.str();
  }
  mg::set_num_threads(saved);
}

// Narrow products (N <= 256, A not transposed) pack A one 8-row micro-panel at a time, right
// before its use, and run it against the whole B panel (macro_a_direct); the same A stored
// transposed is packed as a block. Both round the same values to the same pairs and run the same
// VDPBF16PS chains, so the results must be bitwise equal. Shapes cross the A blocks (mc = 512
// rows per thread), the kc blocks (an odd one), the 8-row and 48-column tiles, B stored either
// way, and A has NaN padding columns that a read past its rows would pick up.
TEST(GemmBf16, AMicroPanelsPackedOnTheFlyGiveTheBlockBits) {
  SKIP_WITHOUT_BF16();
  const int saved = mg::num_threads();
  struct S {
    bool tb;
    int64_t M, N, K, pad;
    float beta;
  };
  const S shapes[] = {{false, 700, 200, 1100, 3, 0.0f}, {false, 1301, 77, 600, 0, 1.0f},
                      {true, 517, 256, 513, 5, 0.5f},   {false, 600, 5, 41, 1, 0.0f},
                      {true, 263, 49, 1030, 0, 1.0f},   {false, 9, 200, 37, 2, 0.0f}};
  uint32_t seed = 950;
  for (const S& s : shapes)
    for (int threads : {1, 2}) {
      mg::set_num_threads(threads);
      Case direct;
      direct.tb = s.tb, direct.M = s.M, direct.N = s.N, direct.K = s.K, direct.pad = s.pad;
      direct.alpha = 0.75f, direct.beta = s.beta;
      const Problem p(direct, seed++);
      Problem t = p;  // A^T stored [K, M]: op(A) is the same matrix, packed as a block
      t.c.ta = true;
      t.lda = s.M;
      t.A.assign(static_cast<size_t>(s.K * s.M), kNaN);
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t k = 0; k < s.K; ++k) t.A[k * s.M + i] = p.A[i * p.lda + k];
      const std::vector<float> a = p.bf16(), b = t.bf16();
      expect_matches_rounded_reference(p, a);
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
            << direct.str() << ", " << threads << " threads: element " << i << " is " << a[i]
            << " packed per micro-panel, " << b[i] << " packed as a block";
    }
  mg::set_num_threads(saved);
}

TEST(GemmBf16, PrecisionSwitch) {
  ASSERT_EQ(mg::gemm_precision(), mg::GemmPrecision::kFp32) << "FP32 must be the default";
  if (!have_bf16()) {
    EXPECT_EQ(mg::gemm_bf16_kernel_name(), nullptr);
    EXPECT_THROW(mg::set_gemm_precision(mg::GemmPrecision::kBf16), std::runtime_error);
    EXPECT_EQ(mg::gemm_precision(), mg::GemmPrecision::kFp32);
    GTEST_SKIP() << "no AVX512_BF16: checked that bf16 is refused, not run as FP32";
  }
  EXPECT_STREQ(mg::gemm_bf16_kernel_name(), "avx512_bf16");
  Case c;
  c.tb = true, c.M = 37, c.N = 41, c.K = 300;
  const Problem p(c, 900);
  std::vector<float> fp32 = p.C0, switched = p.C0;
  mg::gemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f, fp32.data(),
           p.ldc);
  {
    const mg::GemmPrecisionScope bf16(mg::GemmPrecision::kBf16);
    mg::gemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
             switched.data(), p.ldc);
  }
  EXPECT_EQ(mg::gemm_precision(), mg::GemmPrecision::kFp32) << "the scope must restore FP32";
  const std::vector<float> direct = p.bf16();
  EXPECT_EQ(0, std::memcmp(switched.data(), direct.data(), direct.size() * sizeof(float)))
      << "under kBf16, mg::gemm did not run the bf16 kernel";
  EXPECT_NE(0, std::memcmp(fp32.data(), direct.data(), direct.size() * sizeof(float)))
      << "FP32 and bf16 agree to the bit: this test cannot tell them apart";
}

}  // namespace
