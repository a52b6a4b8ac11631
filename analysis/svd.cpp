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

constexpr int64_t kPanel = 32;  // columns per QR panel

}  // namespace

void householder_qr(std::vector<double>& a, int64_t m, int64_t n) {
  if (m < n || static_cast<int64_t>(a.size()) != m * n)
    throw std::invalid_argument(
        "householder_qr: need a column-major m x n matrix with m >= n, got " +
        std::to_string(a.size()) + " values for " + std::to_string(m) + " x " + std::to_string(n));
  // Each panel of columns factored column by column, then applied to the rest as matrix products.
  for (int64_t k = 0; k < n; k += kPanel) {
    const int64_t nb = std::min(kPanel, n - k);
    const PanelReflectors p = factor_panel(&a[k * m + k], m, m - k, nb);
    apply_qt_left(p, &a[(k + nb) * m + k], m, n - k - nb);
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
  // [R; rows] column-major, (n + count) × n, and its QR's R is the new R.
  const int64_t m = n_ + count;
  std::vector<double> s(static_cast<size_t>(m * n_), 0.0);
  for (int64_t j = 0; j < n_; ++j) {
    std::copy(&r_[j * n_], &r_[j * n_] + j + 1, &s[j * m]);
    for (int64_t i = 0; i < count; ++i) s[j * m + n_ + i] = rows[i * n_ + j];
  }
  householder_qr(s, m, n_);
  for (int64_t j = 0; j < n_; ++j) {
    std::copy(&s[j * m], &s[j * m] + j + 1, &r_[j * n_]);
    std::fill(&r_[j * n_] + j + 1, &r_[j * n_] + n_, 0.0);
  }
  rows_ += count;
}

std::vector<double> TallQR::singular_values() const {
  std::vector<double> r = r_, d(n_), e(n_ > 0 ? n_ - 1 : 0);
  if (n_ > 0) bidiagonalise(r, n_, d, e);
  return bidiagonal_singular_values(d, e);
}

}  // namespace mg
