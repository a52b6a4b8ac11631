// mg::gemm against the textbook triple loop (gemm_reference, float64 accumulation), for every
// kernel family the CPU can run, every transpose combination, edge sizes around the register tiles
// (8 x 48, 6 x 16, 4 x 8) and the cache blocks (kc = 512/256), strided operands, alpha/beta, and
// the thread-count independence the training loop relies on for reproducibility. The tiles' and
// the in-place paths' bits: tests/tensor/test_gemm_paths.cpp; the harness: gemm_test_util.h.
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
#include "tests/tensor/gemm_test_util.h"

namespace {

using namespace gemmtest;

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
