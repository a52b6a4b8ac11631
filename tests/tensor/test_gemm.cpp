// mg::gemm against the textbook triple loop (gemm_reference, float64 accumulation), for every
// kernel family the CPU can run, every transpose combination, edge sizes around the register tiles
// (8 x 48, 6 x 16, 4 x 8) and the cache blocks (kc = 512/256), strided operands, alpha/beta, and
// the thread-count independence the training loop relies on for reproducibility.
//
// Tolerance: with K products summed in float32, |error| <= gamma_K * sum_k |a_ik b_kj| where
// gamma_K ~ K * eps (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1); we allow
// (K + 4) eps times |alpha| sum |a b| + |beta c|, computed per element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"

namespace {

using mg::GemmKernel;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kSentinel = 12345.0f;  // C padding: must survive untouched

struct Case {
  bool ta = false, tb = false;
  int64_t M = 1, N = 1, K = 1;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // extra columns of storage: ld = cols + pad
  bool nan_c = false;                       // C starts as NaN (only meaningful with beta == 0)
  std::string str() const {
    return std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " M=" + std::to_string(M) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " pads=" + std::to_string(pad_a) + "," + std::to_string(pad_b) + "," +
           std::to_string(pad_c);
  }
};

// A stored matrix: rows x cols with leading dimension ld; the padding columns hold NaN so that a
// kernel reading past its operand poisons the result.
struct Stored {
  int64_t rows = 0, cols = 0, ld = 0;
  std::vector<float> v;
  Stored() = default;
  Stored(int64_t r, int64_t c, int64_t pad, std::mt19937& rng) : rows(r), cols(c), ld(c + pad) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    v.assign(static_cast<size_t>(std::max<int64_t>(1, rows * ld)), kNaN);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) v[i * ld + j] = u(rng);
  }
};

struct Problem {
  Stored A, B;
  std::vector<float> C0;  // initial C (with sentinel padding)
  int64_t ldc;
  Problem(const Case& c, uint32_t seed) : ldc(c.N + c.pad_c) {
    std::mt19937 rng(seed);
    A = Stored(c.ta ? c.K : c.M, c.ta ? c.M : c.K, c.pad_a, rng);
    B = Stored(c.tb ? c.N : c.K, c.tb ? c.K : c.N, c.pad_b, rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    C0.assign(static_cast<size_t>(std::max<int64_t>(1, c.M * ldc)), kSentinel);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) C0[i * ldc + j] = c.nan_c ? kNaN : u(rng);
  }
  std::vector<float> compute(GemmKernel kind, const Case& c) const {
    std::vector<float> C = C0;
    EXPECT_TRUE(mg::gemm_with_kernel(kind, c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.v.data(), A.ld,
                                     B.v.data(), B.ld, c.beta, C.data(), ldc));
    return C;
  }
};

// Checks `got` against the float64 reference, element by element with the bound above, and that
// the padding of C is untouched.
void expect_matches_reference(const Problem& r, const Case& c, const std::vector<float>& got,
                              const std::string& what) {
  std::vector<float> want = r.C0;
  mg::gemm_reference(c.ta, c.tb, c.M, c.N, c.K, c.alpha, r.A.v.data(), r.A.ld, r.B.v.data(), r.B.ld,
                     c.beta, want.data(), r.ldc);
  int failures = 0;
  for (int64_t i = 0; i < c.M && failures < 5; ++i)
    for (int64_t j = 0; j < c.N && failures < 5; ++j) {
      double abs_sum = 0;  // sum_k |a_ik b_kj|
      for (int64_t k = 0; k < c.K; ++k) {
        const float a = c.ta ? r.A.v[k * r.A.ld + i] : r.A.v[i * r.A.ld + k];
        const float b = c.tb ? r.B.v[j * r.B.ld + k] : r.B.v[k * r.B.ld + j];
        abs_sum += std::fabs(static_cast<double>(a) * b);
      }
      const double c0 = c.beta == 0 ? 0.0 : std::fabs(c.beta * r.C0[i * r.ldc + j]);
      const double tol = (c.K + 4) * FLT_EPSILON * (std::fabs(c.alpha) * abs_sum + c0) + 1e-30;
      const float g = got[i * r.ldc + j], w = want[i * r.ldc + j];
      if (!(std::fabs(static_cast<double>(g) - w) <= tol)) {
        ADD_FAILURE() << what << " " << c.str() << ": C[" << i << "," << j << "] = " << g
                      << ", reference " << w << ", tolerance " << tol;
        ++failures;
      }
    }
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < r.ldc; ++j)
      if (got[i * r.ldc + j] != kSentinel) {
        ADD_FAILURE() << what << " " << c.str() << ": wrote C padding at [" << i << "," << j << "]";
        return;
      }
}

