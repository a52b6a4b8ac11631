// The bits of mg::gemm's special paths against its plain ones: a last vector of at most 8 columns
// (pairs of k), a 9-row last tile, A read in place and B read in place, each against the same
// products computed the common way, for every kernel family the CPU can run.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "tensor/parallel.h"
#include "tests/tensor/gemm_test_util.h"

namespace {

using namespace gemmtest;

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
        const Reference ref(r, c);
        for (GemmKernel k : kernels()) {
          mg::set_num_threads(1);
          const std::vector<float> one = r.compute(k, c);
          expect_matches(ref, r, c, one, mg::gemm_kernel_name(k));
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
  for (const S& s : shapes) {
    Case c;
    c.M = s.M, c.N = s.N, c.K = s.K, c.ta = s.ta, c.tb = s.tb, c.beta = s.beta, c.alpha = 0.75f;
    const Problem r(c, seed++);
    const Reference ref(r, c);
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
    for (mg::BInPlace mode : {mg::BInPlace::kAlways, mg::BInPlace::kNever})
      for (GemmKernel k : kernels())
        for (int threads : {1, 2}) {
          mg::set_b_in_place(mode);
          mg::set_num_threads(threads);
          const std::vector<float> got = r.compute(k, c);
          if (mode == mg::BInPlace::kAlways)
            expect_matches(ref, r, c, got, mg::gemm_kernel_name(k));
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
  for (const S& s : shapes) {
    Case direct;
    direct.M = s.M, direct.N = s.N, direct.K = s.K, direct.pad_a = s.pad_a, direct.beta = s.beta,
    direct.alpha = 0.75f, direct.tb = s.tb;
    const Problem r(direct, seed++);
    Case packed;
    const Problem rt = with_a_transposed(r, direct, &packed);  // op(A) stored [K, M]
    const Reference ref(r, direct);
    for (GemmKernel k : kernels())
      for (int threads : {1, 2}) {
        mg::set_num_threads(threads);
        const std::vector<float> a = r.compute(k, direct), b = rt.compute(k, packed);
        expect_matches(ref, r, direct, a, mg::gemm_kernel_name(k));
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
              << mg::gemm_kernel_name(k) << " " << direct.str() << ", " << threads
              << " threads: element " << i << " is " << a[i] << " read in place, " << b[i]
              << " packed";
      }
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
  for (const S& s : shapes) {
    Case c;
    c.M = s.M, c.N = s.N, c.K = s.K, c.pad_b = s.pad_b, c.ta = s.ta, c.beta = s.beta;
    c.alpha = 0.75f;
    const Problem r(c, seed++);
    const Reference ref(r, c);
    for (GemmKernel k : kernels())
      for (int threads : {1, 2}) {
        mg::set_num_threads(threads);
        mg::set_b_in_place(mg::BInPlace::kAlways);
        ASSERT_TRUE(mg::b_read_in_place());
        const std::vector<float> in_place = r.compute(k, c);
        mg::set_b_in_place(mg::BInPlace::kNever);
        ASSERT_FALSE(mg::b_read_in_place());
        const std::vector<float> packed = r.compute(k, c);
        if (threads == 1) expect_matches(ref, r, c, packed, mg::gemm_kernel_name(k));
        for (size_t i = 0; i < in_place.size(); ++i)
          ASSERT_EQ(std::memcmp(&in_place[i], &packed[i], sizeof(float)), 0)
              << mg::gemm_kernel_name(k) << " " << c.str() << ", " << threads
              << " threads: element " << i << " is " << in_place[i] << " read in place, "
              << packed[i] << " packed";
      }
  }
}

}  // namespace
