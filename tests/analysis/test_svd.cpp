// Singular values from the matrix itself (analysis/svd.h): matrices built with known singular
// values (A = U diag(σ) Wᵀ with U, W products of random reflections), across the QR's panel edges
// and both shapes; a block-by-block TallQR gives what the whole matrix gives; and a matrix whose
// smallest singular values sit between the Gram's threshold and the standard one is counted at
// its true rank, where the Gram's eigenvalues could not see them. The two-stage reduction to
// bidiagonal form (analysis/bidiagonal.h) against the one-stage reference, stage by stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <tuple>

#include "analysis/bidiagonal.h"
#include "analysis/householder.h"
#include "analysis/spectrum.h"
#include "analysis/svd.h"
#include "tensor/parallel.h"
#include "tensor/philox.h"

using namespace mg;

namespace {

// Q x for Q a product of `count` random reflections in R^n (orthogonal), applied to each column
// of the column-major [n, cols] matrix x.
void random_orthogonal_apply(std::vector<double>& x, int64_t n, int64_t cols, uint64_t seed) {
  for (int r = 0; r < 6; ++r) {
    std::vector<double> v(n);
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      v[i] = philox_uniform(seed, r * n + i) - 0.5;
      norm += v[i] * v[i];
    }
    for (int64_t c = 0; c < cols; ++c) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += v[i] * x[c * n + i];
      for (int64_t i = 0; i < n; ++i) x[c * n + i] -= 2 * dot / norm * v[i];
    }
  }
}

// Column-major m x n (m >= n) with singular values sigma (n of them): U diag(σ) Wᵀ.
std::vector<double> with_singular_values(int64_t m, int64_t n, const std::vector<double>& sigma,
                                         uint64_t seed) {
  // Wᵀ rows: start from diag(σ) padded to m x n, apply U on the left (columns), W on the right.
  std::vector<double> wt(static_cast<size_t>(n * n), 0.0);  // column-major n x n identity
  for (int64_t i = 0; i < n; ++i) wt[i * n + i] = 1;
  random_orthogonal_apply(wt, n, n, seed + 1);  // columns of W
  std::vector<double> a(static_cast<size_t>(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j)  // column j of diag(σ) Wᵀ: σ_i W[j, i] in row i
    for (int64_t i = 0; i < n; ++i) a[j * m + i] = sigma[i] * wt[i * n + j];
  random_orthogonal_apply(a, m, n, seed);
  return a;
}

// Rows first..first+rows of the column-major m x n matrix a, row-major: a block for TallQR.
std::vector<double> row_block(const std::vector<double>& a, int64_t m, int64_t n, int64_t first,
                              int64_t rows) {
  std::vector<double> block(static_cast<size_t>(rows * n));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) block[i * n + j] = a[j * m + first + i];
  return block;
}

std::vector<double> descending(std::vector<double> s) {
  std::sort(s.begin(), s.end(), std::greater<double>());
  return s;
}

}  // namespace

TEST(Svd, KnownSingularValuesAcrossPanelEdges) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{40, 7},
                      {100, 32},
                      {150, 33},
                      {300, 97},
                      {64, 64},
                      {120, 48},
                      {120, 49},
                      {200, 96},
                      {250, 113}}) {  // around the 48-wide panels
    std::vector<double> sigma(n);
    for (int64_t i = 0; i < n; ++i) sigma[i] = std::pow(10.0, -8.0 * i / n) * (1 + 0.01 * i);
    const std::vector<double> got =
        singular_values_tall(with_singular_values(m, n, sigma, 3), m, n);
    const std::vector<double> want = descending(sigma);
    ASSERT_EQ(got.size(), want.size());
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-13 * want[0]) << m << "x" << n << " sigma " << i;
  }
}

TEST(Svd, BidiagonalSingularValues) {
  // [[3, 4], [0, 0]] has singular values 5 and 0; [[1, 1], [0, 1]]: the golden ratio and its
  // inverse.
  std::vector<double> s = bidiagonal_singular_values({3, 0}, {4});
  EXPECT_NEAR(s[0], 5, 1e-15);
  EXPECT_NEAR(s[1], 0, 1e-15);
  s = bidiagonal_singular_values({1, 1}, {1});
  EXPECT_NEAR(s[0], (1 + std::sqrt(5.0)) / 2, 1e-15);
  EXPECT_NEAR(s[1], (std::sqrt(5.0) - 1) / 2, 1e-15);
}

