#include "analysis/svd.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "analysis/bidiagonal.h"
#include "analysis/householder.h"
#include "analysis/spectrum.h"

namespace mg {

namespace {

constexpr int64_t kPanel = 48;  // columns per panel of householder_qr
// Columns per panel of TallQR's fold: each panel's update reads and writes the block's columns
// right of it once, so wider panels move less memory per multiply-add, while the panel's own
// factorization grows with the width. bench/bench_svd --n 10000 --rows 20000 --folds 2, 2 cores
// of an Intel Xeon (Emerald Rapids): 96 columns 51-59 s a fold, 144 43-48 s, 192 45-55 s.
constexpr int64_t kFoldPanel = 144;

}  // namespace

void householder_qr(std::vector<double>& a, int64_t m, int64_t n) {
  if (m < n || static_cast<int64_t>(a.size()) != m * n)
    throw std::invalid_argument(
        "householder_qr: need a column-major m x n matrix with m >= n, got " +
        std::to_string(a.size()) + " values for " + std::to_string(m) + " x " + std::to_string(n));
  // Each panel of columns factored (recursively, analysis/householder.h), then applied to the
  // columns right of it as matrix products.
  for (int64_t k = 0; k < n; k += kPanel) {
    const int64_t nb = std::min(kPanel, n - k);
    const PanelReflectors p = factor_panel(&a[k * m + k], m, m - k, nb);
    if (k + nb < n) apply_qt_left(p, &a[(k + nb) * m + k], m, n - k - nb);
  }
}

std::vector<double> bidiagonal_singular_values(const std::vector<double>& d,
                                               const std::vector<double>& e) {
  const int64_t n = static_cast<int64_t>(d.size());
  if (n == 0) return {};
  // The Golub–Kahan form: zero diagonal, off-diagonal d₀, e₀, d₁, e₁, …, d_{n−1}; eigenvalues ±σ.
  std::vector<double> diag(2 * n, 0.0), off(2 * n, 0.0);
  double norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    off[2 * i] = d[i];
    if (i + 1 < n) off[2 * i + 1] = e[i];
    norm = std::max(norm, std::fabs(d[i]) + (i + 1 < n ? std::fabs(e[i]) : 0.0));
  }
  // Deflate once an off-diagonal entry is below ε·‖B‖: the error bound we need is absolute.
  tridiagonal_eigenvalues(diag, off, 2 * n, DBL_EPSILON * norm);
  std::sort(diag.begin(), diag.end(), std::greater<double>());
  diag.resize(n);
  for (double& s : diag) s = std::max(s, 0.0);
  return diag;
}

std::vector<double> singular_values_tall(std::vector<double> a, int64_t m, int64_t n) {
  householder_qr(a, m, n);
  std::vector<double> r(static_cast<size_t>(n * n), 0.0);  // the triangle, column-major [n,n]
  for (int64_t j = 0; j < n; ++j) std::copy(&a[j * m], &a[j * m] + j + 1, &r[j * n]);
  a = std::vector<double>();
  std::vector<double> d(n), e(n > 0 ? n - 1 : 0);
  if (n > 0) bidiagonalise(r, n, d, e);
  return bidiagonal_singular_values(d, e);
}

TallQR::TallQR(int64_t n) : n_(n), r_(static_cast<size_t>(n * n), 0.0) {}

void TallQR::add_rows(const double* rows, int64_t count) {
  if (count < 0)
    throw std::invalid_argument("TallQR::add_rows: a block of " + std::to_string(count) + " rows");
  if (count == 0) return;
  // The QR of [R; B], R upper triangular: the reflection for column j needs only R's row j and B
  // (R's rows below j are zero in column j and stay so), so a panel of columns k..k+nb works on
  // R's rows k..k+nb and B, and the work is count·n² multiply-adds, not (n + count)·n² − n³/3.
  const int64_t n = n_;
  // Column-major [count, n], kept between folds: a fresh 1.6 GB each fold cost ~8% of it in page
  // faults (PTB valid's folds at V = 10,000).
  std::vector<double>& b = block_;
  b.resize(static_cast<size_t>(count * n));
  // Transposed in 64 x 64 tiles, so both sides move whole cache lines (PTB valid: 1.6 GB a fold).
  constexpr int64_t kTile = 64;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < n; j0 += kTile)
    for (int64_t i0 = 0; i0 < count; i0 += kTile)
      for (int64_t j = j0; j < std::min(n, j0 + kTile); ++j)
        for (int64_t i = i0; i < std::min(count, i0 + kTile); ++i)
          b[j * count + i] = rows[i * n + j];
  // Each panel of columns factored in place, R's triangle over B's columns (V's B part left in
  // B), then applied to R's rows of the panel and B's columns right of it.
  for (int64_t k = 0; k < n; k += kFoldPanel) {
    const int64_t nb = std::min(kFoldPanel, n - k), nc = n - k - nb;
    double* top = &r_[k * n + k];
    double* bk = b.data() + k * count;
    const std::vector<double> t = factor_stacked(top, n, bk, count, count, nb);
    if (nc > 0)
      apply_stacked_qt(bk, count, count, nb, t, top + nb * n, n, bk + nb * count, count, nc);
  }
  rows_ += count;
}

std::vector<double> TallQR::singular_values() const {
  std::vector<double> r = r_, d(n_), e(n_ > 0 ? n_ - 1 : 0);
  if (n_ > 0) bidiagonalise(r, n_, d, e);
  return bidiagonal_singular_values(d, e);
}

Spectrum singular_values(const std::vector<double>& a, int64_t N, int64_t V) {
  if (static_cast<int64_t>(a.size()) != N * V)
    throw std::invalid_argument("singular_values: matrix has " + std::to_string(a.size()) +
                                " values, expected " + std::to_string(N) + "x" + std::to_string(V));
  if (N <= V)  // a row-major [N,V] is Aᵀ column-major: tall V x N
    return spectrum_from_singular_values(singular_values_tall(a, V, N), N, V);
  std::vector<double> col(a.size());  // A column-major: tall N x V
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < V; ++j) col[j * N + i] = a[i * V + j];
  return spectrum_from_singular_values(singular_values_tall(std::move(col), N, V), N, V);
}

}  // namespace mg
