// A square matrix reduced to upper bidiagonal form B = Uᵀ A W by orthogonal transformations (so B
// has A's singular values; analysis/svd.h takes them from there). Two ways, the same values:
//
//  - bidiagonalise_one_stage: Golub–Kahan, a left reflection zeroing column k below the diagonal,
//    a right one zeroing row k right of the superdiagonal, k = 0, 1, … The textbook algorithm and
//    the reference; but each step reads the whole trailing matrix twice as matrix-vector products,
//    so it runs at memory speed: tens of minutes for the 10,000 × 10,000 factor of all of PTB
//    valid.
//  - bidiagonalise (two stages, as LAPACK's dgesvd_2stage and PLASMA do): first to an upper band
//    of width b by panels of b reflections, QR on a column panel then LQ on a row panel, each
//    applied to the rest as matrix products (tensor/gemm_f64.h, near the double peak); then the
//    band to bidiagonal by Givens rotations chasing each bulge down the band (Kaufman's scheme,
//    LAPACK's dgbbrd): O(n²·b) work on a band that fits in cache.
//
// Storage is column-major (column j at [j·n]).
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

// The upper bidiagonal (d [n], e [n−1]) of the square a [n,n] (destroyed), two stages.
void bidiagonalise(std::vector<double>& a, int64_t n, std::vector<double>& d,
                   std::vector<double>& e);

// The same, one stage (the reference the two-stage path is tested against).
void bidiagonalise_one_stage(std::vector<double>& a, int64_t n, std::vector<double>& d,
                             std::vector<double>& e);

// The two stages, for tests and the benchmark: a [n,n] → an upper band of width b in place
// (a[i, j] for i ≤ j ≤ i + b; entries outside the band are left undefined); then the band (read
// from a) → (d, e).
void reduce_to_band(std::vector<double>& a, int64_t n, int64_t b);
void band_to_bidiagonal(const std::vector<double>& a, int64_t n, int64_t b, std::vector<double>& d,
                        std::vector<double>& e);

}  // namespace mg