// Restores the thread count and the B-in-place mode when a test ends, also through an ASSERT.
struct GemmSettingsGuard {
  const int threads = mg::num_threads();
  const mg::BInPlace mode = mg::set_b_in_place(mg::BInPlace::kAuto);
  ~GemmSettingsGuard() {
    mg::set_b_in_place(mode);
    mg::set_num_threads(threads);
  }
};

std::vector<GemmKernel> kernels() {
  std::vector<GemmKernel> out;
  for (GemmKernel k : {GemmKernel::kScalar, GemmKernel::kAvx2, GemmKernel::kAvx512})
    if (mg::gemm_kernel_supported(k)) out.push_back(k);
  return out;
}

void check_all_kernels(const Case& c, uint32_t seed) {
  const Problem r(c, seed);
  for (GemmKernel k : kernels())
    expect_matches_reference(r, c, r.compute(k, c), mg::gemm_kernel_name(k));
}

// The problem r of case c (A not transposed) with the same op(A) stored transposed, [K, M]: the
// GEMM then always packs A, where r's A may be read in place. *packed: the case to run it with.
Problem with_a_transposed(const Problem& r, const Case& c, Case* packed) {
  Problem rt = r;
  std::mt19937 unused(1);
  rt.A = Stored(c.K, c.M, 0, unused);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t kk = 0; kk < c.K; ++kk) rt.A.v[kk * c.M + i] = r.A.v[i * r.A.ld + kk];
  *packed = c;
  packed->ta = true, packed->pad_a = 0;
  return rt;
}

TEST(Gemm, AllTransposesOddSizes) {
  const int64_t sizes[] = {1, 2, 7, 8, 9, 17, 33, 49};
  uint32_t seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : {int64_t{1}, int64_t{7}, int64_t{33}}) {
            Case c;
            c.ta = ta, c.tb = tb, c.M = M, c.N = N, c.K = K;
            check_all_kernels(c, seed++);
          }
}

TEST(Gemm, LargerOddSizesAndKBlocks) {
  // 257 crosses the AVX2 kc block (256) and the mc/nr tiles with ragged edges; K = 1100 gives
  // several kc blocks (C accumulates across them with beta = 1 after the first).
  uint32_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case c;
      c.ta = ta, c.tb = tb, c.M = 257, c.N = 65, c.K = 257;
      check_all_kernels(c, seed++);
      c.M = 33, c.N = 97, c.K = 1100;
      check_all_kernels(c, seed++);
      c.M = 130, c.N = 300, c.K = 20;
      check_all_kernels(c, seed++);
    }
}

