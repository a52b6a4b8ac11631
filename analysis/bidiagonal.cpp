#include "analysis/bidiagonal.h"

#include <algorithm>
#include <cmath>

#include "analysis/householder.h"
#include "tensor/parallel.h"

namespace mg {

namespace {

// The first stage's band width, its panels' width: the panels' products gain from it, the chase's
// work grows with it. bench/bench_svd --n 10000 --rows 0 --width W, 2 cores of an Intel Xeon
// (Emerald Rapids): 48 57.1 s (band 51.9, chase 5.2), 64 53.6, 96 48.1 (36.6 + 11.5), 128 57.1.
constexpr int64_t kBand = 96;

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

// The band between the two stages, in LAPACK's band storage with room for the one entry of fill
// each rotation makes: a[r, c] for c − ku ≤ r ≤ c + 1 (ku = b + 1) at [(ku + r − c) + c·ld], so
// the two entries a row rotation pairs, (r, c) and (r + 1, c), are neighbours, and a column's
// entries are contiguous for a column rotation.
struct Band {
  int64_t n, ku, ld;
  std::vector<double> ab;
  Band(int64_t n_, int64_t b)
      : n(n_), ku(b + 1), ld(b + 3), ab(static_cast<size_t>(n_ * (b + 3))) {}
  double* at(int64_t r, int64_t c) { return &ab[ku + r - c + c * ld]; }
};

// (cs, sn) with [cs sn; −sn cs] (x, y)ᵀ = (r, 0)ᵀ.
void givens(double x, double y, double& cs, double& sn) {
  double r = std::sqrt(x * x + y * y);  // hypot's care only where the squares could under/overflow
  if (!(r > 1e-150 && r < 1e150)) r = std::hypot(x, y);
  cs = x / r;
  sn = y / r;
}

// Columns c − 1 and c of rows r0..r1 ← (cs·left + sn·right, −sn·left + cs·right).
void rotate_columns(Band& m, int64_t c, int64_t r0, int64_t r1, double cs, double sn) {
  double* left = m.at(r0, c - 1);
  double* right = m.at(r0, c);
  for (int64_t i = 0; i <= r1 - r0; ++i) {
    const double x = left[i], y = right[i];
    left[i] = cs * x + sn * y;
    right[i] = cs * y - sn * x;
  }
}

// Rows r − 1 and r of columns c0..c1, the same rotation from the left.
void rotate_rows(Band& m, int64_t r, int64_t c0, int64_t c1, double cs, double sn) {
  double* p = m.at(r - 1, c0);
  const int64_t step = m.ld - 1;  // (r−1, c) → (r−1, c+1)
  for (int64_t i = 0; i <= c1 - c0; ++i, p += step) {
    const double x = p[0], y = p[1];
    p[0] = cs * x + sn * y;
    p[1] = cs * y - sn * x;
  }
}

}  // namespace

void reduce_to_band(std::vector<double>& a, int64_t n, int64_t b) {
  for (int64_t k = 0; k < n; k += b) {
    const int64_t nb = std::min(b, n - k), c0 = k + nb, w = n - c0;
    // QR of columns k..c0 (rows k..n), Qᵀ applied to the columns right of them.
    const PanelReflectors qr = factor_panel(&a[k * n + k], n, n - k, nb);
    if (w == 0) break;
    apply_qt_left(qr, &a[c0 * n + k], n, w);
    // LQ of rows k..c0 right of the panel, as the QR of their transpose P [w, nb]; the row block
    // becomes L (lower triangular in its first nb columns, zero beyond) and Q is applied from the
    // right to the rows below.
    std::vector<double> p(static_cast<size_t>(w * nb));
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t q = 0; q < w; ++q) p[j * w + q] = a[(c0 + q) * n + k + j];
    const PanelReflectors lq = factor_panel(p.data(), w, w, nb);
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t q = 0; q < w; ++q) a[(c0 + q) * n + k + j] = q <= j ? p[j * w + q] : 0.0;
    apply_q_right(lq, &a[c0 * n + c0], n, w);
  }
}

void band_to_bidiagonal(const std::vector<double>& a, int64_t n, int64_t b, std::vector<double>& d,
                        std::vector<double>& e) {
  Band m(n, b);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = std::max<int64_t>(0, c - b); r <= c; ++r) *m.at(r, c) = a[c * n + r];
  double cs, sn;
  for (int64_t i = 0; i + 2 < n; ++i) {
    // Row i's entries right of the superdiagonal, the farthest first. Zeroing a[i, j] by rotating
    // columns j−1, j fills a[j, j−1]; rotating rows j−1, j to clear it fills a[j−1, j+b], one
    // band width further on; and so on down the band until the fill falls off its end.
    for (int64_t j = std::min(i + b, n - 1); j >= i + 2; --j) {
      if (*m.at(i, j) == 0) continue;
      givens(*m.at(i, j - 1), *m.at(i, j), cs, sn);
      rotate_columns(m, j, i, j, cs, sn);
      *m.at(i, j) = 0;
      for (int64_t p = j;;) {  // the fill is at (p, p−1)
        if (*m.at(p, p - 1) == 0) break;
        givens(*m.at(p - 1, p - 1), *m.at(p, p - 1), cs, sn);
        rotate_rows(m, p, p - 1, std::min(p + b, n - 1), cs, sn);
        *m.at(p, p - 1) = 0;
        const int64_t q = p + b;  // the fill is at (p−1, q)
        if (q > n - 1 || *m.at(p - 1, q) == 0) break;
        givens(*m.at(p - 1, q - 1), *m.at(p - 1, q), cs, sn);
        rotate_columns(m, q, p - 1, q, cs, sn);
        *m.at(p - 1, q) = 0;
        p = q;
      }
    }
  }
  d.resize(n);
  e.resize(n > 0 ? n - 1 : 0);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = *m.at(i, i);
    if (i + 1 < n) e[i] = *m.at(i, i + 1);
  }
}

void bidiagonalise(std::vector<double>& a, int64_t n, std::vector<double>& d,
                   std::vector<double>& e) {
  // A band as wide as the matrix is the matrix: the one-stage path is then the shorter one.
  if (n <= 2 * kBand) return bidiagonalise_one_stage(a, n, d, e);
  reduce_to_band(a, n, kBand);
  band_to_bidiagonal(a, n, kBand, d, e);
}

void bidiagonalise_one_stage(std::vector<double>& a, int64_t n, std::vector<double>& d,
                             std::vector<double>& e) {
  d.resize(n);
  e.resize(n > 0 ? n - 1 : 0);
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

}  // namespace mg
