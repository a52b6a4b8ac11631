// The double products of the rank instrument (tensor/gemm_f64.h) against plain triple loops, for
// sizes around the 8 x 24 tile and the 256 x 96 block, and bitwise the same for any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/gemm_f64.h"
#include "tensor/parallel.h"

namespace {

std::vector<double> random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (double& v : m) v = g(rng);
  return m;
}

}  // namespace

TEST(GemmF64, PanelsProductMatchesTheTripleLoop) {
  for (int64_t M : {1, 7, 8, 9, 30, 257})
    for (int64_t N : {1, 8, 23, 24, 25, 100, 301})
      for (int64_t K : {1, 5, 64}) {
        const std::vector<double> A = random_matrix(M, K, 1), B = random_matrix(N, K, 2);
        std::vector<double> C(static_cast<size_t>(M * N), -1.0);
        mg::gemm_f64_panels(mg::pack_rows_f64(A.data(), K, M, K),
                            mg::pack_rows_f64(B.data(), K, N, K), C.data(), N);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double want = 0, scale = 0;
            for (int64_t k = 0; k < K; ++k)
              want += A[i * K + k] * B[j * K + k], scale += std::fabs(A[i * K + k] * B[j * K + k]);
            ASSERT_NEAR(C[i * N + j], want, 4 * K * 1.2e-16 * scale)
                << "M=" << M << " N=" << N << " K=" << K << " at " << i << "," << j;
          }
      }
}

TEST(GemmF64, SyrkLowerMatchesTheTripleLoopAndIgnoresThreads) {
  const int saved = mg::num_threads();
  for (int64_t n : {1, 9, 24, 31, 300})
    for (int64_t rows : {1, 3, 50}) {
      const std::vector<double> X = random_matrix(rows, n, 3);
      std::vector<std::vector<double>> out;
      for (int threads : {1, 2, 3}) {
        mg::set_num_threads(threads);
        std::vector<double> G(static_cast<size_t>(n * n), 0.5);  // accumulates into what is there
        mg::syrk_f64_lower(mg::pack_columns_f64(X.data(), n, rows, n), G.data(), n);
        out.push_back(G);
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          double want = 0.5, scale = 0.5;
          for (int64_t k = 0; k < rows; ++k)
            want += X[k * n + i] * X[k * n + j], scale += std::fabs(X[k * n + i] * X[k * n + j]);
          ASSERT_NEAR(out[0][i * n + j], want, 4 * rows * 1.2e-16 * scale)
              << "n=" << n << " rows=" << rows << " at " << i << "," << j;
        }
      EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(double)));
      EXPECT_EQ(0, std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(double)));
    }
  mg::set_num_threads(saved);
}

TEST(GemmF64, LanesReadInPlaceMatchTheTripleLoopAndIgnoreThreads) {
  // a's lanes read where they lie, both ways a column-major matrix holds them (a lane a column:
  // stride 1 along k; a lane a row: stride ld along k), with lane counts off the 8-lane panel
  // (the last panel is packed) and k across gemm_f64_lanes' 512-long blocks.
  const int saved = mg::num_threads();
  for (int64_t M : {5, 8, 19, 300})
    for (int64_t K : {3, 512, 1100}) {
      const int64_t N = 29, ld = K + 3;
      const std::vector<double> store = random_matrix(M, ld, 4), B = random_matrix(N, K, 5);
      for (bool lane_is_column : {true, false}) {
        // lane_is_column: lane i at store[i*ld + k]; else store read as [K, M] with ld' = M.
        const mg::LanesF64 a = lane_is_column ? mg::LanesF64{store.data(), M, K, ld, 1}
                                              : mg::LanesF64{store.data(), M, K, 1, M};
        auto at = [&](int64_t i, int64_t k) { return store[i * a.lane_stride + k * a.k_stride]; };
        std::vector<std::vector<double>> out;
        for (int threads : {1, 2}) {
          mg::set_num_threads(threads);
          std::vector<double> C(static_cast<size_t>(M * N), -1.0);
          mg::gemm_f64_lanes(a, mg::pack_rows_f64(B.data(), K, N, K), C.data(), N);
          out.push_back(C);
        }
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double want = 0, scale = 0;
            for (int64_t k = 0; k < K; ++k)
              want += at(i, k) * B[j * K + k], scale += std::fabs(at(i, k) * B[j * K + k]);
            ASSERT_NEAR(out[0][i * N + j], want, 4 * K * 1.2e-16 * scale)
                << "M=" << M << " K=" << K << " column lanes " << lane_is_column << " at " << i
                << "," << j;
          }
        EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(double)));
      }
    }
  mg::set_num_threads(saved);
}

TEST(GemmF64, SubtractTakesTheProductFromWhatIsThere) {
  // C −= A·Bᵀ, C wider than one block of its long rows (768 lanes) and with a leading dimension
  // past its width, whose padding must stay untouched.
  for (int64_t M : {3, 70})
    for (int64_t N : {10, 800}) {
      const int64_t K = 48, ldc = N + 5;
      const std::vector<double> A = random_matrix(M, K, 6), B = random_matrix(N, K, 7);
      const std::vector<double> before = random_matrix(M, ldc, 8);
      std::vector<double> C = before;
      mg::gemm_f64_panels_subtract(mg::pack_rows_f64(A.data(), K, M, K),
                                   mg::pack_rows_f64(B.data(), K, N, K), C.data(), ldc);
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double want = before[i * ldc + j], scale = std::fabs(want);
          for (int64_t k = 0; k < K; ++k)
            want -= A[i * K + k] * B[j * K + k], scale += std::fabs(A[i * K + k] * B[j * K + k]);
          ASSERT_NEAR(C[i * ldc + j], want, 4 * K * 1.2e-16 * scale) << M << "x" << N;
        }
        for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(C[i * ldc + j], before[i * ldc + j]);
      }
    }
}
