// Double-precision matrix products for the instruments that measure the softmax bottleneck: the
// head's logits recomputed in double (analysis/head_double.cpp), the Householder panels' products
// in the QR and the reduction to bidiagonal form (analysis/householder.cpp), and the Gram matrix
// AᵀA that analysis/spectrum.cpp keeps for comparison (over all of PTB valid, 73,760 x 10,000:
// 3.7e12 multiply-adds, an hour as dot products, a minute here).
//
// All of them are one loop: an 8 x 24 tile of C held in 24 AVX-512 registers (8 doubles each)
// while k runs, reading b packed as panels of 8 (panel g holds the 8 columns (or rows) 8g..8g+7 of
// its matrix, k-major, element (k, c) at [k*8 + c], zero-padded past the edge: Goto & van de
// Geijn's packing) and a packed the same way or, for gemm_f64_lanes, read where it lies. k runs
// whole in one pass (a few thousand at most), except in gemm_f64_lanes, whose k (a panel's height,
// up to 20,000) goes in blocks whose partial sums are added to C in order. A portable loop replaces
// the kernel where AVX-512 is missing. Every C element is one thread's sums over k in increasing
// order: the bits do not depend on the thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

// Panels of 8 "lanes" (columns of C to be) over k: data[(g*k_len + k)*8 + c].
struct PanelsF64 {
  int64_t lanes = 0, k_len = 0;  // lanes: how many real columns; padded up to 8 per panel
  std::vector<double> data;
  int64_t panels() const { return (lanes + 7) / 8; }
  const double* panel(int64_t g) const { return data.data() + g * k_len * 8; }
};

// Lane j is row j of a row-major [lanes, k_len] matrix (src[j*ld + k]): the head's W [V,E] for
// its logits W h, or a block of contexts.
PanelsF64 pack_rows_f64(const double* src, int64_t ld, int64_t lanes, int64_t k_len);
// Lane j is column j of a row-major [k_len, lanes] matrix (src[k*ld + j]): the Gram's operand.
PanelsF64 pack_columns_f64(const double* src, int64_t ld, int64_t k_len, int64_t lanes);

// C[M,N] = A·Bᵀ: C[i,j] = Σ_k a_i[k] b_j[k], for a the lanes of `a` (M = a.lanes) and b of `b`
// (N = b.lanes), with the same k_len. C row-major with leading dimension ldc.
void gemm_f64_panels(const PanelsF64& a, const PanelsF64& b, double* C, int64_t ldc);

// The same product subtracted: C[i,j] −= Σ_k a_i[k] b_j[k] (a Householder panel's update of the
// matrix it is applied to, analysis/householder.cpp, with no intermediate product).
void gemm_f64_panels_subtract(const PanelsF64& a, const PanelsF64& b, double* C, int64_t ldc);

// A matrix's lanes read where they lie, not packed: lane i's element k at
// data[i*lane_stride + k*k_stride]. For the large operand of a product with a thin one (the
// trailing matrix a panel of reflections is applied to), packing it would cost as much memory
// traffic as the product.
struct LanesF64 {
  const double* data = nullptr;
  int64_t lanes = 0, k_len = 0, lane_stride = 0, k_stride = 0;
};
void gemm_f64_lanes(const LanesF64& a, const PanelsF64& b, double* C, int64_t ldc);

// G[i,j] += Σ_k x_i[k] x_j[k] for j <= i (the lower triangle; some entries above the diagonal
// may be written too, with the same sums), G row-major [n,n], n = x.lanes.
void syrk_f64_lower(const PanelsF64& x, double* G, int64_t ldg);

}  // namespace mg
