#include "lm/spectrum.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

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

// Eigenvalues of the symmetric tridiagonal (d, e) by the implicit QL method with Wilkinson shifts
// (Golub & Van Loan §8.3.5; the tqli of Numerical Recipes without eigenvectors). On entry e[i]
// couples i and i+1, e[n-1] = 0. d is overwritten with the eigenvalues.
void tridiagonal_ql(std::vector<double>& d, std::vector<double>& e, int64_t n) {
  for (int64_t l = 0; l < n; ++l) {
    int iterations = 0;
    int64_t m;
    do {
      for (m = l; m < n - 1; ++m) {
        const double dd = std::fabs(d[m]) + std::fabs(d[m + 1]);
        if (std::fabs(e[m]) <= DBL_EPSILON * dd) break;
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

}  // namespace

std::vector<double> symmetric_eigenvalues(std::vector<double> a, int64_t n) {
  if (n < 0 || static_cast<int64_t>(a.size()) != n * n)
    throw std::invalid_argument("symmetric_eigenvalues: matrix has " + std::to_string(a.size()) +
                                " values, expected n*n for n=" + std::to_string(n));
  if (n == 0) return {};
  std::vector<double> d(n), e(n, 0.0);
  tridiagonalise(a, n, d, e);
  for (int64_t i = 1; i < n; ++i) e[i - 1] = e[i];  // e[i] now couples i and i+1
  e[n - 1] = 0;
  tridiagonal_ql(d, e, n);
  std::sort(d.begin(), d.end(), std::greater<double>());
  return d;
}

void gram_of_rows(const double* y, int64_t n, int64_t len, std::vector<double>& g) {
  if (static_cast<int64_t>(g.size()) != n * n)
    throw std::invalid_argument("gram_of_rows: g has " + std::to_string(g.size()) +
                                " values, expected " + std::to_string(n) + "^2");
  // Tiles of 4×4 entries on and below the diagonal: 16 dot products share their 8 row loads. The
  // tiles are split over threads; each entry is one thread's fixed-order sum (the simd lanes are
  // fixed by the compiled code), so the result does not depend on the thread count.
  const int64_t tiles = (n + 3) / 4;
#pragma omp parallel for schedule(dynamic, 1) if (n * n * len > (int64_t{1} << 22))
  for (int64_t ti = tiles - 1; ti >= 0; --ti) {  // the longest rows of tiles first
    for (int64_t tj = 0; tj <= ti; ++tj) {
      auto row = [&](int64_t t, int64_t q) {
        return y + std::min(t * 4 + q, n - 1) * len;
      };  // ragged: repeat
      const double *a0 = row(ti, 0), *a1 = row(ti, 1), *a2 = row(ti, 2), *a3 = row(ti, 3);
      const double *b0 = row(tj, 0), *b1 = row(tj, 1), *b2 = row(tj, 2), *b3 = row(tj, 3);
      double s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
      double s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
#pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)
      for (int64_t k = 0; k < len; ++k) {
        const double x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
        const double z0 = b0[k], z1 = b1[k], z2 = b2[k], z3 = b3[k];
        s00 += x0 * z0, s01 += x0 * z1, s02 += x0 * z2, s03 += x0 * z3;
        s10 += x1 * z0, s11 += x1 * z1, s12 += x1 * z2, s13 += x1 * z3;
        s20 += x2 * z0, s21 += x2 * z1, s22 += x2 * z2, s23 += x2 * z3;
        s30 += x3 * z0, s31 += x3 * z1, s32 += x3 * z2, s33 += x3 * z3;
      }
      const double s[4][4] = {
          {s00, s01, s02, s03}, {s10, s11, s12, s13}, {s20, s21, s22, s23}, {s30, s31, s32, s33}};
      for (int64_t q = 0; q < 4; ++q)
        for (int64_t w = 0; w < 4; ++w) {
          const int64_t i = ti * 4 + q, j = tj * 4 + w;
          if (i >= n || j >= n || j > i) continue;
          g[i * n + j] += s[q][w];
          if (j != i) g[j * n + i] += s[q][w];
        }
    }
  }
}

void gram_accumulate(const double* x, int64_t rows, int64_t cols, std::vector<double>& g) {
  // xᵀ x is the Gram of xᵀ's rows: transpose once so every entry is a dot of two contiguous rows.
  std::vector<double> xt(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
  gram_of_rows(xt.data(), cols, rows, g);
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

Spectrum singular_values(const std::vector<double>& a, int64_t N, int64_t V) {
  if (static_cast<int64_t>(a.size()) != N * V)
    throw std::invalid_argument("singular_values: matrix has " + std::to_string(a.size()) +
                                " values, expected " + std::to_string(N) + "x" + std::to_string(V));
  std::vector<double> g;
  int64_t n;
  if (V <= N) {  // Aᵀ A [V,V]
    n = V;
    g.assign(static_cast<size_t>(V * V), 0.0);
    gram_accumulate(a.data(), N, V, g);
  } else {  // A Aᵀ [N,N]
    n = N;
    g.assign(static_cast<size_t>(N * N), 0.0);
    gram_of_rows(a.data(), N, V, g);
  }
  return spectrum_from_gram_eigenvalues(symmetric_eigenvalues(std::move(g), n), N, V);
}

}  // namespace mg
