#include "analysis/spectrum.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tensor/gemm_f64.h"
#include "tensor/not_implemented.h"

namespace mg {

namespace {

// Householder reduction of the symmetric matrix a [n,n] to tridiagonal form: diagonal d,
// subdiagonal e (e[i] couples i-1 and i; e[0] unused). The eigenvalues-only form of the classic
// tred2 (Golub & Van Loan §8.3.1) on the lower triangle: step i reflects row i's leading part u
// onto its last entry, p = A u / h, q = p − (uᵀp / 2h) u, A ← A − u qᵀ − q uᵀ on the leading (i ×
// i) block. The work is two passes over that triangle per step, limited by memory bandwidth, so it
// runs on one thread: a thread team's barrier per step costs more than it gains, badly so on a busy
// machine (and one thread in a fixed order gives the same bits everywhere).
void tridiagonalise(std::vector<double>& a, int64_t n, std::vector<double>& d,
                    std::vector<double>& e) {
  // One pass over the triangle per step instead of two: step i's rank-2 update of a row is applied
  // just before step i−1's product p = A u reads that row (row i−1 itself is updated first, as it
  // gives step i−1's u). u, q: the pending update; nu, p: the reflector being built.
  std::vector<double> u(n), q(n), nu(n), p(n);
  bool pending = false;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t m = i;  // this step's block is [0, m)
    double* row = &a[i * n];
    if (pending)
      for (int64_t k = 0; k <= i; ++k) row[k] -= u[i] * q[k] + q[i] * u[k];
    double scale = 0;
    for (int64_t k = 0; k < m; ++k) scale += std::fabs(row[k]);
    const bool reflect = m > 1 && scale > 0;
    double h = 0;
    if (!reflect) {
      e[i] = row[m - 1];
    } else {
      for (int64_t k = 0; k < m; ++k) nu[k] = row[k] / scale, h += nu[k] * nu[k];
      const double f = nu[m - 1];
      const double g = f >= 0 ? -std::sqrt(h) : std::sqrt(h);
      e[i] = scale * g;
      h -= f * g;
      nu[m - 1] = f - g;
      std::fill(p.begin(), p.begin() + m, 0.0);
    }
    // Rows j < m: the pending update, then (p = A nu from the lower triangle alone) row j gives p_j
    // its k ≤ j part and each p_k (k < j) a_jk nu_j.
    for (int64_t j = 0; j < m; ++j) {
      double* aj = &a[j * n];
      if (pending) {
        const double uj = u[j], qj = q[j];
#pragma omp simd
        for (int64_t k = 0; k <= j; ++k) aj[k] -= uj * q[k] + qj * u[k];
      }
      if (reflect) {
        const double vj = nu[j];
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < j; ++k) {
          s += aj[k] * nu[k];
          p[k] += aj[k] * vj;
        }
        p[j] += s + aj[j] * vj;
      }
    }
    pending = reflect;
    if (!reflect) continue;
    double up = 0;
    for (int64_t k = 0; k < m; ++k) p[k] /= h, up += nu[k] * p[k];
    const double hh = up / (h + h);
    for (int64_t k = 0; k < m; ++k) q[k] = p[k] - hh * nu[k], u[k] = nu[k];
  }
  for (int64_t i = 0; i < n; ++i) d[i] = a[i * n + i];
}

}  // namespace

void tridiagonal_eigenvalues(std::vector<double>& d, std::vector<double>& e, int64_t n,
                             double abs_tol) {
  for (int64_t l = 0; l < n; ++l) {
    int iterations = 0;
    int64_t m;
    do {
      for (m = l; m < n - 1; ++m) {
        const double dd = std::fabs(d[m]) + std::fabs(d[m + 1]);
        if (std::fabs(e[m]) <= DBL_EPSILON * dd || std::fabs(e[m]) <= abs_tol) break;
      }
      if (m == l) break;
      if (++iterations > 60)
        throw std::runtime_error("symmetric_eigenvalues: QL did not converge for eigenvalue " +
                                 std::to_string(l) + " of " + std::to_string(n));
      double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
      double r = std::hypot(g, 1.0);
      g = d[m] - d[l] + e[l] / (g + std::copysign(r, g));
      double s = 1, c = 1, p = 0;
      int64_t i = m - 1;
      bool deflated = false;
      for (; i >= l; --i) {
        const double f = s * e[i], b = c * e[i];
        e[i + 1] = r = std::hypot(f, g);
        if (r == 0) {  // underflow: split the matrix here and start again
          d[i + 1] -= p;
          e[m] = 0;
          deflated = true;
          break;
        }
        s = f / r;
        c = g / r;
        g = d[i + 1] - p;
        r = (d[i] - g) * s + 2.0 * c * b;
        p = s * r;
        d[i + 1] = g + p;
        g = c * r - b;
      }
      if (deflated) continue;
      d[l] -= p;
      e[l] = g;
      e[m] = 0;
    } while (true);
  }
}