// A tile whose last vector holds at most 8 columns (N mod 16 in 1..8) sums those columns over
// pairs of k, even and odd k in two lanes (gemm_avx512.cpp, micro_pair), after one, two or three
// vectors (N mod 48 = 8, 24, 40), with A read in place or packed (ta), for kc even and odd and
// across kc blocks, every row count of the last 8-row tile, alpha/beta and a NaN C under beta 0.
// The two A paths and 1, 2 or 3 threads give the same bits.
TEST(Gemm, NarrowLastVectorSumsPairsOfK) {
  const int saved = mg::num_threads();
  uint32_t seed = 1500;
  for (int64_t N : {int64_t{3}, int64_t{8}, int64_t{24}, int64_t{40}, int64_t{200}, int64_t{1000}})
    for (int64_t K : {int64_t{2}, int64_t{6}, int64_t{512}, int64_t{1030}, int64_t{1031}})
      for (int64_t M : {int64_t{5}, int64_t{8}, int64_t{20}, int64_t{63}}) {
        Case c;
        c.M = M, c.N = N, c.K = K, c.alpha = 0.75f;
        c.beta = (seed % 3 == 0) ? 0.0f : 0.5f;
        c.nan_c = c.beta == 0.0f;
        c.pad_a = seed % 2;
        const Problem r(c, seed++);
        Case packed;
        const Problem rt = with_a_transposed(r, c, &packed);  // always packed
        for (GemmKernel k : kernels()) {
          mg::set_num_threads(1);
          const std::vector<float> one = r.compute(k, c);
          expect_matches_reference(r, c, one, mg::gemm_kernel_name(k));
          for (int threads : {1, 2, 3}) {
            mg::set_num_threads(threads);
            const std::vector<float> direct = r.compute(k, c), by_packed = rt.compute(k, packed);
            for (size_t i = 0; i < one.size(); ++i) {
              ASSERT_EQ(std::memcmp(&one[i], &direct[i], sizeof(float)), 0)
                  << mg::gemm_kernel_name(k) << " " << c.str() << ", " << threads
                  << " threads: element " << i;
              ASSERT_EQ(std::memcmp(&one[i], &by_packed[i], sizeof(float)), 0)
                  << mg::gemm_kernel_name(k) << " " << c.str() << ", " << threads
                  << " threads, A packed: element " << i;
            }
          }
        }
      }
  mg::set_num_threads(saved);
}

// When M is one more than a multiple of 8, the last 9 rows on a whole 48-column panel form one
// 9-row tile (gemm_avx512.cpp, kMicro9; the head's [d W^T; d b] has M = E+1 = 201). Their bits
// must be those of 8-row tiles: the same product with 7 more rows of A. With A read in place
// (N <= 512) and packed (ta, or N > 512), B packed and read in place (a single A block with B
// row-major; both modes of mg::set_b_in_place), whole panels and a ragged last one, kc blocks,
// beta 0 and 0.5, 1 and 2 threads; and M = 1, whose lone row stays a 1-row tile.
TEST(Gemm, NineRowLastTileGivesTheEightRowTileBits) {
  const GemmSettingsGuard restore;
  struct S {
    int64_t M, N, K;
    bool ta, tb;
    float beta;
  };
  const S shapes[] = {{201, 10000, 70, true, false, 0.0f}, {201, 1000, 600, false, false, 0.5f},
                      {9, 300, 37, false, false, 0.0f},    {9, 300, 37, true, true, 0.5f},
                      {17, 151, 40, false, false, 0.5f},   {33, 2000, 515, false, false, 0.0f},
                      {265, 97, 1030, false, true, 0.0f},  {9, 96, 3, true, false, 0.5f},
                      {1, 500, 1030, false, true, 0.0f},   {1, 96, 3, true, false, 0.5f}};
  uint32_t seed = 1700;
  for (mg::BInPlace mode : {mg::BInPlace::kAlways, mg::BInPlace::kNever})
    for (GemmKernel k : kernels())
      for (const S& s : shapes)
        for (int threads : {1, 2}) {
          mg::set_b_in_place(mode);
          mg::set_num_threads(threads);
          Case c;
          c.M = s.M, c.N = s.N, c.K = s.K, c.ta = s.ta, c.tb = s.tb, c.beta = s.beta,
          c.alpha = 0.75f;
          const Problem r(c, seed++);
          const std::vector<float> got = r.compute(k, c);
          if (mode == mg::BInPlace::kAlways)
            expect_matches_reference(r, c, got, mg::gemm_kernel_name(k));
          Case big = c;  // 7 more rows: every tile has 8 rows
          big.M = c.M + 7;
          Problem rb(big, seed);
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t kk = 0; kk < c.K; ++kk) {
              const float a = c.ta ? r.A.v[kk * r.A.ld + i] : r.A.v[i * r.A.ld + kk];
              (c.ta ? rb.A.v[kk * rb.A.ld + i] : rb.A.v[i * rb.A.ld + kk]) = a;
            }
          rb.B = r.B;
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < c.N; ++j) rb.C0[i * rb.ldc + j] = r.C0[i * r.ldc + j];
          const std::vector<float> eights = rb.compute(k, big);
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < c.N; ++j) {
              const float a = got[i * r.ldc + j], b = eights[i * rb.ldc + j];
              ASSERT_EQ(std::memcmp(&a, &b, sizeof(float)), 0)
                  << mg::gemm_kernel_name(k) << " " << c.str() << ", " << threads << " threads: C["
                  << i << "," << j << "] = " << a << ", " << b << " in 8-row tiles";
            }
        }
}

