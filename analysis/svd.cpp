#include "analysis/svd.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "analysis/spectrum.h"
#include "tensor/gemm_f64.h"
#include "tensor/parallel.h"

namespace mg {

namespace {

constexpr int64_t kPanel = 32;  // columns per QR panel

#ifdef _OPENMP
int team_size() {
  return omp_get_num_threads();
}
int team_index() {
  return omp_get_thread_num();
}
#else
int team_size() {
  return 1;
}
int team_index() {
  return 0;
}
#endif

// The reflector H = I − τ v vᵀ (v₀ = 1) that maps x [len] onto its first axis (LAPACK's dlarfg):
// on return x₀ holds the image ∓‖x‖ and x₁.. hold v₁..; τ = 0 when x is already on that axis.
double householder(double* x, int64_t len) {
  double tail = 0;
  for (int64_t i = 1; i < len; ++i) tail += x[i] * x[i];
  if (tail == 0) return 0;
  const double alpha = x[0], beta = -std::copysign(std::sqrt(alpha * alpha + tail), alpha);
  const double scale = 1 / (alpha - beta);
  for (int64_t i = 1; i < len; ++i) x[i] *= scale;
  x[0] = beta;
  return (beta - alpha) / beta;
}

// c ← H c for the reflector (τ, v) stored as in householder(): v₀ = 1, v₁.. = v[1..len).
inline void reflect(double tau, const double* v, double* c, int64_t len) {
  double w = c[0];
  for (int64_t i = 1; i < len; ++i) w += v[i] * c[i];
  w *= tau;
  c[0] -= w;
  for (int64_t i = 1; i < len; ++i) c[i] -= w * v[i];
}

// Columns [k, k+nb) factored one by one; the rest of the matrix (columns k+nb..) updated at once
// by C ← (I − V T Vᵀ)ᵀ C = C − V Tᵀ (Vᵀ C), the compact WY form of the panel's nb reflectors
// (Schreiber & Van Loan 1989), with V [rows, nb] explicit (unit diagonal, zeros above).
void qr_panel(double* a, int64_t m, int64_t n, int64_t k) {
  const int64_t nb = std::min(kPanel, n - k), rows = m - k, nc = n - k - nb;
  std::vector<double> tau(nb);
  for (int64_t j = 0; j < nb; ++j) {
    double* col = a + (k + j) * m + k + j;
    tau[j] = householder(col, rows - j);
    for (int64_t c = j + 1; c < nb; ++c) reflect(tau[j], col, a + (k + c) * m + k + j, rows - j);
  }
  if (nc == 0) return;
  std::vector<double> v(static_cast<size_t>(rows * nb), 0.0);  // column-major [rows, nb]
  for (int64_t j = 0; j < nb; ++j) {
    v[j * rows + j] = 1;
    std::copy(a + (k + j) * m + k + j + 1, a + (k + j) * m + m, v.begin() + j * rows + j + 1);
  }
  // T (upper triangular): T_jj = τ_j, T[0:j, j] = −τ_j T[0:j, 0:j] (V[:, 0:j]ᵀ v_j).
  std::vector<double> t(static_cast<size_t>(nb * nb), 0.0), z(nb);
  for (int64_t j = 0; j < nb; ++j) {
    for (int64_t i = 0; i < j; ++i) {
      double s = 0;
      for (int64_t r = j; r < rows; ++r) s += v[i * rows + r] * v[j * rows + r];
      z[i] = s;
    }
    for (int64_t i = 0; i < j; ++i) {
      double s = 0;
      for (int64_t l = i; l < j; ++l) s += t[i * nb + l] * z[l];
      t[i * nb + j] = -tau[j] * s;
    }
    t[j * nb + j] = tau[j];
  }
  // W = Vᵀ C [nb, nc]; Y = Tᵀ W; C −= V Y, a chunk of C's columns at a time.
  const PanelsF64 vp = pack_rows_f64(v.data(), rows, nb, rows);
  double* c = a + (k + nb) * m + k;
  std::vector<double> w(static_cast<size_t>(nb * nc)), y(static_cast<size_t>(nb * nc));
  gemm_f64_panels(vp, pack_rows_f64(c, m, nc, rows), w.data(), nc);
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t l = 0; l <= i; ++l) {
      const double tli = t[l * nb + i];
      for (int64_t q = 0; q < nc; ++q) y[i * nc + q] += tli * w[l * nc + q];
    }
  const PanelsF64 vrows = pack_columns_f64(v.data(), rows, nb, rows);  // lanes: V's rows
  constexpr int64_t kChunk = 256;
  std::vector<double> zc;
  for (int64_t c0 = 0; c0 < nc; c0 += kChunk) {
    const int64_t cc = std::min(kChunk, nc - c0);
    zc.assign(static_cast<size_t>(cc * rows), 0.0);  // zc[q, r] = (V Y)[r, c0 + q]
    gemm_f64_panels(pack_columns_f64(y.data() + c0, nc, nb, cc), vrows, zc.data(), rows);
#pragma omp parallel for schedule(static) if (num_threads() > 1 && cc * rows > 65536)
    for (int64_t q = 0; q < cc; ++q) {
      double* col = c + (c0 + q) * m;
      const double* zq = zc.data() + q * rows;
      for (int64_t r = 0; r < rows; ++r) col[r] -= zq[r];
    }
  }
}

// The upper bidiagonal (d, e) of the square matrix a [n,n] (column-major, destroyed): a left
// reflection zeroes column k below the diagonal, a right one row k right of the superdiagonal.
void bidiagonalise(std::vector<double>& a, int64_t n, std::vector<double>& d,
                   std::vector<double>& e) {
  std::vector<double> u(n), w(n);
  for (int64_t k = 0; k < n; ++k) {
    double* col = &a[k * n + k];
    const double tl = householder(col, n - k);
    d[k] = col[0];
#pragma omp parallel for schedule(static) if (num_threads() > 1 && (n - k) * (n - k) > 65536)
    for (int64_t j = k + 1; j < n; ++j) reflect(tl, col, &a[j * n + k], n - k);
    if (k + 1 >= n) break;
    const int64_t len = n - k - 1;  // row k, columns k+1..n−1, gathered
    for (int64_t j = 0; j < len; ++j) u[j] = a[(k + 1 + j) * n + k];
    const double tr = householder(u.data(), len);
    e[k] = u[0];
    u[0] = 1;
    if (tr == 0) continue;
    // Rows i > k: A[i, k+1:] ← A[i, k+1:] − τ (A[i, k+1:]·u) uᵀ. w = A u by row blocks (each w[i]
    // summed over j in order by one thread), then the rank-1 update by columns.
    const int64_t r0 = k + 1, nr = n - r0;
#pragma omp parallel if (num_threads() > 1 && nr * len > 65536)
    {
      const int nt = team_size(), me = team_index();
      const int64_t lo = r0 + nr * me / nt, hi = r0 + nr * (me + 1) / nt;
      for (int64_t i = lo; i < hi; ++i) w[i] = 0;
      for (int64_t j = 0; j < len; ++j) {
        const double* cj = &a[(r0 + j) * n];
        const double uj = u[j];
        for (int64_t i = lo; i < hi; ++i) w[i] += cj[i] * uj;
      }
#pragma omp barrier
#pragma omp for schedule(static)
      for (int64_t j = 0; j < len; ++j) {
        double* cj = &a[(r0 + j) * n];
        const double s = tr * u[j];
        for (int64_t i = r0; i < n; ++i) cj[i] -= s * w[i];
      }
    }
  }
}

}  // namespace

void householder_qr(std::vector<double>& a, int64_t m, int64_t n) {
  if (m < n || static_cast<int64_t>(a.size()) != m * n)
    throw std::invalid_argument(
        "householder_qr: need a column-major m x n matrix with m >= n, got " +
        std::to_string(a.size()) + " values for " + std::to_string(m) + " x " + std::to_string(n));
  for (int64_t k = 0; k < n; k += kPanel) qr_panel(a.data(), m, n, k);
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
