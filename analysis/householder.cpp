#include "analysis/householder.h"

#include <algorithm>
#include <cmath>

#include "tensor/gemm_f64.h"
#include "tensor/parallel.h"

namespace mg {

double householder(double* x, int64_t len) {
  return householder_split(x[0], x + 1, len - 1);
}

double householder_split(double& head, double* tail, int64_t tail_len) {
  double tail_sq = 0;
  for (int64_t i = 0; i < tail_len; ++i) tail_sq += tail[i] * tail[i];
  if (tail_sq == 0) return 0;
  const double alpha = head, beta = -std::copysign(std::sqrt(alpha * alpha + tail_sq), alpha);
  const double scale = 1 / (alpha - beta);
  for (int64_t i = 0; i < tail_len; ++i) tail[i] *= scale;
  head = beta;
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

// Column j of T (upper triangular, column-major [k, k]) from z = V[:, 0:j]ᵀ v_j:
// T_jj = τ_j, T[0:j, j] = −τ_j T[0:j, 0:j] z.
void set_t_column(std::vector<double>& t, int64_t k, int64_t j, double tau,
                  const std::vector<double>& z) {
  for (int64_t i = 0; i < j; ++i) {
    double s = 0;
    for (int64_t l = i; l < j; ++l) s += t[l * k + i] * z[l];
    t[j * k + i] = -tau * s;
  }
  t[j * k + j] = tau;
}

// The T of two panels' reflectors joined (Q₁Q₂ = I − V T Vᵀ, V = [V₁ V₂]): T = [T₁ T₁₂; 0 T₂],
// T₁₂ = −T₁ (M T₂), for M = V₁ᵀ V₂ [k1, k2] (row-major).
std::vector<double> joined_t(const std::vector<double>& t1, int64_t k1,
                             const std::vector<double>& t2, int64_t k2,
                             const std::vector<double>& m) {
  const int64_t k = k1 + k2;
  std::vector<double> t(static_cast<size_t>(k * k), 0.0);
  for (int64_t j = 0; j < k1; ++j) std::copy(&t1[j * k1], &t1[j * k1] + k1, &t[j * k]);
  for (int64_t j = 0; j < k2; ++j) std::copy(&t2[j * k2], &t2[j * k2] + k2, &t[(k1 + j) * k + k1]);
  std::vector<double> mt(static_cast<size_t>(k1 * k2), 0.0);  // M T₂
  for (int64_t i = 0; i < k1; ++i)
    for (int64_t j = 0; j < k2; ++j) {
      double s = 0;
      for (int64_t l = 0; l <= j; ++l) s += m[i * k2 + l] * t2[j * k2 + l];
      mt[i * k2 + j] = s;
    }
  for (int64_t i = 0; i < k1; ++i)
    for (int64_t j = 0; j < k2; ++j) {
      double s = 0;
      for (int64_t l = i; l < k1; ++l) s += t1[l * k1 + i] * mt[l * k2 + j];
      t[(k1 + j) * k + i] = -s;
    }
  return t;
}

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
    set_t_column(p.t, k, j, tau[j], z);
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
  p.t = joined_t(p1.t, k1, p2.t, k2, m);
  return p;
}

namespace {

// y [n, k] = w [n, k] T (T upper triangular: y_i = Σ_{l ≤ i} w_l T[l, i]): both applications'
// middle step, Tᵀ W as (Wᵀ T)ᵀ from the left, W T from the right. One product on the double
// GEMM, T's zeros below the diagonal included: n·k² multiply-adds, which as a scalar loop had cost
// as much as the panel's two large products once k grew past ~100 columns.
std::vector<double> times_t(const std::vector<double>& t, int64_t k, const std::vector<double>& w,
                            int64_t n) {
  std::vector<double> y(static_cast<size_t>(n * k));
  // Lane i of T's packing is T's column i (t[i*k + l], l = 0..k), so y[r, i] = Σ_l w[r, l] T[l, i].
  gemm_f64_panels(pack_rows_f64(w.data(), k, n, k), pack_rows_f64(t.data(), k, k, k), y.data(), k);
  return y;
}

}  // namespace

void apply_qt_left(const PanelReflectors& p, double* c, int64_t ldc, int64_t nc) {
  const int64_t rows = p.rows, k = p.k;
  if (nc == 0 || k == 0) return;
  // Wᵀ = (Vᵀ c)ᵀ [nc, k], c's columns read in place; Yᵀ = (Tᵀ W)ᵀ; then c −= V Y in one product
  // that subtracts as it goes.
  std::vector<double> w(static_cast<size_t>(nc * k));
  gemm_f64_lanes({c, nc, rows, ldc, 1}, pack_rows_f64(p.v.data(), rows, k, rows), w.data(), k);
  const std::vector<double> y = times_t(p.t, k, w, nc);
  gemm_f64_panels_subtract(pack_rows_f64(y.data(), k, nc, k),
                           pack_columns_f64(p.v.data(), rows, k, rows), c, ldc);
}

void apply_q_right(const PanelReflectors& p, double* c, int64_t ldc, int64_t nr) {
  const int64_t cols = p.rows, k = p.k;
  if (nr == 0 || k == 0) return;
  // W = c V [nr, k], c's rows read in place; Y = W T; then c −= Y Vᵀ, subtracting as it goes.
  std::vector<double> w(static_cast<size_t>(nr * k));
  gemm_f64_lanes({c, nr, cols, 1, ldc}, pack_rows_f64(p.v.data(), cols, k, cols), w.data(), k);
  const std::vector<double> y = times_t(p.t, k, w, nr);
  gemm_f64_panels_subtract(pack_columns_f64(p.v.data(), cols, k, cols),
                           pack_rows_f64(y.data(), k, nr, k), c, ldc);
}

// ---- [R; B]: a triangle stacked on a block of rows (TallQR's fold) ----

namespace {

// T of the reflectors whose B parts are the columns of v (count x k, ldv), the top parts being
// the identity: T_jj = τ_j, T[0:j, j] = −τ_j T[0:j, 0:j] (V[:, 0:j]ᵀ v_j), where V[:, i]ᵀ v_j is
// the B parts' dot product (the identity's columns are orthogonal).
std::vector<double> stacked_t(const double* v, int64_t ldv, int64_t count, int64_t k,
                              const std::vector<double>& tau) {
  std::vector<double> t(static_cast<size_t>(k * k), 0.0), z(k);
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t i = 0; i < j; ++i) {
      double s = 0;
      for (int64_t r = 0; r < count; ++r) s += v[i * ldv + r] * v[j * ldv + r];
      z[i] = s;
    }
    set_t_column(t, k, j, tau[j], z);
  }
  return t;
}