TEST(Gemm, AlphaBeta) {
  uint32_t seed = 200;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float alpha : {1.0f, -0.5f, 2.0f})
        for (float beta : {0.0f, 1.0f, 0.3f, -2.0f}) {
          Case c;
          c.ta = ta, c.tb = tb, c.M = 19, c.N = 53, c.K = 45, c.alpha = alpha, c.beta = beta;
          check_all_kernels(c, seed++);
        }
}

TEST(Gemm, LeadingDimensionsLargerThanColumns) {
  uint32_t seed = 300;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case c;
      c.ta = ta, c.tb = tb, c.M = 37, c.N = 70, c.K = 29, c.beta = 0.5f;
      c.pad_a = 3, c.pad_b = 17, c.pad_c = 5;
      check_all_kernels(c, seed++);
      c.M = 150, c.N = 20, c.K = 300, c.pad_a = 1, c.pad_b = 64, c.pad_c = 13;
      check_all_kernels(c, seed++);
    }
}

TEST(Gemm, BetaZeroOverwritesNaN) {
  uint32_t seed = 400;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t K : {int64_t{0}, int64_t{5}, int64_t{300}}) {
        Case c;
        c.ta = ta, c.tb = tb, c.M = 21, c.N = 50, c.K = K, c.nan_c = true, c.pad_c = 2;
        check_all_kernels(c, seed++);  // any NaN left in C fails the comparison
      }
}

TEST(Gemm, KZeroAndAlphaZeroScaleC) {
  uint32_t seed = 500;
  for (GemmKernel k : kernels())
    for (float alpha : {1.0f, 0.0f})
      for (float beta : {0.0f, 1.0f, 0.25f}) {
        Case c;
        c.M = 9, c.N = 11, c.K = alpha == 0 ? 13 : 0, c.alpha = alpha, c.beta = beta, c.pad_c = 1;
        const Problem r(c, seed++);
        const std::vector<float> got = r.compute(k, c);
        for (int64_t i = 0; i < c.M; ++i)
          for (int64_t j = 0; j < c.N; ++j)
            ASSERT_EQ(got[i * r.ldc + j], beta == 0 ? 0.0f : beta * r.C0[i * r.ldc + j])
                << mg::gemm_kernel_name(k) << " " << c.str();
      }
}

TEST(Gemm, EmptyMatricesAreNoOps) {
  float c = 7.0f;
  const float a = 1.0f;
  mg::gemm(false, false, 0, 1, 1, 1.0f, &a, 1, &a, 1, 0.0f, &c, 1);
  mg::gemm(false, false, 1, 0, 1, 1.0f, &a, 1, &a, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 7.0f);
}

