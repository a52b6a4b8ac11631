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

PanelReflectors factor_panel(double* a, int64_t lda, int64_t rows, int64_t cols) {
  PanelReflectors p;
  p.rows = rows;
  p.k = std::min(rows, cols);
  const int64_t k = p.k;
  std::vector<double> tau(k);
  for (int64_t j = 0; j < k; ++j) {
    double* col = a + j * lda + j;
    tau[j] = householder(col, rows - j);
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

namespace {

constexpr int64_t kChunk = 256;  // columns of c updated per product, so the product stays small

// c[:, q0 + q] −= z[q, :] for the row-major z [cc, rows]: one column of c per row of z.
void subtract_columns(double* c, int64_t ldc, int64_t q0, const std::vector<double>& z, int64_t cc,
                      int64_t rows) {
#pragma omp parallel for schedule(static) if (num_threads() > 1 && cc * rows > 65536)
  for (int64_t q = 0; q < cc; ++q) {
    double* col = c + (q0 + q) * ldc;
    const double* zq = z.data() + q * rows;
    for (int64_t r = 0; r < rows; ++r) col[r] -= zq[r];
  }
}

}  // namespace

void apply_qt_left(const PanelReflectors& p, double* c, int64_t ldc, int64_t nc) {
  const int64_t rows = p.rows, k = p.k;
  if (nc == 0 || k == 0) return;
  // W = Vᵀ c [k, nc]; Y = Tᵀ W; c −= V Y, a chunk of c's columns at a time.
  std::vector<double> w(static_cast<size_t>(k * nc)), y(static_cast<size_t>(k * nc), 0.0);
  gemm_f64_panels(pack_rows_f64(p.v.data(), rows, k, rows), pack_rows_f64(c, ldc, nc, rows),
                  w.data(), nc);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t l = 0; l <= i; ++l) {
      const double tli = p.t[i * k + l];
      for (int64_t q = 0; q < nc; ++q) y[i * nc + q] += tli * w[l * nc + q];
    }
  const PanelsF64 vrows = pack_columns_f64(p.v.data(), rows, k, rows);  // lanes: V's rows
  std::vector<double> z;
  for (int64_t c0 = 0; c0 < nc; c0 += kChunk) {
    const int64_t cc = std::min(kChunk, nc - c0);
    z.assign(static_cast<size_t>(cc * rows), 0.0);  // z[q, r] = (V Y)[r, c0 + q]
    gemm_f64_panels(pack_columns_f64(y.data() + c0, nc, k, cc), vrows, z.data(), rows);
    subtract_columns(c, ldc, c0, z, cc, rows);
  }
}

void apply_q_right(const PanelReflectors& p, double* c, int64_t ldc, int64_t nr) {
  const int64_t cols = p.rows, k = p.k;
  if (nr == 0 || k == 0) return;
  // W = c V [nr, k] (lanes: c's rows); Y = W T; c −= Y Vᵀ, a chunk of c's columns at a time.
  std::vector<double> w(static_cast<size_t>(nr * k)), y(static_cast<size_t>(nr * k), 0.0);
  gemm_f64_panels(pack_columns_f64(c, ldc, cols, nr), pack_rows_f64(p.v.data(), cols, k, cols),
                  w.data(), k);
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (int64_t l = 0; l <= j; ++l) s += w[r * k + l] * p.t[j * k + l];
      y[r * k + j] = s;
    }
  const PanelsF64 yrows = pack_rows_f64(y.data(), k, nr, k);  // lanes: Y's rows
  std::vector<double> z;
  for (int64_t q0 = 0; q0 < cols; q0 += kChunk) {
    const int64_t cc = std::min(kChunk, cols - q0);
    z.assign(static_cast<size_t>(cc * nr), 0.0);  // z[q, r] = (Y Vᵀ)[r, q0 + q]
    gemm_f64_panels(pack_columns_f64(p.v.data() + q0, cols, k, cc), yrows, z.data(), nr);
    subtract_columns(c, ldc, q0, z, cc, nr);
  }
}

}  // namespace mg
