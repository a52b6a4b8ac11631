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

// Where a tile reads its 8 lanes of a: lane r's element k at p[r*ls + k*ks]. A packed panel is
// (ls, ks) = (1, 8); a matrix read in place (LanesF64) has its own strides.
struct ATile {
  const double* p;
  int64_t ls, ks;
  bool packed() const { return ls == 1 && ks == 8; }
};

// out[r][c] = Σ_k a_r[k] · b_p[k*8 + c'] for the np panels b_p: the portable loop.
void tile_generic(int64_t k_len, ATile a, const double* const* b, int np,
                  double out[kTileRows][8 * kTilePanels]) {
  for (int r = 0; r < kTileRows; ++r)
    for (int c = 0; c < 8 * kTilePanels; ++c) out[r][c] = 0;
  for (int p = 0; p < np; ++p)
    for (int64_t k = 0; k < k_len; ++k)
      for (int r = 0; r < kTileRows; ++r) {
        const double av = a.p[r * a.ls + k * a.ks];
#pragma omp simd
        for (int c = 0; c < 8; ++c) out[r][8 * p + c] += av * b[p][k * 8 + c];
      }
}

#ifdef MG_F64_X86
// The same sums with 8 x 3 zmm accumulators: per k, 3 loads of b, 8 broadcasts of a, 24 FMAs
// (the FMA pipes, not the loads, are the limit), each accumulator one chain over k in order.
// kPacked: a is a packed panel (its 8 lanes side by side at each k); else each lane is read where
// it lies.
template <int NP, bool kPacked>
__attribute__((target("avx512f"))) void tile_avx512(int64_t k_len, ATile a, const double* const* b,
                                                    double out[kTileRows][8 * kTilePanels]) {
  __m512d acc[kTileRows][NP];
  for (int r = 0; r < kTileRows; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_pd();
  const double* bp[NP];
  for (int p = 0; p < NP; ++p) bp[p] = b[p];
  const double* ar[kTileRows];
  for (int r = 0; r < kTileRows; ++r) ar[r] = a.p + r * a.ls;
  const int64_t ks = a.ks;
#pragma GCC unroll 2
  for (int64_t k = 0; k < k_len; ++k) {
    __m512d bv[NP];
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_pd(bp[p] + k * 8);
#pragma GCC unroll 8
    for (int r = 0; r < kTileRows; ++r) {
      const __m512d av = _mm512_set1_pd(kPacked ? a.p[k * 8 + r] : ar[r][k * ks]);
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

// One tile of C: the 8 lanes of a at `a`, columns of the np panels b.
void tile(int64_t k_len, ATile a, const double* const* b, int np,
          double out[kTileRows][8 * kTilePanels]) {
#ifdef MG_F64_X86
  if (have_avx512()) {
    if (a.packed()) {
      if (np == 3) return tile_avx512<3, true>(k_len, a, b, out);
      if (np == 2) return tile_avx512<2, true>(k_len, a, b, out);
      return tile_avx512<1, true>(k_len, a, b, out);
    }
    if (np == 3) return tile_avx512<3, false>(k_len, a, b, out);
    if (np == 2) return tile_avx512<2, false>(k_len, a, b, out);
    return tile_avx512<1, false>(k_len, a, b, out);
  }
#endif
  tile_generic(k_len, a, b, np, out);
}

// The a operand of a product: packed panels, or a matrix's lanes read in place (a last panel of
// fewer than 8 lanes is packed, so no tile reads past the matrix).
struct ASource {
  int64_t lanes, k_len;
  const PanelsF64* packed = nullptr;
  LanesF64 in_place{};
  PanelsF64 tail;
  explicit ASource(const PanelsF64& p) : lanes(p.lanes), k_len(p.k_len), packed(&p) {}
  explicit ASource(const LanesF64& l) : lanes(l.lanes), k_len(l.k_len), in_place(l) {
    const int64_t full = lanes / 8 * 8;
    if (full < lanes) {
      tail.lanes = lanes - full, tail.k_len = k_len;
      tail.data.assign(static_cast<size_t>(8 * k_len), 0.0);
      for (int64_t c = 0; c < tail.lanes; ++c)
        for (int64_t k = 0; k < k_len; ++k)
          tail.data[k * 8 + c] = l.data[(full + c) * l.lane_stride + k * l.k_stride];
    }
  }
  int64_t panels() const { return (lanes + 7) / 8; }
  ATile at(int64_t g) const {
    if (packed) return {packed->panel(g), 1, 8};
    if (g * 8 + 8 > lanes) return {tail.panel(0), 1, 8};
    return {in_place.data + g * 8 * in_place.lane_stride, in_place.lane_stride, in_place.k_stride};
  }
};

void check_k(const ASource& a, const PanelsF64& b, const char* what) {
  if (a.k_len != b.k_len)
    throw std::invalid_argument(std::string(what) + ": operands have " + std::to_string(a.k_len) +
                                " and " + std::to_string(b.k_len) + " terms per dot product");
}

// How for_tiles walks C: tiles grouped in blocks of a_panels x b_panels panels, each block's
// k in pieces of k (0: whole) taken in order inside the block, and within a piece either each
// panel triple of b meeting every panel of a in turn (long_rows false) or the other way round.
struct TileWalk {
  int64_t a_panels = 32, b_panels = 12, k = 0;
  bool long_rows = false;
};

// Computes every tile of a·bᵀ that keep(gi, pj) accepts — gi a panel of a (8 rows of C), pj the
// first of up to 3 panels of b — and hands it to store(row0, col0, out, rows, cols, first), rows x
// cols being the part inside C; prefetch(row0, col0, rows, cols) is called just before the tile's
// sums. Threads take blocks as they finish (the Gram's triangle makes the blocks' work uneven),
// which changes who computes a tile, never how. Inside a block the k pieces run in order, each
// tile's partial sum stored before the next piece (first: the first piece), so the block's part
// of C stays in the core's L2 while k streams past it (Goto & van de Geijn's loop order: with the
// pieces outermost, a fold's Vᵀc read and wrote all of its C, 10,000 x 144 doubles, once per 512
// rows). long_rows suits a C whose rows are long (a trailing matrix, column-major: C's "rows" are
// its columns): each row is written 24 elements at a time, along its length.
struct NoPrefetch {
  void operator()(int64_t, int64_t, int64_t, int64_t) const {}
};

template <typename Keep, typename Store, typename Prefetch = NoPrefetch>
void for_tiles(const ASource& a, const PanelsF64& b, Keep keep, Store store, TileWalk walk = {},
               Prefetch prefetch = {}) {
  const int64_t a_panels = a.panels(), b_panels = b.panels();
  const int64_t ba = (a_panels + walk.a_panels - 1) / walk.a_panels,
                bb = (b_panels + walk.b_panels - 1) / walk.b_panels;
  const int64_t blocks = ba * bb, kb = walk.k > 0 ? walk.k : std::max<int64_t>(a.k_len, 1);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && num_threads() > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t ia = blk / bb, ib = blk % bb;
    const int64_t pj0 = ib * walk.b_panels, pj1 = std::min(b_panels, (ib + 1) * walk.b_panels);
    const int64_t gi0 = ia * walk.a_panels, gi1 = std::min(a_panels, (ia + 1) * walk.a_panels);
    const int64_t pairs = (pj1 - pj0 + kTilePanels - 1) / kTilePanels, count = pairs * (gi1 - gi0);
    for (int64_t k0 = 0; k0 < a.k_len || k0 == 0; k0 += kb) {
      const int64_t k_len = std::min(kb, a.k_len - k0);
      for (int64_t t = 0; t < count; ++t) {
        const int64_t gi = gi0 + (walk.long_rows ? t / pairs : t % (gi1 - gi0));
        const int64_t pj = pj0 + kTilePanels * (walk.long_rows ? t % pairs : t / (gi1 - gi0));
        if (!keep(gi, pj)) continue;
        const int np = static_cast<int>(std::min<int64_t>(kTilePanels, b_panels - pj));
        const double* bs[kTilePanels] = {b.panel(pj) + k0 * 8,
                                         np > 1 ? b.panel(pj + 1) + k0 * 8 : nullptr,
                                         np > 2 ? b.panel(pj + 2) + k0 * 8 : nullptr};
        ATile at = a.at(gi);
        at.p += k0 * at.ks;
        const int64_t rows = std::min<int64_t>(kTileRows, a.lanes - gi * 8),
                      cols = std::min<int64_t>(8 * np, b.lanes - pj * 8);
        prefetch(gi * 8, pj * 8, rows, cols);
        double out[kTileRows][8 * kTilePanels];
        tile(k_len, at, bs, np, out);
        store(gi * 8, pj * 8, out, rows, cols, k0 == 0);
      }
      if (a.k_len == 0) break;
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

namespace {

// The walks (bench/bench_svd, n = 4,000 and 10,000, 20,000-row folds). A product into a new C
// (the Householder panels' Vᵀc, whose k is a fold's 20,000 rows): k in pieces of 512 (128 where
// the lanes step along k by a stride, touching a page per k), each piece of a block of 256 x 96
// lanes done before the next, so the block's part of C stays in L2. A subtracted product (the
// panels' update of the trailing matrix, k = the panel's width): blocks of 64 x 768 lanes, along
// C's long rows.
constexpr TileWalk kPanelsWalk{32, 12, 0, false}, kLanesWalk{32, 12, 512, false},
    kStridedLanesWalk{32, 12, 128, false}, kSubtractWalk{8, 96, 0, true};

// C = A·Bᵀ, or C −= A·Bᵀ: each tile written (or subtracted) where it lies in C.
void gemm_into(const ASource& a, const PanelsF64& b, double* C, int64_t ldc, bool subtract,
               TileWalk walk, const char* what) {
  check_k(a, b, what);
  for_tiles(
      a, b, [](int64_t, int64_t) { return true; },
      [&](int64_t i0, int64_t j0, const double(*out)[8 * kTilePanels], int64_t rows, int64_t cols,
          bool first) {
        for (int64_t r = 0; r < rows; ++r) {
          double* c = C + (i0 + r) * ldc + j0;
          if (subtract)
            for (int64_t j = 0; j < cols; ++j) c[j] -= out[r][j];
          else if (first)
            std::memcpy(c, out[r], sizeof(double) * cols);
          else
            for (int64_t j = 0; j < cols; ++j) c[j] += out[r][j];
        }
      },
      walk,
      [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
        // The subtracted tile's part of C, read and written after the tile's sums: asked for
        // before them, so it comes from memory while they run (a trailing matrix is far larger
        // than the caches; bench/bench_svd's fold: 47 -> 52 G multiply-adds/s in the product).
        if (!subtract) return;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; j += 8)
            __builtin_prefetch(C + (i0 + r) * ldc + j0 + j, 1, 3);
      });
}

}  // namespace

void gemm_f64_panels(const PanelsF64& a, const PanelsF64& b, double* C, int64_t ldc) {
  gemm_into(ASource(a), b, C, ldc, false, kPanelsWalk, "gemm_f64_panels");
}

void gemm_f64_panels_subtract(const PanelsF64& a, const PanelsF64& b, double* C, int64_t ldc) {
  gemm_into(ASource(a), b, C, ldc, true, kSubtractWalk, "gemm_f64_panels_subtract");
}

void gemm_f64_lanes(const LanesF64& a, const PanelsF64& b, double* C, int64_t ldc) {
  gemm_into(ASource(a), b, C, ldc, false, a.k_stride == 1 ? kLanesWalk : kStridedLanesWalk,
            "gemm_f64_lanes");
}

void syrk_f64_lower(const PanelsF64& x, double* G, int64_t ldg) {
  // Tiles that reach the lower triangle: the first column of the tile, pj*8, is at most the last
  // row, gi*8 + 7.
  for_tiles(
      ASource(x), x, [](int64_t gi, int64_t pj) { return pj * 8 <= gi * 8 + 7; },
      [&](int64_t i0, int64_t j0, const double(*out)[8 * kTilePanels], int64_t rows, int64_t cols,
          bool) {
        for (int64_t r = 0; r < rows; ++r) {
          double* g = G + (i0 + r) * ldg + j0;
          for (int64_t c = 0; c < cols; ++c) g[c] += out[r][c];
        }
      });
}

}  // namespace mg
