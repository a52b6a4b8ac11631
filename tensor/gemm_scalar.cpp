// The portable kernel family (tensor/gemm_kernels.h): packing in plain C++, which the scalar and
// AVX2 families share (and the AVX-512 one for its edges), and a 4 x 8 scalar micro-kernel that
// runs on any CPU, the fallback without AVX2 and the baseline the tests compare the others with.
#include <algorithm>
#include <cstdint>

#include "tensor/gemm_kernels.h"

namespace mg {
namespace gemm_detail {

void pack_a_generic(int mr, bool trans, const float* A, int64_t lda, int64_t m, int64_t kc,
                    float* Ap) {
  for (int64_t p0 = 0; p0 < m; p0 += mr) {
    const int64_t rows = std::min<int64_t>(mr, m - p0);
    float* dst = Ap + (p0 / mr) * mr * kc;
    if (!trans) {
      // Row-major A: read each row sequentially, scatter into the k-interleaved panel.
      for (int64_t i = 0; i < rows; ++i) {
        const float* src = A + (p0 + i) * lda;
        for (int64_t k = 0; k < kc; ++k) dst[k * mr + i] = src[k];
      }
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t i = rows; i < mr; ++i) dst[k * mr + i] = 0.0f;
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + k * lda + p0;
        for (int64_t i = 0; i < rows; ++i) dst[k * mr + i] = src[i];
        for (int64_t i = rows; i < mr; ++i) dst[k * mr + i] = 0.0f;
      }
    }
  }
}

void pack_b_generic(int nr, int vl, bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n,
                    float* Bp) {
  for (int64_t q0 = 0; q0 < n; q0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, n - q0);
    const int64_t w = cols == nr ? nr : (cols + vl - 1) / vl * vl;
    float* dst = Bp + (q0 / nr) * nr * kc;
    if (!trans) {
      // Read a panel at a time, B's rows are kc streams advancing nr floats per panel, too many
      // for the hardware prefetchers: from DRAM each line waited its full latency (the head's
      // [d W^T; d b] = [ctx, 1]^T dz packs all of dz, 504 MB for mos-paper: 16% of that
      // product's samples on a Zen 3). So each row's columns two panels on are fetched now,
      // ~2 kc lines ahead of their use: 6% with it (one panel on did less: the product took
      // 0.447-0.515 s against 0.406-0.465 in three alternating runs).
      const int64_t next = std::max<int64_t>(0, std::min<int64_t>(nr, n - q0 - cols - nr));
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = B + k * ldb + q0;
        for (int64_t j = 0; j < next; j += 16) __builtin_prefetch(src + cols + nr + j);
        for (int64_t j = 0; j < cols; ++j) dst[k * w + j] = src[j];
        for (int64_t j = cols; j < w; ++j) dst[k * w + j] = 0.0f;
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = B + (q0 + j) * ldb;
        for (int64_t k = 0; k < kc; ++k) dst[k * w + j] = src[k];
      }
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = cols; j < w; ++j) dst[k * w + j] = 0.0f;
    }
  }
}

namespace {

// ---- The portable scalar kernel: a 4 x 8 tile. Plain C++ the compiler may vectorize for whatever
// -march it is given; it is the fallback for CPUs without AVX2 and the baseline in the tests.
// 4 x 8 accumulators fit the 16 SSE2 registers with room for B; a 4 x 16 tile spilled and ran
// 5x slower on the SSE2 baseline.
constexpr int kScalarMr = 4, kScalarNr = 8;

// W is the packed width of the B micro-panel: kScalarNr for full panels, 0 for the (runtime) width
// of an edge panel, so the common case has constant trip counts.
template <int W>
void scalar_micro(int64_t kc, const float* a, const float* b, int64_t w, int64_t bs, int rows,
                  int cols, float alpha, float beta, float* c, int64_t ldc) {
  const int64_t width = W ? W : w;
  float acc[kScalarMr][kScalarNr] = {};
  for (int64_t k = 0; k < kc; ++k, a += kScalarMr, b += bs)
    for (int i = 0; i < kScalarMr; ++i)
      for (int64_t j = 0; j < width; ++j) acc[i][j] += a[i] * b[j];
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float& out = c[i * ldc + j];
      out = beta == 0 ? alpha * acc[i][j] : alpha * acc[i][j] + beta * out;
    }
}

void scalar_macro(int64_t m, int64_t n, int64_t kc, const float* Ap, const float* Bp,
                  int64_t ldb_direct, float alpha, float beta, float* C, int64_t ldc) {
  for (int64_t jr = 0; jr < n; jr += kScalarNr) {
    const int cols = static_cast<int>(std::min<int64_t>(kScalarNr, n - jr));
    // Packed: panel jr/nr starts at (jr/nr)*nr*kc = jr*kc, rows `cols` apart.
    const float* b = ldb_direct ? Bp + jr : Bp + jr * kc;
    const int64_t bs = ldb_direct ? ldb_direct : cols;
    for (int64_t ir = 0; ir < m; ir += kScalarMr) {
      const int rows = static_cast<int>(std::min<int64_t>(kScalarMr, m - ir));
      const float* a = Ap + ir * kc;
      float* c = C + ir * ldc + jr;
      if (cols == kScalarNr)
        scalar_micro<kScalarNr>(kc, a, b, kScalarNr, bs, rows, cols, alpha, beta, c, ldc);
      else
        scalar_micro<0>(kc, a, b, cols, bs, rows, cols, alpha, beta, c, ldc);
    }
  }
}

const Arch kScalarArch = {"scalar",
                          kScalarMr,
                          kScalarNr,
                          1,
                          /*mc=*/128,
                          /*kc=*/256,
                          /*nc=*/4096,
                          [](bool t, const float* A, int64_t lda, int64_t m, int64_t kc,
                             float* Ap) { pack_a_generic(kScalarMr, t, A, lda, m, kc, Ap); },
                          [](bool t, const float* B, int64_t ldb, int64_t kc, int64_t n,
                             float* Bp) { pack_b_generic(kScalarNr, 1, t, B, ldb, kc, n, Bp); },
                          scalar_macro};

}  // namespace

const Arch& arch_scalar() {
  return kScalarArch;
}

}  // namespace gemm_detail
}  // namespace mg