// The model's shapes, scaled down in N, through the default (fastest) kernel.
TEST(Gemm, ModelShapes) {
  struct S {
    bool ta, tb;
    int64_t M, N, K;
  };
  const S shapes[] = {{false, false, 20, 1600, 400},  // LSTM step: batch x 4H
                      {false, false, 70, 1000, 200},  // output projection
                      {false, true, 70, 1000, 200},   // its input gradient
                      {true, false, 200, 300, 700}};  // weight gradient: A^T B
  uint32_t seed = 600;
  for (const S& s : shapes) {
    Case c;
    c.ta = s.ta, c.tb = s.tb, c.M = s.M, c.N = s.N, c.K = s.K;
    const Problem r(c, seed++);
    expect_matches_reference(r, c, r.compute(GemmKernel::kAuto, c), "auto");
  }
}

// Every C element is summed in the same order whatever the number of threads: results must be
// identical to the bit with 1 and 2 threads, for the row split (large M) and the column split (the
// small-M LSTM step), with several kc blocks.
TEST(Gemm, BitwiseIndependentOfThreadCount) {
  const int saved = mg::num_threads();
  struct S {
    bool ta, tb;
    int64_t M, N, K;
    float beta;
  };
  const S shapes[] = {{false, false, 20, 1600, 400, 0.0f},
                      {false, true, 300, 500, 700, 1.0f},
                      {true, false, 133, 97, 450, 0.5f},
                      {true, true, 61, 333, 129, 0.0f}};
  uint32_t seed = 700;
  for (GemmKernel k : kernels())
    for (const S& s : shapes) {
      Case c;
      c.ta = s.ta, c.tb = s.tb, c.M = s.M, c.N = s.N, c.K = s.K, c.beta = s.beta;
      const Problem r(c, seed++);
      mg::set_num_threads(1);
      const std::vector<float> one = r.compute(k, c);
      mg::set_num_threads(2);
      const std::vector<float> two = r.compute(k, c);
      mg::set_num_threads(3);  // an odd split too (oversubscribed on 2 cores, still correct)
      const std::vector<float> three = r.compute(k, c);
      for (size_t i = 0; i < one.size(); ++i) {
        ASSERT_EQ(std::memcmp(&one[i], &two[i], sizeof(float)), 0)
            << mg::gemm_kernel_name(k) << " " << c.str() << " element " << i;
        ASSERT_EQ(std::memcmp(&one[i], &three[i], sizeof(float)), 0)
            << mg::gemm_kernel_name(k) << " " << c.str() << " element " << i;
      }
    }
  mg::set_num_threads(saved);
}

// Narrow products (N <= 512, A not transposed) read A in place instead of packing it (run_block's
// direct_a; the head's d ctx = dz W). The same A stored transposed is always packed, so the two
// calls run the same fma chains on the same values: their results must be bitwise equal. Shapes
// cross the A blocks (mc = 256 rows per thread; AVX2 168), the kc blocks, the register tiles
// (8 x 48; AVX2 6 x 16), and A has NaN padding columns that an in-place read past its rows would
// pick up. With B stored transposed, a single A block (at most mc rows per thread) is read in
// place too; with B row-major, where mg::b_read_in_place (AMD CPUs) reads B in place instead, A is
// packed there.
TEST(Gemm, AReadInPlaceGivesThePackedBits) {
  const GemmSettingsGuard restore;
  struct S {
    int64_t M, N, K, pad_a;
    float beta;
    bool tb;
  };
  const S shapes[] = {{700, 200, 1100, 3, 0.0f, false}, {1301, 77, 600, 0, 1.0f, false},
                      {517, 512, 513, 5, 0.5f, false},  {600, 5, 40, 1, 0.0f, false},
                      {263, 49, 1030, 0, 1.0f, false},  {263, 49, 1030, 0, 1.0f, true},
                      {130, 200, 600, 2, 0.0f, true},   {9, 300, 37, 1, 0.5f, true}};
  uint32_t seed = 900;
  for (GemmKernel k : kernels())
    for (const S& s : shapes)
      for (int threads : {1, 2}) {
        mg::set_num_threads(threads);
        Case direct;
        direct.M = s.M, direct.N = s.N, direct.K = s.K, direct.pad_a = s.pad_a,
        direct.beta = s.beta, direct.alpha = 0.75f, direct.tb = s.tb;
        const Problem r(direct, seed++);
        Case packed;
        const Problem rt = with_a_transposed(r, direct, &packed);  // op(A) stored [K, M]
        const std::vector<float> a = r.compute(k, direct), b = rt.compute(k, packed);
        expect_matches_reference(r, direct, a, mg::gemm_kernel_name(k));
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
              << mg::gemm_kernel_name(k) << " " << direct.str() << ", " << threads
              << " threads: element " << i << " is " << a[i] << " read in place, " << b[i]
              << " packed";
      }
}