TEST(Svd, TallQrByBlocksGivesTheWholeMatrixsValues) {
  const int64_t m = 230, n = 45;
  std::vector<double> sigma(n);
  for (int64_t i = 0; i < n; ++i) sigma[i] = 1.0 / (1 + i);
  const std::vector<double> a = with_singular_values(m, n, sigma, 9);
  TallQR qr(n);
  for (int64_t first = 0; first < m; first += 70) {  // blocks of 70, 70, 70, 20 rows
    const int64_t rows = std::min<int64_t>(70, m - first);
    qr.add_rows(row_block(a, m, n, first, rows).data(), rows);
  }
  EXPECT_EQ(qr.rows_added(), m);
  const std::vector<double> got = qr.singular_values(), want = descending(sigma);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-13) << i;
}

TEST(Svd, TallQrFoldsAcrossPanelsAndBlocksShorterThanAPanel) {
  // n = 300: the fold's panels of 144, 144 and 12 columns, each applied to the columns after it,
  // with R's rows and the block stored apart; blocks of 20 rows (fewer than a panel's columns),
  // then 130, then the rest.
  const int64_t m = 700, n = 300;
  std::vector<double> sigma(n);
  for (int64_t i = 0; i < n; ++i) sigma[i] = std::pow(10.0, -6.0 * i / n);
  const std::vector<double> a = with_singular_values(m, n, sigma, 13);
  TallQR qr(n);
  for (int64_t first = 0, rows = 20; first < m; first += rows, rows = first < 150 ? 130 : m) {
    rows = std::min(rows, m - first);
    qr.add_rows(row_block(a, m, n, first, rows).data(), rows);
  }
  EXPECT_EQ(qr.rows_added(), m);
  const std::vector<double> got = qr.singular_values(), want = descending(sigma);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-13) << i;
}

TEST(Svd, StackedPanelsMatchTheGenericPanelsOnTheStackedMatrix) {
  // [R; B] factored with V's top part known to be the identity (factor_stacked, in halves down to
  // leaves) and its Qᵀ applied to the columns after it, against the same done by the generic
  // panel on the explicit stacked matrix: the same reflections, so the same R rows and the same
  // updated B, to rounding. Blocks with fewer and with more rows than the panel's columns.
  for (auto [k, count, nc] :
       {std::tuple<int64_t, int64_t, int64_t>{40, 30, 50}, {37, 100, 9}, {20, 0, 6}}) {
    const int64_t cols = k + nc, m = k + count;
    std::vector<double> top(static_cast<size_t>(k * cols), 0.0), b(count * cols);
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < std::min<int64_t>(k, c + 1); ++r)
        top[c * k + r] = philox_uniform(31, c * k + r) - 0.5;
      for (int64_t r = 0; r < count; ++r)
        b[c * count + r] = philox_uniform(37, c * count + r) - 0.5;
    }
    std::vector<double> full(static_cast<size_t>(m * cols));  // column-major [top; b]
    for (int64_t c = 0; c < cols; ++c) {
      std::copy(&top[c * k], &top[c * k] + k, &full[c * m]);
      std::copy(b.data() + c * count, b.data() + (c + 1) * count, &full[c * m + k]);
    }
    const PanelReflectors p = factor_panel(full.data(), m, m, k);
    apply_qt_left(p, &full[k * m], m, nc);
    const std::vector<double> t = factor_stacked(top.data(), k, b.data(), count, count, k);
    apply_stacked_qt(b.data(), count, count, k, t, &top[k * k], k, b.data() + k * count, count, nc);
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < std::min<int64_t>(k, c + 1); ++r)
        EXPECT_NEAR(top[c * k + r], full[c * m + r], 1e-13) << "R[" << r << ", " << c << "]";
      for (int64_t r = 0; c >= k && r < count; ++r)
        EXPECT_NEAR(b[c * count + r], full[c * m + k + r], 1e-13) << "B[" << r << ", " << c << "]";
    }
  }
}

TEST(Svd, RankBetweenTheGramThresholdAndTheStandardOneIsCounted) {
  // 60 singular values of ~1 and 20 of 1e-9: above the standard tolerance σ_max·max(N,V)·ε
  // (~4e-14 here), below what the Gram resolves (σ_max·sqrt(max(N,V)·ε) ~ 2e-7); the rest 0.
  const int64_t N = 200, V = 120, true_rank = 80;
  std::vector<double> sigma(V, 0.0);
  for (int64_t i = 0; i < 60; ++i) sigma[i] = 1 + 0.1 * i;
  for (int64_t i = 60; i < true_rank; ++i) sigma[i] = 1e-9 * (1 + 0.1 * (i - 60));
  std::vector<double> col = with_singular_values(N, V, sigma, 21);  // column-major [N, V]
  std::vector<double> a(static_cast<size_t>(N * V));                // row-major [N, V]
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < V; ++j) a[i * V + j] = col[j * N + i];
  const Spectrum s = singular_values(a, N, V);
  EXPECT_EQ(s.rank, true_rank);
  EXPECT_NEAR(s.threshold, s.sigma[0] * N * DBL_EPSILON, 1e-20) << "the standard tolerance";
  // The Gram's eigenvalues lose the 1e-9 values: the old method's count stops at 60.
  std::vector<double> g(static_cast<size_t>(V * V), 0.0);
  gram_accumulate(a.data(), N, V, g);
  EXPECT_EQ(spectrum_from_gram_eigenvalues(symmetric_eigenvalues(g, V), N, V).rank, 60);
  // The wide orientation (V > N): the same matrix transposed has the same values.
  const Spectrum t = singular_values(col, V, N);  // col read row-major is Aᵀ [V, N]
  EXPECT_EQ(t.rank, true_rank);
}

