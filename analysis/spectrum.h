// Singular values and numerical rank of a log-probability matrix A [N,V] in double precision: the
// instrument behind `mosgrad rank` and `mosgrad bottleneck-demo` (the softmax bottleneck, Yang et
// al. 2017: a softmax head's A = H Wᵀ + b 1ᵀ − lse 1ᵀ... has rank ≤ d+2, a mixture of softmaxes
// not).
//
// How: σ from A itself (analysis/svd.h: Householder QR, bidiagonalisation, QL on the Golub–Kahan
// form), accurate to ~ε·σ_max, and the standard tolerance σ_max·max(N,V)·ε.
//
// Why not the Gram (kept for comparison and the benchmark): forming A Aᵀ squares the condition number, so its eigenvalues are accurate only to
// ε·λ_max and σ = sqrt(λ) to ~sqrt(ε)·σ_max; the only threshold it supports is
// σ_max·sqrt(max(N,V)·ε) (1.5e-6·σ_max at V = 10,000), and every σ between that and the standard
// tolerance is lost: a tiny MoS model over 3,000 contexts read 59, below the softmax bound d+2 =
// 66, where an SVD counts 822.
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

// Eigenvalues of the symmetric n×n matrix a (row-major, both triangles filled; it is overwritten),
// in descending order. Householder reduction to tridiagonal form, then implicit QL with Wilkinson
// shifts; O(n³) and backward stable. Throws std::runtime_error if QL does not converge.
std::vector<double> symmetric_eigenvalues(std::vector<double> a, int64_t n);

// Eigenvalues of the symmetric tridiagonal (d, e) by the implicit QL method with Wilkinson shifts
// (Golub & Van Loan §8.3.5; the tqli of Numerical Recipes without eigenvectors). On entry e[i]
// couples i and i+1, e[n-1] = 0; d is overwritten with the eigenvalues (in no particular order).
// An off-diagonal entry deflates when it is below ε·(|d_i| + |d_i+1|) or below abs_tol.
void tridiagonal_eigenvalues(std::vector<double>& d, std::vector<double>& e, int64_t n,
                             double abs_tol = 0);

// g [n,n] += y yᵀ for y [n,len] row-major (both triangles written). Each entry is summed by one
// thread in a fixed order (tensor/gemm_f64.h), so the result is identical for any thread count.
void gram_of_rows(const double* y, int64_t n, int64_t len, std::vector<double>& g);
// g [cols,cols] += xᵀ x for x [rows,cols] row-major: the V-side Gram, a block of contexts at a
// time.
void gram_accumulate(const double* x, int64_t rows, int64_t cols, std::vector<double>& g);
// The same on the lower triangle only (j <= i; entries above it are unspecified until
// mirror_lower copies the lower triangle up): for summing many blocks, mirrored once at the end.
void gram_accumulate_lower(const double* x, int64_t rows, int64_t cols, std::vector<double>& g);
void mirror_lower(std::vector<double>& g, int64_t n);

struct Spectrum {
  std::vector<double> sigma;  // singular values, descending (min(N,V) of them)
  double threshold = 0;       // σ cut: σ_max·max(N,V)·ε (from A itself) or the Gram's, above
  int64_t rank = 0;           // how many σ exceed it
};

// The spectrum from the Gram's eigenvalues (any order) of an N×V matrix, at the Gram's threshold
// σ_max·sqrt(max(N,V)·ε): what `rank` reported before it computed σ from A itself (kept to show
// the difference, tests/analysis/test_svd.cpp).
Spectrum spectrum_from_gram_eigenvalues(std::vector<double> lambda, int64_t N, int64_t V);

// The spectrum from singular values computed from A itself (analysis/svd.h), at the standard
// numerical-rank tolerance σ_max·max(N,V)·ε (LAPACK's, numpy.linalg.matrix_rank's, the one the
// MoS paper's rank table is comparable to).
Spectrum spectrum_from_singular_values(std::vector<double> sigma, int64_t N, int64_t V);

}  // namespace mg
