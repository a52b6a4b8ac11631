// AVX2 + FMA GEMM kernel: a 6 x 16 micro-kernel (6 rows of C by two ymm registers), the classic
// Haswell-class shape: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers, 12
// FMAs per 2 loads and 6 broadcasts, and 12 independent chains for an FMA latency of 4-5 cycles
// on two pipes (Goto & van de Geijn 2008; Low et al., ACM TOMS 43(2), 2016). Packing is the
// portable code of gemm_scalar.cpp. Compiled with a target attribute, entered only after gemm.cpp
// checked __builtin_cpu_supports("avx2") and ("fma").
#include "tensor/gemm_kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))

#include <immintrin.h>

#define MG_AVX2 __attribute__((target("avx2,fma")))

namespace mg::gemm_detail {
namespace {

constexpr int kMr = 6, kNv = 2, kNr = 8 * kNv;

// Same contract as the AVX-512 kernel: M <= kMr rows, NV <= kNv vectors, n_last (1..8) valid
// columns in the last vector; one fma chain per element whatever the tile shape.
// lda != 0 (kDirectA): A is not packed but read in place, row i of the tile at a + i*lda
// (macro_a_direct): the same products in the same order, so the same bits.
template <int M, int NV, bool kDirectA>
MG_AVX2 void micro(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b,
                   int64_t bs, float* __restrict c, int64_t ldc, float alpha, float beta,
                   int n_last) {
  __m256 acc[M][NV];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  // The C tile is fetched now, while the k loop runs, not at the end: its rows are ldc apart and
  // were last touched a whole B panel ago, so they come from L3 or DRAM, and loading them only
  // after the loop left each call waiting for them (the kernel ran at 68-75% of peak over a
  // 168 x 4080 block of C, at 86-93% with this; as the AVX-512 kernel does, prefetch_c_tile).
  // The first and the last column of each row inside C (n_last: the edge tile's last vector).
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 8 * (NV - 1) + n_last - 1),
                 _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m256 ai = _mm256_broadcast_ss(kDirectA ? a + i * lda + k : a + i);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    if (!kDirectA) a += kMr;
    b += bs;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  // Lane l of the last vector is inside C when l < n_last.
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_last), lanes);
  const __m256i all = _mm256_set1_epi32(-1);
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m256 r;
      if (v < NV - 1 || n_last == 8) {
        r = beta == 0
                ? _mm256_mul_ps(va, acc[i][v])
                : _mm256_fmadd_ps(va, acc[i][v], _mm256_mul_ps(vb, _mm256_loadu_ps(row + 8 * v)));
        _mm256_storeu_ps(row + 8 * v, r);
      } else {
        const __m256i mask = v == NV - 1 ? last : all;
        r = beta == 0 ? _mm256_mul_ps(va, acc[i][v])
                      : _mm256_fmadd_ps(va, acc[i][v],
                                        _mm256_mul_ps(vb, _mm256_maskload_ps(row + 8 * v, mask)));
        _mm256_maskstore_ps(row + 8 * v, mask, r);
      }
    }
  }
}

using MicroFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                         float, float, int);

template <int M, bool kDirectA>
constexpr MicroFn micro_row[kNv] = {micro<M, 1, kDirectA>, micro<M, 2, kDirectA>};
template <bool kDirectA>
constexpr const MicroFn* kMicro[kMr] = {micro_row<1, kDirectA>, micro_row<2, kDirectA>,
                                        micro_row<3, kDirectA>, micro_row<4, kDirectA>,
                                        micro_row<5, kDirectA>, micro_row<6, kDirectA>};

// The macro-kernel over an m x n block of C. A is packed (lda == 0: micro-panel ir/6 at
// A + ir*kc) or read in place (rows lda apart: macro_a_direct); B is packed, or read in place
// with rows ldb_direct apart.
MG_AVX2 void macro_any(int64_t m, int64_t n, int64_t kc, const float* A, int64_t lda,
                       const float* Bp, int64_t ldb_direct, float alpha, float beta, float* C,
                       int64_t ldc) {
  for (int64_t jr = 0; jr < n; jr += kNr) {
    const int cols = static_cast<int>(n - jr < kNr ? n - jr : kNr);
    const int nv = (cols + 7) / 8;
    const int n_last = cols - 8 * (nv - 1);
    const float* b = ldb_direct ? Bp + jr : Bp + jr * kc;
    const int64_t bs = ldb_direct ? ldb_direct : 8 * nv;
    for (int64_t ir = 0; ir < m; ir += kMr) {
      const int rows = static_cast<int>(m - ir < kMr ? m - ir : kMr);
      if (lda)
        kMicro<true>[rows - 1][nv - 1](kc, A + ir * lda, lda, b, bs, C + ir * ldc + jr, ldc, alpha,
                                       beta, n_last);
      else
        kMicro<false>[rows - 1][nv - 1](kc, A + ir * kc, 0, b, bs, C + ir * ldc + jr, ldc, alpha,
                                        beta, n_last);
    }
  }
}

MG_AVX2 void macro(int64_t m, int64_t n, int64_t kc, const float* Ap, const float* Bp,
                   int64_t ldb_direct, float alpha, float beta, float* C, int64_t ldc) {
  macro_any(m, n, kc, Ap, 0, Bp, ldb_direct, alpha, beta, C, ldc);
}

// A read in place (rows lda apart, not packed), B packed: for products with few columns (the
// head's d ctx = dz W: E = 280 in mos-paper), where packing all of A (dz, 504 MB there) costs more
// than it saves: it was 6.6% of mos-paper's step. Each 6-row strip of A is read once per B
// micro-panel, from L2 after the first.
MG_AVX2 void macro_a_direct(int64_t m, int64_t n, int64_t kc, const float* A, int64_t lda,
                            const float* Bp, float alpha, float beta, float* C, int64_t ldc,
                            const Upcoming& /*upcoming: not prefetched*/) {
  macro_any(m, n, kc, A, lda, Bp, 0, alpha, beta, C, ldc);
}

void pack_a(bool trans, const float* A, int64_t lda, int64_t m, int64_t kc, float* Ap) {
  pack_a_generic(kMr, trans, A, lda, m, kc, Ap);
}
void pack_b(bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n, float* Bp) {
  pack_b_generic(kNr, 8, trans, B, ldb, kc, n, Bp);
}

}  // namespace

const Arch& arch_avx2() {
  // kc x 16 floats of B (16 KiB at kc = 256) stay in a 32 KiB L1; mc x kc of A (168 x 256 floats,
  // 168 KiB) in L2; the B panel (256 x 4080, 4 MiB) in L3 (the BLIS Haswell sgemm blocking).
  static const Arch arch = {"avx2",     kMr,         kNr,    8,      /*mc=*/168,
                            /*kc=*/256, /*nc=*/4080, pack_a, pack_b, macro,
                            /*b_in_place=*/true, /*k_per_slot=*/1, macro_a_direct,
                            /*a_direct_max_n=*/512};
  return arch;
}

}  // namespace mg::gemm_detail

#else  // not x86: never selected

namespace mg::gemm_detail {
const Arch& arch_avx2() {
  static const Arch arch = {"avx2", 0, 0, 0, 0, 0, 0, nullptr, nullptr, nullptr};
  return arch;
}
}  // namespace mg::gemm_detail

#endif