std::vector<double> symmetric_eigenvalues(std::vector<double> a, int64_t n) {
  if (n < 0 || static_cast<int64_t>(a.size()) != n * n)
    throw std::invalid_argument("symmetric_eigenvalues: matrix has " + std::to_string(a.size()) +
                                " values, expected n*n for n=" + std::to_string(n));
  if (n == 0) return {};
  std::vector<double> d(n), e(n, 0.0);
  tridiagonalise(a, n, d, e);
  for (int64_t i = 1; i < n; ++i) e[i - 1] = e[i];  // e[i] now couples i and i+1
  e[n - 1] = 0;
  tridiagonal_eigenvalues(d, e, n);
  std::sort(d.begin(), d.end(), std::greater<double>());
  return d;
}

void gram_of_rows(const double* y, int64_t n, int64_t len, std::vector<double>& g) {
  if (static_cast<int64_t>(g.size()) != n * n)
    throw std::invalid_argument("gram_of_rows: g has " + std::to_string(g.size()) +
                                " values, expected " + std::to_string(n) + "^2");
  // The lanes are y's rows; the k of each dot product runs along them (tensor/gemm_f64.h).
  syrk_f64_lower(pack_rows_f64(y, len, n, len), g.data(), n);
  mirror_lower(g, n);
}

void gram_accumulate_lower(const double* x, int64_t rows, int64_t cols, std::vector<double>& g) {
  if (static_cast<int64_t>(g.size()) != cols * cols)
    throw std::invalid_argument("gram_accumulate: g has " + std::to_string(g.size()) +
                                " values, expected " + std::to_string(cols) + "^2");
  // The lanes are x's columns, each entry xᵢᵀxⱼ a sum over the block's rows in order.
  syrk_f64_lower(pack_columns_f64(x, cols, rows, cols), g.data(), cols);
}

void mirror_lower(std::vector<double>& g, int64_t n) {
  // In 64 x 64 blocks, so the transposed reads stay in cache.
  constexpr int64_t kB = 64;
  for (int64_t i0 = 0; i0 < n; i0 += kB)
    for (int64_t j0 = 0; j0 <= i0; j0 += kB)
      for (int64_t i = i0; i < std::min(n, i0 + kB); ++i)
        for (int64_t j = j0; j < std::min(i, j0 + kB); ++j) g[j * n + i] = g[i * n + j];
}

void gram_accumulate(const double* x, int64_t rows, int64_t cols, std::vector<double>& g) {
  gram_accumulate_lower(x, rows, cols, g);
  mirror_lower(g, cols);
}

Spectrum spectrum_from_gram_eigenvalues(std::vector<double> lambda, int64_t N, int64_t V) {
  Spectrum s;
  std::sort(lambda.begin(), lambda.end(), std::greater<double>());
  for (double l : lambda)
    s.sigma.push_back(std::sqrt(std::max(l, 0.0)));  // rounding can make λ ≈ 0 negative
  if (s.sigma.empty()) return s;
  // λ > λ_max·max(N,V)·ε, the threshold the Gram's accuracy supports (see the header).
  s.threshold = s.sigma[0] * std::sqrt(static_cast<double>(std::max(N, V)) * DBL_EPSILON);
  for (double v : s.sigma) s.rank += v > s.threshold;
  return s;
}

Spectrum spectrum_from_singular_values(std::vector<double> sigma, int64_t N, int64_t V) {
  Spectrum s;
  std::sort(sigma.begin(), sigma.end(), std::greater<double>());
  s.sigma = std::move(sigma);
  if (s.sigma.empty()) return s;
  // TASK 8.1: the numerical rank: how many σ exceed σ_max·max(N,V)·ε (the threshold, recorded too)
  s.threshold = s.sigma[0] * static_cast<double>(std::max(N, V)) * DBL_EPSILON;
  s.rank = std::count_if(s.sigma.begin(), s.sigma.end(), [&](double v) { return v > s.threshold; });
  return s;
  // END TASK 8.1
}

}  // namespace mg