// A single A block (at most mc rows per thread) with B row-major reads B in place on AMD CPUs and
// packs it elsewhere (mg::b_read_in_place): the same products in the same order, so the two must
// give the same bits, whichever CPU runs the test. Shapes cross the register tiles (whole 48-column
// panels, a ragged last one, one of at most 8 columns: micro_pair), a 9-row last tile, the kc
// blocks, narrow products (N <= 512, where packing B means reading A in place) and B with NaN
// padding columns; beta 0 and 0.5; 1 and 2 threads.
TEST(Gemm, BReadInPlaceGivesThePackedBits) {
  const GemmSettingsGuard restore;
  struct S {
    int64_t M, N, K, pad_b;
    bool ta;
    float beta;
  };
  const S shapes[] = {{20, 1600, 400, 3, false, 0.0f},  {201, 1000, 600, 0, true, 0.5f},
                      {9, 300, 37, 1, false, 0.5f},     {256, 1000, 530, 0, false, 0.0f},
                      {130, 200, 1030, 2, false, 0.0f}, {65, 1000, 70, 0, true, 0.0f},
                      {12, 3848, 96, 5, false, 0.5f},   {1, 500, 1030, 0, false, 0.0f}};
  uint32_t seed = 2100;
  for (GemmKernel k : kernels())
    for (const S& s : shapes)
      for (int threads : {1, 2}) {
        mg::set_num_threads(threads);
        Case c;
        c.M = s.M, c.N = s.N, c.K = s.K, c.pad_b = s.pad_b, c.ta = s.ta, c.beta = s.beta;
        c.alpha = 0.75f;
        const Problem r(c, seed++);
        mg::set_b_in_place(mg::BInPlace::kAlways);
        ASSERT_TRUE(mg::b_read_in_place());
        const std::vector<float> in_place = r.compute(k, c);
        mg::set_b_in_place(mg::BInPlace::kNever);
        ASSERT_FALSE(mg::b_read_in_place());
        const std::vector<float> packed = r.compute(k, c);
        if (threads == 1) expect_matches_reference(r, c, packed, mg::gemm_kernel_name(k));
        for (size_t i = 0; i < in_place.size(); ++i)
          ASSERT_EQ(std::memcmp(&in_place[i], &packed[i], sizeof(float)), 0)
              << mg::gemm_kernel_name(k) << " " << c.str() << ", " << threads
              << " threads: element " << i << " is " << in_place[i] << " read in place, "
              << packed[i] << " packed";
      }
}

// Callers may run products from their own parallel loops (one per sequence, say): gemm then runs
// single-threaded in each, with per-thread scratch buffers, and gives the same bits as alone.
TEST(Gemm, ConcurrentCallsFromAParallelRegion) {
  const int saved = mg::num_threads();
  mg::set_num_threads(2);
  std::vector<Case> cases(4);
  std::vector<Problem> problems;
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    c.ta = i & 1, c.tb = i & 2, c.M = 150 + 10 * i, c.N = 90 + 7 * i, c.K = 300;
    problems.emplace_back(c, 900 + i);
  }
  std::vector<std::vector<float>> alone, together(cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    alone.push_back(problems[i].compute(GemmKernel::kAuto, cases[i]));
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1)
#endif
  for (int i = 0; i < static_cast<int>(cases.size()); ++i)
    together[i] = problems[i].compute(GemmKernel::kAuto, cases[i]);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(std::memcmp(alone[i].data(), together[i].data(), alone[i].size() * sizeof(float)), 0)
        << cases[i].str();
  mg::set_num_threads(saved);
}

