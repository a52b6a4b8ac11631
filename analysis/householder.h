// Householder reflections, one at a time and a panel at a time, in double: the orthogonal steps
// of the singular values (analysis/svd.h: the QR of a tall matrix, and TallQR's fold of a block of
// rows into R, whose panels have a structure of their own, below) and of the reduction to
// bidiagonal form (analysis/bidiagonal.h). Every step is a reflection, so every step is backward
// stable (Golub & Van Loan §5.1): the values computed are those of a matrix within ~ε·‖A‖ of the
// input.
//
// Storage is column-major (column j at [j·ld]): a reflection then runs along contiguous memory.
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

// The reflector H = I − τ v vᵀ (v₀ = 1) that maps x [len] onto its first axis (LAPACK's dlarfg):
// on return x₀ holds the image ∓‖x‖ and x₁.. hold v₁..; τ = 0 when x is already on that axis.
double householder(double* x, int64_t len);
// The same for an x whose first element lies apart from the rest: x = [head; tail [tail_len]].
double householder_split(double& head, double* tail, int64_t tail_len);

// c ← H c for the reflector (τ, v) stored as in householder(): v₀ = 1, v₁.. = v[1..len).
void reflect(double tau, const double* v, double* c, int64_t len);

// The product Q = H₀ H₁ … H_{k−1} of a panel's k reflectors in compact WY form, Q = I − V T Vᵀ
// (Schreiber & Van Loan 1989): V [rows, k] explicit (column j: j zeros, a 1, then v_j), T [k, k]
// upper triangular. Applying Q to many columns is then two matrix products (tensor/gemm_f64.h).
struct PanelReflectors {
  int64_t rows = 0, k = 0;
  std::vector<double> v;  // column-major [rows, k]
  std::vector<double> t;  // column-major [k, k], upper triangular
};

// The QR of the panel a [rows, cols] (column-major, leading dimension lda), in place: R in its
// upper triangle, the reflectors' tails below it (as LAPACK's dgeqr2 leaves them); k =
// min(rows, cols) reflectors, returned in compact WY form.
PanelReflectors factor_panel(double* a, int64_t lda, int64_t rows, int64_t cols);

// c [p.rows, nc] (column-major, ldc) ← Qᵀ c = c − V Tᵀ (Vᵀ c): the panel's reflections applied
// from the left to the columns right of it.
void apply_qt_left(const PanelReflectors& p, double* c, int64_t ldc, int64_t nc);

// c [nr, p.rows] (column-major, ldc) ← c Q = c − (c V) T Vᵀ: applied from the right, to rows.
void apply_q_right(const PanelReflectors& p, double* c, int64_t ldc, int64_t nr);

// The QR of a triangle stacked on a block of rows, [R; B] (LAPACK's dtpqrt): column j's
// reflection involves only R's row j and B, so V's top part is the identity and its B part is all
// that is stored, in B's columns. factor_stacked factors the k columns of top (the triangle, [k,k]
// column-major, ldt, updated to the new R) over b ([count, k], ldb, left holding V's B part), and
// returns T [k,k] (column-major, upper triangular): Q = I − V T Vᵀ.
std::vector<double> factor_stacked(double* top, int64_t ldt, double* b, int64_t ldb, int64_t count,
                                   int64_t k);
// Qᵀ applied to nc columns of [top; b]: top [k, nc] (ldt; R's rows of the panel) over b [count,
// nc] (ldb), for the reflectors with B parts v [count, k] (ldv) and T [k,k].
void apply_stacked_qt(const double* v, int64_t ldv, int64_t count, int64_t k,
                      const std::vector<double>& t, double* top, int64_t ldt, double* b,
                      int64_t ldb, int64_t nc);

}  // namespace mg