// A leaf of columns, one by one: the reflection of column j maps [top_jj; b_j] onto its first
// axis (its B part left in b_j) and is applied to the columns right of it, one thread each.
std::vector<double> factor_stacked_leaf(double* top, int64_t ldt, double* b, int64_t ldb,
                                        int64_t count, int64_t k) {
  std::vector<double> tau(k);
  for (int64_t j = 0; j < k; ++j) {
    double* v = b + j * ldb;
    tau[j] = householder_split(top[j * ldt + j], v, count);
#pragma omp parallel for schedule(static) if (num_threads() > 1 && count * (k - j) > 65536)
    for (int64_t c = j + 1; c < k; ++c) {
      double* bc = b + c * ldb;
      double w = top[c * ldt + j];
      for (int64_t r = 0; r < count; ++r) w += v[r] * bc[r];
      w *= tau[j];
      top[c * ldt + j] -= w;
      for (int64_t r = 0; r < count; ++r) bc[r] -= w * v[r];
    }
  }
  return stacked_t(b, ldb, count, k, tau);
}

}  // namespace

std::vector<double> factor_stacked(double* top, int64_t ldt, double* b, int64_t ldb, int64_t count,
                                   int64_t k) {
  if (k <= kLeaf) return factor_stacked_leaf(top, ldt, b, ldb, count, k);
  // In halves, as factor_panel: the left half, its reflections applied to the right half (top
  // rows 0..k1 and B), the right half (its triangle top[k1:, k1:] stacked on B's right columns),
  // and T = [T₁ T₁₂; 0 T₂] with T₁₂ = −T₁ (V₁ᵀ V₂) T₂, V₁ᵀ V₂ = B₁ᵀ B₂.
  const int64_t k1 = (k / 2 + 7) / 8 * 8, k2 = k - k1;
  const std::vector<double> t1 = factor_stacked(top, ldt, b, ldb, count, k1);
  apply_stacked_qt(b, ldb, count, k1, t1, top + k1 * ldt, ldt, b + k1 * ldb, ldb, k2);
  const std::vector<double> t2 =
      factor_stacked(top + k1 * ldt + k1, ldt, b + k1 * ldb, ldb, count, k2);
  std::vector<double> m(static_cast<size_t>(k1 * k2));
  gemm_f64_lanes({b, k1, count, ldb, 1}, pack_rows_f64(b + k1 * ldb, ldb, k2, count), m.data(), k2);
  return joined_t(t1, k1, t2, k2, m);
}

void apply_stacked_qt(const double* v, int64_t ldv, int64_t count, int64_t k,
                      const std::vector<double>& t, double* top, int64_t ldt, double* b,
                      int64_t ldb, int64_t nc) {
  if (nc == 0 || k == 0) return;
  // Wᵀ = (Vᵀ c)ᵀ [nc, k] = topᵀ + (B's columns read in place)ᵀ V_B; Y = W T; top −= Yᵀ (V's top
  // part is the identity); B −= V_B Yᵀ in one product that subtracts as it goes.
  std::vector<double> w(static_cast<size_t>(nc * k));
  gemm_f64_lanes({b, nc, count, ldb, 1}, pack_rows_f64(v, ldv, k, count), w.data(), k);
  for (int64_t q = 0; q < nc; ++q)
    for (int64_t j = 0; j < k; ++j) w[q * k + j] += top[q * ldt + j];
  const std::vector<double> y = times_t(t, k, w, nc);
  for (int64_t q = 0; q < nc; ++q)
    for (int64_t j = 0; j < k; ++j) top[q * ldt + j] -= y[q * k + j];
  gemm_f64_panels_subtract(pack_rows_f64(y.data(), k, nc, k), pack_columns_f64(v, ldv, k, count), b,
                           ldb);
}

}  // namespace mg
