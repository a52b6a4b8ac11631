// Singular values and numerical rank of a log-probability matrix A [N,V] in double precision: the
// instrument behind `mosgrad rank` and `mosgrad bottleneck-demo` (the softmax bottleneck, Yang et
// al. 2017: a softmax head's A = H Wᵀ + b 1ᵀ − lse 1ᵀ... has rank ≤ d+2, a mixture of softmaxes
// not).
//
// How: the Gram matrix of A's smaller side (A Aᵀ [N,N] when N ≤ V, else Aᵀ A [V,V], accumulated a
// block of rows at a time so A never has to be held whole), its eigenvalues λ by Householder
// tridiagonalisation and the implicit QL method (both hand-written, double), and σ = sqrt(λ).
//
// The rank threshold. Forming the Gram squares the condition number: its eigenvalues are accurate
// to about ε·λ_max (backward stability), so the σ of a rank-deficient A come out near
// sqrt(ε)·σ_max ≈ 1.5e-8·σ_max, far above the usual SVD threshold σ_max·max(N,V)·ε. Applying that
// threshold to σ would call every softmax model full rank. We apply it to the quantity the
// eigensolver computed: λ > λ_max·max(N,V)·ε, i.e. σ > σ_max·sqrt(max(N,V)·ε) (for V = 10,000
// that is σ > 1.5e-6·σ_max). A softmax model's null directions (λ ~ ε·λ_max) fall well below it.
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

// Eigenvalues of the symmetric n×n matrix a (row-major, both triangles filled; it is overwritten),
// in descending order. Householder reduction to tridiagonal form, then implicit QL with Wilkinson
// shifts; O(n³) and backward stable. Throws std::runtime_error if QL does not converge.
std::vector<double> symmetric_eigenvalues(std::vector<double> a, int64_t n);

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
  double threshold = 0;       // σ cut: σ_max·sqrt(max(N,V)·ε), see above
  int64_t rank = 0;           // how many σ exceed it
};

// The spectrum from the Gram's eigenvalues (any order) of an N×V matrix.
Spectrum spectrum_from_gram_eigenvalues(std::vector<double> lambda, int64_t N, int64_t V);

// The whole path for a matrix held in memory: a [N,V] row-major.
Spectrum singular_values(const std::vector<double>& a, int64_t N, int64_t V);

}  // namespace mg
