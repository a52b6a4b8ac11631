#include "tensor/gemm_f64.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define MG_F64_X86 1
#endif

namespace mg {

namespace {

constexpr int kTileRows = 8, kTilePanels = 3;  // a tile: 8 lanes of a x 3 panels (24 lanes) of b

// out[r][c] = Σ_k a[k*8 + r] · b_p[k*8 + c'] for the np panels b_p: the portable loop.
void tile_generic(int64_t k_len, const double* a, const double* const* b, int np,
                  double out[kTileRows][8 * kTilePanels]) {
  for (int r = 0; r < kTileRows; ++r)
    for (int c = 0; c < 8 * kTilePanels; ++c) out[r][c] = 0;
  for (int p = 0; p < np; ++p)
    for (int64_t k = 0; k < k_len; ++k)
      for (int r = 0; r < kTileRows; ++r) {
        const double av = a[k * 8 + r];
#pragma omp simd
        for (int c = 0; c < 8; ++c) out[r][8 * p + c] += av * b[p][k * 8 + c];
      }
}

#ifdef MG_F64_X86
// The same sums with 8 x 3 zmm accumulators: per k, 3 loads of b, 8 broadcasts of a, 24 FMAs
// (the FMA pipes, not the loads, are the limit), each accumulator one chain over k in order.
template <int NP>
__attribute__((target("avx512f"))) void tile_avx512(int64_t k_len, const double* a,
                                                    const double* const* b,
                                                    double out[kTileRows][8 * kTilePanels]) {
  __m512d acc[kTileRows][NP];
  for (int r = 0; r < kTileRows; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_pd();
  const double* bp[NP];
  for (int p = 0; p < NP; ++p) bp[p] = b[p];
#pragma GCC unroll 2
  for (int64_t k = 0; k < k_len; ++k) {
    __m512d bv[NP];
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_pd(bp[p] + k * 8);
#pragma GCC unroll 8
    for (int r = 0; r < kTileRows; ++r) {
      const __m512d av = _mm512_set1_pd(a[k * 8 + r]);
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_pd(av, bv[p], acc[r][p]);
    }
  }
  for (int r = 0; r < kTileRows; ++r)
    for (int p = 0; p < NP; ++p) _mm512_storeu_pd(&out[r][8 * p], acc[r][p]);
}

bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

// One tile of C: rows g*8.. of a, columns of the panels [p0, p0+np) of b.
void tile(int64_t k_len, const double* a, const double* const* b, int np,
          double out[kTileRows][8 * kTilePanels]) {
#ifdef MG_F64_X86
  if (have_avx512()) {
    if (np == 3) return tile_avx512<3>(k_len, a, b, out);
    if (np == 2) return tile_avx512<2>(k_len, a, b, out);
    return tile_avx512<1>(k_len, a, b, out);
  }
#endif
  tile_generic(k_len, a, b, np, out);
}

void check_k(const PanelsF64& a, const PanelsF64& b, const char* what) {
  if (a.k_len != b.k_len)
    throw std::invalid_argument(std::string(what) + ": operands have " + std::to_string(a.k_len) +
                                " and " + std::to_string(b.k_len) + " terms per dot product");
}

// Computes every tile of a·bᵀ that keep(gi, pj) accepts — gi a panel of a (8 rows of C), pj the
// first of up to 3 panels of b — and hands it to store(row0, col0, out, rows, cols), rows x cols
// being the part inside C. Tiles are grouped in blocks of 32 x 12 panels (256 x 96 lanes) so a
// block's panels stay in the caches while its tiles run; threads take blocks as they finish (the
// Gram's triangle makes the blocks' work uneven), which changes who computes a tile, never how.
template <typename Keep, typename Store>
void for_tiles(const PanelsF64& a, const PanelsF64& b, Keep keep, Store store) {
  constexpr int64_t kBlockA = 32, kBlockB = 4 * kTilePanels;
  const int64_t a_panels = a.panels(), b_panels = b.panels();
  const int64_t ba = (a_panels + kBlockA - 1) / kBlockA, bb = (b_panels + kBlockB - 1) / kBlockB;
  const int64_t blocks = ba * bb;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && num_threads() > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t ia = blk / bb, ib = blk % bb;
    for (int64_t pj = ib * kBlockB; pj < std::min(b_panels, (ib + 1) * kBlockB); pj += kTilePanels)
      for (int64_t gi = ia * kBlockA; gi < std::min(a_panels, (ia + 1) * kBlockA); ++gi) {
        if (!keep(gi, pj)) continue;
        const int np = static_cast<int>(std::min<int64_t>(kTilePanels, b_panels - pj));
        const double* bs[kTilePanels] = {b.panel(pj), np > 1 ? b.panel(pj + 1) : nullptr,
                                         np > 2 ? b.panel(pj + 2) : nullptr};
        double out[kTileRows][8 * kTilePanels];
        tile(a.k_len, a.panel(gi), bs, np, out);
        store(gi * 8, pj * 8, out, std::min<int64_t>(kTileRows, a.lanes - gi * 8),
              std::min<int64_t>(8 * np, b.lanes - pj * 8));
      }
  }
}

}  // namespace

PanelsF64 pack_rows_f64(const double* src, int64_t ld, int64_t lanes, int64_t k_len) {
  PanelsF64 p;
  p.lanes = lanes, p.k_len = k_len;
  p.data.assign(static_cast<size_t>(p.panels() * k_len * 8), 0.0);
  parallel_for(p.panels(), 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t c = 0; c < 8 && g * 8 + c < lanes; ++c) {
        const double* row = src + (g * 8 + c) * ld;
        double* dst = p.data.data() + g * k_len * 8 + c;
        for (int64_t k = 0; k < k_len; ++k) dst[k * 8] = row[k];
      }
  });
  return p;
}

PanelsF64 pack_columns_f64(const double* src, int64_t ld, int64_t k_len, int64_t lanes) {
  PanelsF64 p;
  p.lanes = lanes, p.k_len = k_len;
  p.data.assign(static_cast<size_t>(p.panels() * k_len * 8), 0.0);
  parallel_for(p.panels(), 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t w = std::min<int64_t>(8, lanes - g * 8);
      double* dst = p.data.data() + g * k_len * 8;
      for (int64_t k = 0; k < k_len; ++k)
        std::memcpy(dst + k * 8, src + k * ld + g * 8, sizeof(double) * w);
    }
  });
  return p;
}

void gemm_f64_panels(const PanelsF64& a, const PanelsF64& b, double* C, int64_t ldc) {
  check_k(a, b, "gemm_f64_panels");
  for_tiles(
      a, b, [](int64_t, int64_t) { return true; },
      [&](int64_t i0, int64_t j0, const double(*out)[8 * kTilePanels], int64_t rows, int64_t cols) {
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(C + (i0 + r) * ldc + j0, out[r], sizeof(double) * cols);
      });
}

void syrk_f64_lower(const PanelsF64& x, double* G, int64_t ldg) {
  // Tiles that reach the lower triangle: the first column of the tile, pj*8, is at most the last
  // row, gi*8 + 7.
  for_tiles(
      x, x, [](int64_t gi, int64_t pj) { return pj * 8 <= gi * 8 + 7; },
      [&](int64_t i0, int64_t j0, const double(*out)[8 * kTilePanels], int64_t rows, int64_t cols) {
        for (int64_t r = 0; r < rows; ++r) {
          double* g = G + (i0 + r) * ldg + j0;
          for (int64_t c = 0; c < cols; ++c) g[c] += out[r][c];
        }
      });
}

}  // namespace mg