namespace {

// Column-major n x n with entries uniform in [−0.5, 0.5).
std::vector<double> random_square(int64_t n, uint64_t seed) {
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n * n; ++i) a[i] = philox_uniform(seed, i) - 0.5;
  return a;
}

// The singular values of the square a, by the one-stage reference.
std::vector<double> reference_values(std::vector<double> a, int64_t n) {
  std::vector<double> d, e;
  bidiagonalise_one_stage(a, n, d, e);
  return bidiagonal_singular_values(d, e);
}

// Only the upper band of width b of a (column-major n x n), zeros elsewhere.
std::vector<double> upper_band(const std::vector<double>& a, int64_t n, int64_t b) {
  std::vector<double> out(a.size(), 0.0);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = std::max<int64_t>(0, c - b); r <= c; ++r) out[c * n + r] = a[c * n + r];
  return out;
}

void expect_same_values(const std::vector<double>& got, const std::vector<double>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-13 * want[0]) << what << " sigma " << i;
}

}  // namespace

TEST(Bidiagonal, TheBandHasTheMatrixsSingularValues) {
  // Stage 1 alone: the band it leaves (read as a dense matrix, zeros outside) against the input,
  // across band widths that do and do not divide n.
  for (auto [n, b] : {std::pair<int64_t, int64_t>{40, 4},
                      {65, 32},
                      {97, 8},
                      {50, 7},
                      {9, 16},
                      {116, 48},
                      {120, 48}}) {  // the last LQ panels: fewer columns than b
    const std::vector<double> a = random_square(n, 5 + n);
    std::vector<double> banded = a;
    reduce_to_band(banded, n, b);
    expect_same_values(reference_values(upper_band(banded, n, b), n), reference_values(a, n),
                       "band " + std::to_string(n) + "/" + std::to_string(b));
  }
}

TEST(Bidiagonal, TheChaseKeepsTheBandsSingularValues) {
  // Stage 2 alone, on random band matrices: the rotations' fill must be chased off exactly.
  for (auto [n, b] : {std::pair<int64_t, int64_t>{30, 1}, {30, 2}, {41, 5}, {70, 32}, {12, 20}}) {
    const std::vector<double> band = upper_band(random_square(n, 11 + b), n, b);
    std::vector<double> d, e;
    band_to_bidiagonal(band, n, b, d, e);
    expect_same_values(bidiagonal_singular_values(d, e), reference_values(band, n),
                       "chase " + std::to_string(n) + "/" + std::to_string(b));
  }
}

TEST(Bidiagonal, TwoStagesGiveKnownSingularValues) {
  // Values spread over 10 decades (as a MoS log-probability matrix's are), past the size where
  // bidiagonalise switches to two stages (2 x its band of 96).
  const int64_t n = 250;
  std::vector<double> sigma(n);
  for (int64_t i = 0; i < n; ++i) sigma[i] = std::pow(10.0, -10.0 * i / n) * (1 + 0.01 * i);
  std::vector<double> a = with_singular_values(n, n, sigma, 17), d, e;
  bidiagonalise(a, n, d, e);
  const std::vector<double> got = bidiagonal_singular_values(d, e), want = descending(sigma);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-13 * want[0]) << i;
}

TEST(Bidiagonal, SameBitsForAnyThreadCount) {
  // TallQR's folds (panels of 144; a first block of 4,600 rows, so the double GEMM takes k in
  // several pieces and the leaves split their columns among threads) and the two-stage reduction
  // (a band of 96): every value is one thread's work in a fixed order.
  const int64_t m = 4800, n = 300;
  std::vector<double> sigma(n);
  for (int64_t i = 0; i < n; ++i) sigma[i] = 1.0 / (1 + i);
  const std::vector<double> a = with_singular_values(m, n, sigma, 19);
  const std::vector<double> block = row_block(a, m, n, 0, m);
  const int saved = num_threads();
  std::vector<std::vector<double>> out;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    TallQR qr(n);
    qr.add_rows(block.data(), 4600);
    qr.add_rows(block.data() + 4600 * n, m - 4600);
    out.push_back(qr.singular_values());
  }
  set_num_threads(saved);
  for (size_t t = 1; t < out.size(); ++t)
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[t].data(), out[0].size() * sizeof(double)))
        << "threads " << t + 1;
}
