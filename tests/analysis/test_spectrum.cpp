// The hand-written symmetric eigensolver and the numerical rank of `mosgrad rank`
// (analysis/spectrum.h): known spectra come back, a softmax log-probability matrix has rank exactly
// d+2, a random one is full rank, and both Gram sides agree.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "analysis/spectrum.h"
#include "analysis/svd.h"
#include "tensor/philox.h"

using namespace mg;

namespace {

std::vector<double> normals(int64_t n, uint64_t seed) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = philox_normal(seed, 2 * static_cast<uint64_t>(i));
  return v;
}

// Q diag(lambda) Qᵀ with Q a product of three random Householder reflections.
std::vector<double> with_spectrum(const std::vector<double>& lambda, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(lambda.size());
  std::vector<double> a(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) a[i * n + i] = lambda[i];
  for (int r = 0; r < 3; ++r) {
    std::vector<double> v = normals(n, seed + r);
    double vv = 0;
    for (double x : v) vv += x * x;
    // a <- (I - 2vvᵀ/vv) a (I - 2vvᵀ/vv)
    for (int side = 0; side < 2; ++side) {
      std::vector<double> b(a);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;  // (v · column j of a) or (row i of a · v)
          for (int64_t k = 0; k < n; ++k) dot += v[k] * (side == 0 ? a[k * n + j] : a[i * n + k]);
          b[i * n + j] -= 2 * (side == 0 ? v[i] : v[j]) * dot / vv;
        }
      a = b;
    }
  }
  return a;
}

// Rows n of log_softmax(h_n Wᵀ + b) in double, h [N,d], W [V,d].
std::vector<double> softmax_log_probs(int64_t N, int64_t V, int64_t d, uint64_t seed) {
  const std::vector<double> h = normals(N * d, seed), w = normals(V * d, seed + 1),
                            b = normals(V, seed + 2);
  std::vector<double> a(N * V);
  for (int64_t n = 0; n < N; ++n) {
    double mx = -1e300, sum = 0;
    for (int64_t v = 0; v < V; ++v) {
      double z = b[v];
      for (int64_t k = 0; k < d; ++k) z += h[n * d + k] * w[v * d + k];
      a[n * V + v] = z;
      mx = std::max(mx, z);
    }
    for (int64_t v = 0; v < V; ++v) sum += std::exp(a[n * V + v] - mx);
    for (int64_t v = 0; v < V; ++v) a[n * V + v] -= mx + std::log(sum);
  }
  return a;
}

}  // namespace

TEST(Spectrum, EigenvaluesOfAKnownSpectrum) {
  const std::vector<double> lambda = {9,    7.5, 3,  3,
                                      1e-3, 0,   -2, -4.25};  // a repeated one, a zero, negatives
  const std::vector<double> got = symmetric_eigenvalues(with_spectrum(lambda, 7), 8);
  ASSERT_EQ(got.size(), lambda.size());
  for (size_t i = 0; i < lambda.size(); ++i)
    EXPECT_NEAR(got[i], lambda[i], 1e-12) << "eigenvalue " << i;
}

TEST(Spectrum, EigenvaluesOfSmallAndDegenerateMatrices) {
  EXPECT_TRUE(symmetric_eigenvalues({}, 0).empty());
  EXPECT_EQ(symmetric_eigenvalues({5}, 1), std::vector<double>{5});
  const std::vector<double> two = symmetric_eigenvalues({2, 1, 1, 2}, 2);
  EXPECT_NEAR(two[0], 3, 1e-15);
  EXPECT_NEAR(two[1], 1, 1e-15);
  EXPECT_EQ(symmetric_eigenvalues(std::vector<double>(16, 0.0), 4), std::vector<double>(4, 0.0));
  const std::vector<double> diag = symmetric_eigenvalues({1, 0, 0, 0, 4, 0, 0, 0, 2}, 3);
  EXPECT_EQ(diag, (std::vector<double>{4, 2, 1}));
  EXPECT_THROW(symmetric_eigenvalues({1, 2, 3}, 2), std::invalid_argument);
}

TEST(Spectrum, GramOfRowsMatchesTheDefinitionOnRaggedSizes) {
  const int64_t rows = 13, cols = 7;  // not multiples of the 4x4 tile
  const std::vector<double> x = normals(rows * cols, 3);
  std::vector<double> g(cols * cols, 1.0);  // accumulates onto what is there
  gram_accumulate(x.data(), rows, cols, g);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double want = 1.0;
      for (int64_t r = 0; r < rows; ++r) want += x[r * cols + i] * x[r * cols + j];
      EXPECT_NEAR(g[i * cols + j], want, 1e-12) << i << "," << j;
    }
}

TEST(Spectrum, SoftmaxLogProbsHaveRankDPlus2OnEitherSide) {
  // A = H Wᵀ + 1 bᵀ − lse 1ᵀ: d directions from H, one from the bias, one from the normaliser.
  for (auto [N, V] : {std::pair<int64_t, int64_t>{90, 50}, {50, 90}}) {
    const Spectrum s = singular_values(softmax_log_probs(N, V, 6, 11), N, V);
    EXPECT_EQ(s.rank, 6 + 2) << "N=" << N << " V=" << V;
    EXPECT_EQ(static_cast<int64_t>(s.sigma.size()), std::min(N, V));
    EXPECT_GT(s.sigma[7], 1e3 * s.threshold);  // the last real direction is far above the cut ...
    EXPECT_LT(s.sigma[8], 0.5 * s.threshold);  // ... the first null one below it ...
    // ... at rounding level, ~ε·σ_max: σ computed from A itself, not from its Gram (whose
    // null directions came out near sqrt(ε)·σ_max, above this threshold).
    EXPECT_LT(s.sigma[8], 20 * DBL_EPSILON * s.sigma[0]);
  }
}

TEST(Spectrum, RandomMatrixIsFullRankAndBothSidesAgree) {
  const int64_t N = 40, V = 30;
  const std::vector<double> a = normals(N * V, 5);
  std::vector<double> at(V * N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t v = 0; v < V; ++v) at[v * N + i] = a[i * V + v];
  const Spectrum s = singular_values(a, N, V), t = singular_values(at, V, N);
  EXPECT_EQ(s.rank, V);
  EXPECT_EQ(t.rank, V);
  for (int64_t i = 0; i < V; ++i) EXPECT_NEAR(s.sigma[i], t.sigma[i], 1e-10 * s.sigma[0]);
  // Frobenius norm = sqrt(Σσ²)
  double fro = 0, sig = 0;
  for (double x : a) fro += x * x;
  for (double x : s.sigma) sig += x * x;
  EXPECT_NEAR(sig, fro, 1e-10 * fro);
}