// Each kernel family the CPU supports, forced, against the others: they must all agree with the
// reference (checked above) and hence with each other within twice the bound. Also documents
// which families this machine exercised.
TEST(Gemm, ForcedKernelsAgree) {
  const std::vector<GemmKernel> ks = kernels();
  std::string names;
  for (GemmKernel k : ks) names += std::string(" ") + mg::gemm_kernel_name(k);
  std::cout << "[          ] kernels on this CPU:" << names
            << " (default: " << mg::gemm_kernel_name(mg::gemm_default_kernel()) << ")\n";
  EXPECT_TRUE(mg::gemm_kernel_supported(GemmKernel::kScalar));
  EXPECT_TRUE(mg::gemm_kernel_supported(mg::gemm_default_kernel()));
  uint32_t seed = 800;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case c;
      c.ta = ta, c.tb = tb, c.M = 100, c.N = 130, c.K = 210, c.alpha = 0.75f, c.beta = 0.5f;
      const Problem r(c, seed++);
      std::vector<std::vector<float>> outs;
      for (GemmKernel k : ks) outs.push_back(r.compute(k, c));
      for (size_t a = 1; a < outs.size(); ++a)
        for (size_t i = 0; i < outs[0].size(); ++i) {
          const float x = outs[0][i], y = outs[a][i];
          ASSERT_NEAR(x, y, 2 * (c.K + 4) * FLT_EPSILON * (c.K * 1.0 + 1.0))
              << mg::gemm_kernel_name(ks[0]) << " vs " << mg::gemm_kernel_name(ks[a]) << " "
              << c.str() << " element " << i;
        }
    }
  // An unsupported family is refused without touching C.
  for (GemmKernel k : {GemmKernel::kAvx2, GemmKernel::kAvx512})
    if (!mg::gemm_kernel_supported(k)) {
      float c = 3.0f, a = 1.0f;
      EXPECT_FALSE(mg::gemm_with_kernel(k, false, false, 1, 1, 1, 1.0f, &a, 1, &a, 1, 0.0f, &c, 1));
      EXPECT_EQ(c, 3.0f);
    }
}

TEST(Gemm, ThePathSwitchRunsTheReferenceAndRestoresTheFastOne) {
  // `--gemm reference` must really run the triple loop: with the switch set, mg::gemm gives its
  // bits, which differ from the fast path's here (float against double accumulation over K = 300).
  Case c;
  c.tb = true, c.M = 37, c.N = 41, c.K = 300, c.alpha = 1.0f, c.beta = 0.0f;
  const Problem r(c, 900);
  std::vector<float> want = r.C0, fast = r.C0, switched = r.C0;
  mg::gemm_reference(c.ta, c.tb, c.M, c.N, c.K, c.alpha, r.A.v.data(), r.A.ld, r.B.v.data(), r.B.ld,
                     c.beta, want.data(), r.ldc);
  ASSERT_EQ(mg::gemm_path(), mg::GemmPath::kFast) << "the fast GEMM must be the default";
  mg::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, r.A.v.data(), r.A.ld, r.B.v.data(), r.B.ld, c.beta,
           fast.data(), r.ldc);
  {
    const mg::GemmPathScope reference(mg::GemmPath::kReference);
    mg::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, r.A.v.data(), r.A.ld, r.B.v.data(), r.B.ld, c.beta,
             switched.data(), r.ldc);
  }
  EXPECT_EQ(mg::gemm_path(), mg::GemmPath::kFast) << "the scope must restore the previous path";
  EXPECT_EQ(0, std::memcmp(switched.data(), want.data(), want.size() * sizeof(float)))
      << "with the reference path set, mg::gemm did not give gemm_reference's bits";
  EXPECT_NE(0, std::memcmp(fast.data(), want.data(), want.size() * sizeof(float)))
      << "the fast and reference GEMMs agree bit for bit here, so this test cannot tell them apart";
}

}  // namespace
