// Singular values computed from the matrix itself, never from its Gram matrix, so that they are
// accurate to about ε·σ_max (Golub & Van Loan §8.6): the accuracy the standard numerical-rank
// tolerance σ_max·max(N,V)·ε assumes. (The Gram AᵀA squares the condition number and resolves
// only σ above ~sqrt(ε)·σ_max: a MoS model's rank of 822 read as 59 — analysis/spectrum.h.)
//
// The path, all in double, all orthogonal transformations (backward stable):
//   1. a tall m×n matrix (m ≥ n) -> R, its n×n triangular factor (blocked QR: each panel of 48
//      columns factored recursively, in halves down to leaves of 16 columns, then applied to the
//      rest as I − V T Vᵀ with two double GEMMs, analysis/householder.h); taller than memory
//      allows: TallQR, a block of rows at a time (R of [R; next rows], in panels of 144 columns
//      whose reflectors' top part is known to be the identity: householder.h's factor_stacked).
//   2. R -> an upper bidiagonal B (analysis/bidiagonal.h: to a band of width 96 by panels, then
//      to bidiagonal by Givens rotations chasing the bulges down the band).
//   3. the singular values of B are the non-negative eigenvalues of the 2n×2n symmetric
//      tridiagonal matrix with zero diagonal and B's entries d₀, e₀, d₁, e₁, … beside it (the
//      Golub–Kahan form), found by the implicit QL method, whose absolute error is ~ε·‖B‖.
// Storage is column-major (column j at [j·m]): every reflection then runs along contiguous
// memory. A row-major [N,V] matrix with N ≤ V is already Aᵀ in this form.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/spectrum.h"

namespace mg {

// Singular values, descending, of the m×n matrix a (column-major, m ≥ n; overwritten).
std::vector<double> singular_values_tall(std::vector<double> a, int64_t m, int64_t n);

// The triangular factor of a matrix too tall to hold: rows arrive in blocks (row-major [rows,n]);
// R is kept (n×n) and each block is folded in as the QR of [R; block].
class TallQR {
 public:
  explicit TallQR(int64_t n);
  void add_rows(const double* rows, int64_t count);  // row-major [count, n]
  std::vector<double> singular_values() const;       // of every row added so far, descending
  // Frees the buffer kept between folds (count x n doubles, 1.6 GB for PTB valid's blocks) once
  // no more rows will come, before the reduction of R.
  void release_block() { std::vector<double>().swap(block_); }
  int64_t rows_added() const { return rows_; }

 private:
  int64_t n_, rows_ = 0;
  std::vector<double> r_;      // column-major n×n, upper triangular
  std::vector<double> block_;  // the block being folded in, column-major [count, n]
};

// The steps, for tests: the blocked QR of a (column-major m×n, m ≥ n) in place (R in its upper
// triangle, the reflectors below, as LAPACK's dgeqrf leaves them), and the singular values of an
// upper bidiagonal matrix (diagonal d [n], superdiagonal e [n−1]).
void householder_qr(std::vector<double>& a, int64_t m, int64_t n);
std::vector<double> bidiagonal_singular_values(const std::vector<double>& d,
                                               const std::vector<double>& e);

// The whole path for a matrix held in memory: a [N,V] row-major; σ from A itself
// (singular_values_tall), its numerical rank at spectrum_from_singular_values's tolerance.
Spectrum singular_values(const std::vector<double>& a, int64_t N, int64_t V);

}  // namespace mg
