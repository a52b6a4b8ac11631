#include "analysis/householder.h"

#include <algorithm>
#include <cmath>

#include "tensor/gemm_f64.h"
#include "tensor/parallel.h"

namespace mg {

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

void reflect(double tau, const double* v, double* c, int64_t len) {
  double w = c[0];
  for (int64_t i = 1; i < len; ++i) w += v[i] * c[i];
  w *= tau;
  c[0] -= w;
  for (int64_t i = 1; i < len; ++i) c[i] -= w * v[i];
}

namespace {

constexpr int64_t kLeaf = 16;  // columns factored one by one; wider panels split in two

// The panel column by column: each reflection applied to the panel's other columns at once.
PanelReflectors factor_leaf(double* a, int64_t lda, int64_t rows, int64_t cols) {
  PanelReflectors p;
  p.rows = rows;
  p.k = std::min(rows, cols);
  const int64_t k = p.k;
  std::vector<double> tau(k);
  for (int64_t j = 0; j < k; ++j) {
    double* col = a + j * lda + j;
    tau[j] = householder(col, rows - j);
    // The panel's other columns are independent of one another: one thread each.
#pragma omp parallel for schedule(static) if (num_threads() > 1 && (rows - j) * (cols - j) > 65536)
    for (int64_t c = j + 1; c < cols; ++c) reflect(tau[j], col, a + c * lda + j, rows - j);
  }
  p.v.assign(static_cast<size_t>(rows * k), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    p.v[j * rows + j] = 1;
    std::copy(a + j * lda + j + 1, a + j * lda + rows, p.v.begin() + j * rows + j + 1);
  }
  // T (upper triangular): T_jj = τ_j, T[0:j, j] = −τ_j T[0:j, 0:j] (V[:, 0:j]ᵀ v_j).
  p.t.assign(static_cast<size_t>(k * k), 0.0);
  std::vector<double> z(k);
  for (int64_t j = 0; j < k; ++j) {
#pragma omp parallel for schedule(static) if (num_threads() > 1 && (rows - j) * j > 65536)
    for (int64_t i = 0; i < j; ++i) {
      double s = 0;
      for (int64_t r = j; r < rows; ++r) s += p.v[i * rows + r] * p.v[j * rows + r];
      z[i] = s;
    }
    for (int64_t i = 0; i < j; ++i) {
      double s = 0;
      for (int64_t l = i; l < j; ++l) s += p.t[l * k + i] * z[l];
      p.t[j * k + i] = -tau[j] * s;
    }
    p.t[j * k + j] = tau[j];
  }
  return p;
}

}  // namespace

PanelReflectors factor_panel(double* a, int64_t lda, int64_t rows, int64_t cols) {
  if (cols <= kLeaf || rows <= kLeaf) return factor_leaf(a, lda, rows, cols);
  // Recursively (Elmroth & Gustavson 2000): the left half factored, its reflections applied to
  // the right half as matrix products, the right half factored below the left half's rows, and
  // the two compact WY forms joined: Q₁Q₂ = I − V T Vᵀ with V = [V₁ V₂], T = [T₁ T₁₂; 0 T₂],
  // T₁₂ = −T₁ (V₁ᵀ V₂) T₂. The column-by-column work then stays within leaves of kLeaf columns.
  const int64_t c1 = (cols / 2 + 7) / 8 * 8;
  const PanelReflectors p1 = factor_panel(a, lda, rows, c1);
  apply_qt_left(p1, a + c1 * lda, lda, cols - c1);
  const int64_t k1 = p1.k;
  if (k1 == rows) return p1;  // no rows left below the left half's
  const PanelReflectors p2 = factor_panel(a + c1 * lda + k1, lda, rows - k1, cols - c1);
  const int64_t k2 = p2.k, k = k1 + k2;
  PanelReflectors p;
  p.rows = rows;
  p.k = k;
  p.v.assign(static_cast<size_t>(rows * k), 0.0);
  std::copy(p1.v.begin(), p1.v.end(), p.v.begin());
  for (int64_t j = 0; j < k2; ++j)
    std::copy(p2.v.begin() + j * (rows - k1), p2.v.begin() + (j + 1) * (rows - k1),
              p.v.begin() + (k1 + j) * rows + k1);
  // M = V₁ᵀ V₂ [k1, k2]: V₂ is zero above row k1, so only V₁'s rows from k1 on meet it.
  std::vector<double> m(static_cast<size_t>(k1 * k2));
  gemm_f64_lanes({p1.v.data() + k1, k1, rows - k1, rows, 1},
                 pack_rows_f64(p2.v.data(), rows - k1, k2, rows - k1), m.data(), k2);
  p.t.assign(static_cast<size_t>(k * k), 0.0);
  for (int64_t j = 0; j < k1; ++j)
    std::copy(p1.t.begin() + j * k1, p1.t.begin() + (j + 1) * k1, p.t.begin() + j * k);
  for (int64_t j = 0; j < k2; ++j)
    std::copy(p2.t.begin() + j * k2, p2.t.begin() + (j + 1) * k2, p.t.begin() + (k1 + j) * k + k1);
  // T₁₂ = −T₁ (M T₂): first M T₂ [k1, k2], then T₁ times it.
  std::vector<double> mt(static_cast<size_t>(k1 * k2), 0.0);
  for (int64_t i = 0; i < k1; ++i)
    for (int64_t j = 0; j < k2; ++j) {
      double s = 0;
      for (int64_t l = 0; l <= j; ++l) s += m[i * k2 + l] * p2.t[j * k2 + l];
      mt[i * k2 + j] = s;
    }
  for (int64_t i = 0; i < k1; ++i)
    for (int64_t j = 0; j < k2; ++j) {
      double s = 0;
      for (int64_t l = i; l < k1; ++l) s += p1.t[l * k1 + i] * mt[l * k2 + j];
      p.t[(k1 + j) * k + i] = -s;
    }
  return p;
}

namespace {

// y [n, k] = w [n, k] T, row by row (T upper triangular: y_i = Σ_{l ≤ i} w_l T[l, i]): both
// applications' middle step, Tᵀ W as (Wᵀ T)ᵀ from the left, W T from the right.
std::vector<double> times_t(const PanelReflectors& p, const std::vector<double>& w, int64_t n) {
  const int64_t k = p.k;
  std::vector<double> y(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) {
      double s = 0;
      for (int64_t l = 0; l <= i; ++l) s += w[r * k + l] * p.t[i * k + l];
      y[r * k + i] = s;
    }
  return y;
}

}  // namespace

void apply_qt_left(const PanelReflectors& p, double* c, int64_t ldc, int64_t nc) {
  apply_qt_left_split(p, 0, nullptr, 0, c, ldc, nc);
}

void apply_qt_left_split(const PanelReflectors& p, int64_t split, double* top, int64_t ldt,
                         double* bottom, int64_t ldb, int64_t nc) {
  const int64_t rows = p.rows, k = p.k, low = rows - split;
  if (nc == 0 || k == 0) return;
  // Wᵀ = (Vᵀ c)ᵀ [nc, k], the bottom's columns read in place, the top's few rows added by loops;
  // Yᵀ = (Tᵀ W)ᵀ; then bottom −= V_bottom Y in one product that subtracts as it goes, top −=
  // V_top Y by loops.
  std::vector<double> w(static_cast<size_t>(nc * k));
  const double* v_low = p.v.data() + split;
  gemm_f64_lanes({bottom, nc, low, ldb, 1}, pack_rows_f64(v_low, rows, k, low), w.data(), k);
  for (int64_t q = 0; q < nc; ++q)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < split; ++i) w[q * k + j] += p.v[j * rows + i] * top[q * ldt + i];
  const std::vector<double> y = times_t(p, w, nc);
  gemm_f64_panels_subtract(pack_rows_f64(y.data(), k, nc, k), pack_columns_f64(v_low, rows, k, low),
                           bottom, ldb);
  for (int64_t q = 0; q < nc; ++q)
    for (int64_t i = 0; i < split; ++i) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += p.v[j * rows + i] * y[q * k + j];
      top[q * ldt + i] -= s;
    }
}

void apply_q_right(const PanelReflectors& p, double* c, int64_t ldc, int64_t nr) {
  const int64_t cols = p.rows, k = p.k;
  if (nr == 0 || k == 0) return;
  // W = c V [nr, k], c's rows read in place; Y = W T; then c −= Y Vᵀ, subtracting as it goes.
  std::vector<double> w(static_cast<size_t>(nr * k));
  gemm_f64_lanes({c, nr, cols, 1, ldc}, pack_rows_f64(p.v.data(), cols, k, cols), w.data(), k);
  const std::vector<double> y = times_t(p, w, nr);
  gemm_f64_panels_subtract(pack_columns_f64(p.v.data(), cols, k, cols),
                           pack_rows_f64(y.data(), k, nr, k), c, ldc);
}

}  // namespace mg
