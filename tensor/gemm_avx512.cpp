// AVX-512 GEMM kernels: an 8 x 48 micro-kernel (8 rows of C by three zmm registers) and packing
// routines with 8 x 8 in-register transposes. Every function carries its own target attribute, so
// this file compiles to the same code with any -march (or none) and is only entered after
// gemm.cpp checked __builtin_cpu_supports("avx512f") and ("avx512vl") (the packing uses masked
// 256-bit loads, an AVX-512VL instruction).
//
// Why 8 x 48: the tile is held in 24 zmm accumulators, plus three for the B row and one broadcast
// of A: 28 of the 32 registers. Per k step it does 24 FMAs for 3 vector loads and 8 broadcast
// loads, so the two FMA pipes (12 cycles), not the two load ports (5.5), are the limit; and 24
// independent accumulators cover the FMA latency (4 cycles x 2 pipes = 8 needed).
// mr = 8 also makes the A packing an exact 8 x 8 transpose. (Goto & van de Geijn 2008, sec. 6;
// Low et al., "Analytical Modeling Is Enough for High-Performance BLIS", ACM TOMS 43(2), 2016,
// for how mr x nr and the cache blocks follow from latency, register count and cache sizes.)
#include "tensor/gemm_kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tensor/gemm_avx512_tile.h"
#include "tensor/transpose8.h"

#define MG_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

namespace mg::gemm_detail {
namespace {

constexpr int kMr = 8, kNv = 3, kNr = 16 * kNv;

// Tile of M <= kMr rows (kMr + 1 for kMicro9, below) and NV <= kNv vectors of C. Ap holds kMr
// floats per k (rows past M are padding the kernel never reads), Bp holds 16*NV floats per k. n_last (1..16) is how many columns
// of the last vector are inside C: the edge tile costs masked loads/stores, not a scalar path.
// Every element sees the same fma chain whatever the tile shape, so results do not depend on where
// the tile edges fall (and hence on the thread split). The one exception, a last vector of at most
// 8 columns (micro_pair, below), sums pairs of k; which columns those are depends on N alone.
// lda != 0: A is not packed but read in place, row i of the tile at a + i*lda (macro_a_direct):
// the same products in the same order, so the same bits.
// kPrefetch: also fetch pf's lines into L2, a share every 8 k (macro: the next micro-panel of a B
// read in place).

// One k step of the tile: acc += a column of A (broadcast) times a row of B. A function, not a
// lambda: a lambda does not inherit its enclosing function's target attribute, so builds without
// -march (debug, asan) could not inline the intrinsics into it.
template <int M, int NV, bool kDirectA>
__attribute__((target("avx512f,avx512vl,avx2,fma"), always_inline)) inline void k_step(
    __m512 (&acc)[M][NV], const float* __restrict& a, int64_t lda, const float* __restrict& b,
    int64_t bs, int64_t k) {
  __m512 bv[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 9
  for (int i = 0; i < M; ++i) {
    // Packed, row 8 of a 9-row tile is row 0 of the next micro-panel, lda = kc floats on.
    const __m512 ai = _mm512_set1_ps(kDirectA ? a[i * lda + k] : a[i / kMr * kMr * lda + i % kMr]);
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
  }
  if (!kDirectA) a += kMr;
  b += bs;
}

template <int M, int NV, bool kDirectA, bool kPrefetch>
MG_AVX512 void micro(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b,
                     int64_t bs, float* __restrict c, int64_t ldc, float alpha, float beta,
                     int n_last, const PrefetchLines* pf) {
  __m512 acc[M][NV];
#pragma GCC unroll 9
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  prefetch_c_tile<M, NV>(c, ldc);
  if constexpr (!kPrefetch) {
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k) k_step<M, NV, kDirectA>(acc, a, lda, b, bs, k);
  } else {
    const int64_t blocks = (kc + 7) / 8;
    int64_t line = pf->first;
    for (int64_t k0 = 0, done = 1; k0 < kc; k0 += 8, ++done) {
      line = prefetch_share<_MM_HINT_T1>(*pf, done, blocks, line);
      const int64_t k1 = k0 + 8 < kc ? k0 + 8 : kc;
#pragma GCC unroll 8
      for (int64_t k = k0; k < k1; ++k) k_step<M, NV, kDirectA>(acc, a, lda, b, bs, k);
    }
  }
  // n_last (1..16) columns of the last vector are inside C.
  store_c_tile<M, NV>(acc, c, ldc, alpha, beta, static_cast<__mmask16>((1u << n_last) - 1));
}

using MicroFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                         float, float, int, const PrefetchLines*);

// The last vector of a tile when it holds at most 8 columns of C (N mod 16 in 1..8; the head's
// d ctx, N = E = 200, ends in one). One 16-lane FMA per k would do half useful work there, and
// the kernel is bound by its broadcasts of A (one per FMA): those 8 columns of d ctx cost 2.5% of
// a small-mos step, for 4% of one product. Pairs of k fill the lanes instead: lane 2j of the
// paired accumulator sums column j over the even k of the block, lane 2j+1 over the odd k, from
// one broadcast of the pair (A(i,k), A(i,k+1)) times B's rows k and k+1 interleaved; at the end
// C(i,j) = alpha * (even + odd) + beta * C. The NF full vectors before it run the usual chain,
// two k per iteration (the same bits as micro). Which columns take this path depends on N alone
// (threads split C at multiples of 48 columns, the LSTM's units at multiples of 16), so results
// stay independent of the thread count; they differ from one k chain by rounding only.
template <int M, int NF, bool kDirectA>
MG_AVX512 void micro_pair(int64_t kc, const float* __restrict a, int64_t lda,
                          const float* __restrict b, int64_t bs, float* __restrict c, int64_t ldc,
                          float alpha, float beta, int n_last, const PrefetchLines* /*pf*/) {
  __m512 acc[M][NF + 1];  // [v < NF]: full vectors; [NF]: the paired lanes
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 3
    for (int v = 0; v <= NF; ++v) acc[i][v] = _mm512_setzero_ps();
  prefetch_c_tile<M, NF + 1>(c, ldc);
  const __m512i interleave =
      _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const float* bp = b + 16 * NF;  // the paired vector's columns, row k at bp + k*bs
  int64_t k = 0;
  for (; k + 2 <= kc; k += 2) {
    __m512 b0[NF + 1], b1[NF + 1];
#pragma GCC unroll 3
    for (int v = 0; v < NF; ++v)
      b0[v] = _mm512_loadu_ps(b + k * bs + 16 * v),
      b1[v] = _mm512_loadu_ps(b + (k + 1) * bs + 16 * v);
    const __m512 bpair = _mm512_permutex2var_ps(_mm512_loadu_ps(bp + k * bs), interleave,
                                                _mm512_loadu_ps(bp + (k + 1) * bs));
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      __m512 a0, a1, apair;
      if (kDirectA && NF == 0) {  // one 64-bit broadcast of the adjacent pair
        double two;
        std::memcpy(&two, a + i * lda + k, sizeof two);
        apair = _mm512_castpd_ps(_mm512_set1_pd(two));
      } else {
        a0 = _mm512_set1_ps(kDirectA ? a[i * lda + k] : a[k * kMr + i]);
        a1 = _mm512_set1_ps(kDirectA ? a[i * lda + k + 1] : a[(k + 1) * kMr + i]);
        apair = _mm512_mask_blend_ps(0xAAAA, a0, a1);
#pragma GCC unroll 3
        for (int v = 0; v < NF; ++v) acc[i][v] = _mm512_fmadd_ps(a0, b0[v], acc[i][v]);
#pragma GCC unroll 3
        for (int v = 0; v < NF; ++v) acc[i][v] = _mm512_fmadd_ps(a1, b1[v], acc[i][v]);
      }
      acc[i][NF] = _mm512_fmadd_ps(apair, bpair, acc[i][NF]);
    }
  }
  if (k < kc) {  // an odd kc: the last k alone, into the even lanes only
    const __m512 bpair =
        _mm512_permutex2var_ps(_mm512_loadu_ps(bp + k * bs), interleave, _mm512_setzero_ps());
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512 a0 = _mm512_set1_ps(kDirectA ? a[i * lda + k] : a[k * kMr + i]);
#pragma GCC unroll 3
      for (int v = 0; v < NF; ++v)
        acc[i][v] = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b + k * bs + 16 * v), acc[i][v]);
      acc[i][NF] = _mm512_mask3_fmadd_ps(a0, bpair, acc[i][NF], 0x5555);
    }
  }
  // Fold each pair of lanes (even + odd k) and gather the 8 sums into lanes 0..7.
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    // (maskz with every lane: the plain intrinsics start from _mm512_undefined_ps, which GCC 12
    // reports as uninitialized)
    const __m512 sums =
        _mm512_add_ps(acc[i][NF], _mm512_maskz_permute_ps(0xffff, acc[i][NF], 0xB1));
    acc[i][NF] = _mm512_maskz_permutexvar_ps(0xffff, evens, sums);
  }
  store_c_tile<M, NF + 1>(acc, c, ldc, alpha, beta, static_cast<__mmask16>((1u << n_last) - 1));
}

template <int M, bool D>
constexpr MicroFn micro_pair_row[kNv] = {micro_pair<M, 0, D>, micro_pair<M, 1, D>,
                                         micro_pair<M, 2, D>};
template <bool D>
constexpr const MicroFn* kMicroPair[kMr] = {
    micro_pair_row<1, D>, micro_pair_row<2, D>, micro_pair_row<3, D>, micro_pair_row<4, D>,
    micro_pair_row<5, D>, micro_pair_row<6, D>, micro_pair_row<7, D>, micro_pair_row<8, D>};

template <int M, bool D, bool P>
constexpr MicroFn micro_row[kNv] = {micro<M, 1, D, P>, micro<M, 2, D, P>, micro<M, 3, D, P>};
// A 9 x 48 tile: 27 accumulators, 3 B vectors and one broadcast, 31 of the 32 registers. It takes
// the last 9 rows when M is one more than a multiple of 8 (the head's [d W^T; d b], M = E+1 =
// 201, whose ones row gives d b), where a lone row would be a 1 x 48 tile: one FMA per B vector
// loaded, bound by L2 bandwidth at ~35% of peak (0.5% of a small-mos step for 0.5% of one
// product's FLOPs). Each element sees the same chain as in any other tile: the same bits.
template <bool D, bool P>
constexpr MicroFn kMicro9 = micro<kMr + 1, kNv, D, P>;
template <bool D, bool P>
constexpr const MicroFn* kMicro[kMr] = {micro_row<1, D, P>, micro_row<2, D, P>, micro_row<3, D, P>,
                                        micro_row<4, D, P>, micro_row<5, D, P>, micro_row<6, D, P>,
                                        micro_row<7, D, P>, micro_row<8, D, P>};

// The micro-kernel for a tile of `rows` rows (1..9) by nv vectors, the last holding n_last columns,
// with A read in place or packed, and prefetching the next B micro-panel or not. (B read in place
// is whole micro-panels: n_last is 16 there, and prefetching is only for it.)
MicroFn pick_micro(int rows, int nv, int n_last, bool direct_a, bool prefetch) {
  if (rows > kMr)
    return direct_a   ? kMicro9<true, false>
           : prefetch ? kMicro9<false, true>
                      : kMicro9<false, false>;
  if (n_last <= 8) return (direct_a ? kMicroPair<true> : kMicroPair<false>)[rows - 1][nv - 1];
  if (direct_a) return kMicro<true, false>[rows - 1][nv - 1];
  return (prefetch ? kMicro<false, true> : kMicro<false, false>)[rows - 1][nv - 1];
}

// The macro-kernel over an m x n block of C. A is packed (lda == 0: micro-panel ir/8 at A + ir*kc)
// or read in place (rows lda apart: macro_a_direct); B is packed, or read in place with rows
// ldb_direct apart.
MG_AVX512 void macro_any(int64_t m, int64_t n, int64_t kc, const float* A, int64_t lda,
                         const float* Bp, int64_t ldb_direct, float alpha, float beta, float* C,
                         int64_t ldc) {
  // jr outer, ir inner: one B micro-panel (kc x 48) is reused by all the A micro-panels of the
  // block (which stream from L2) while it is hot in L1/L2.
  for (int64_t jr = 0; jr < n; jr += kNr) {
    const int cols = static_cast<int>(n - jr < kNr ? n - jr : kNr);
    const int nv = (cols + 15) / 16;
    const int n_last = cols - 16 * (nv - 1);
    const float* b = ldb_direct ? Bp + jr : Bp + jr * kc;
    const int64_t bs = ldb_direct ? ldb_direct : 16 * nv;
    // A B read in place has its kc rows ldb_direct apart (40 KB in the head's d W, whose B is the
    // logits' gradient in DRAM): the hardware prefetcher does not follow, and the first A
    // micro-panel to use a B micro-panel waited for all of it. So while this one is in use, the
    // next one is prefetched into L2, a share of its rows before each micro-kernel call.
    // The prefetches are spread over each call's k loop: a burst of them before each call
    // stalled on the miss buffers.
    const bool prefetch_next = ldb_direct && jr + kNr < n;
    const int64_t share = prefetch_next ? (kc * kMr + m - 1) / m : 0;  // rows per call
    int64_t next_row = 0;
    PrefetchLines pf;  // the next micro-panel's kc rows, 3 lines (192 bytes) each
    pf.base = prefetch_next ? reinterpret_cast<const char*>(b + kNr) : nullptr;
    pf.ld = static_cast<int64_t>(sizeof(float)) * ldb_direct;
    pf.per_row = 3;
    // M = 8q + 1 (q >= 1) on a whole panel: the last 9 rows in one tile (kMicro9).
    const bool nine = m % kMr == 1 && m > kMr && cols == kNr;
    for (int64_t ir = 0; ir < m;) {
      const int rows =
          nine && ir == m - kMr - 1 ? kMr + 1 : static_cast<int>(std::min<int64_t>(kMr, m - ir));
      const int64_t end = std::min(kc, next_row + share);
      pf.first = 3 * next_row, pf.end = 3 * end;
      next_row = end;
      const MicroFn f = pick_micro(rows, nv, n_last, lda != 0, pf.end > pf.first);
      // A packed: a 9-row tile reads its last row from the next micro-panel, kc floats on.
      f(kc, lda ? A + ir * lda : A + ir * kc, lda ? lda : (rows > kMr ? kc : 0), b, bs,
        C + ir * ldc + jr, ldc, alpha, beta, n_last, &pf);
      ir += rows;
    }
  }
}

MG_AVX512 void macro(int64_t m, int64_t n, int64_t kc, const float* Ap, const float* Bp,
                     int64_t ldb_direct, float alpha, float beta, float* C, int64_t ldc) {
  macro_any(m, n, kc, Ap, 0, Bp, ldb_direct, alpha, beta, C, ldc);
}

// A read in place (rows lda apart, not packed), B packed: for products with few columns (the
// head's d ctx = dz W: 200), where packing A costs more than it saves. Each A micro-panel (8 rows
// of kc floats) is read from L2 once per B micro-panel.
MG_AVX512 void macro_a_direct(int64_t m, int64_t n, int64_t kc, const float* A, int64_t lda,
                              const float* Bp, float alpha, float beta, float* C, int64_t ldc,
                              const Upcoming& /*upcoming: not prefetched*/) {
  macro_any(m, n, kc, A, lda, Bp, 0, alpha, beta, C, ldc);
}

// rows x kc (rows <= 8) of a row-major matrix, src(i, k) = src[i*ld + k], into dst[k*dst_ld + i]
// (8 columns from dst). Rows past `rows` become zeros. The 8 source rows are 8 separate streams
// (lda apart, often from DRAM: the 700 x 10000 operand of the output layer's backward is 28 MB),
// more than the hardware prefetcher follows well, so each row is prefetched a few lines ahead.
template <bool Full>
MG_AVX512 void transpose_pack(const float* src, int64_t ld, int rows, int64_t kc, float* dst,
                              int64_t dst_ld) {
  constexpr int64_t kAhead = 256;  // floats: 16 cache lines ahead on each row
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 r[8];
    if ((k & 15) == 0) {
      // Past the end of these rows, prefetch the start of the next 8 (the next micro-panel, or
      // the next block's): a row is only kc floats long, too short for the hardware prefetcher
      // to warm up on. Prefetches never fault, so the address may lie past the matrix; it is
      // formed as an integer.
      const int64_t ahead = k + kAhead, wrap = ahead >= kc ? 8 : 0, kk = wrap ? ahead - kc : ahead;
      for (int i = 0; i < 8; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(src) +
                                                   sizeof(float) * ((i + wrap) * ld + kk)),
                     _MM_HINT_T0);
    }
    for (int i = 0; i < 8; ++i)
      r[i] = Full || i < rows ? _mm256_loadu_ps(src + i * ld + k) : _mm256_setzero_ps();
    transpose8(r);
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (k + j) * dst_ld, r[j]);
  }
  for (; k < kc; ++k)
    for (int i = 0; i < 8; ++i) dst[k * dst_ld + i] = Full || i < rows ? src[i * ld + k] : 0.0f;
}

MG_AVX512 void transpose_pack(const float* src, int64_t ld, int rows, int64_t kc, float* dst,
                              int64_t dst_ld) {
  if (rows == 8)
    transpose_pack<true>(src, ld, 8, kc, dst, dst_ld);
  else
    transpose_pack<false>(src, ld, rows, kc, dst, dst_ld);
}

MG_AVX512 void pack_a(bool trans, const float* A, int64_t lda, int64_t m, int64_t kc, float* Ap) {
  for (int64_t p0 = 0; p0 < m; p0 += kMr) {
    const int rows = static_cast<int>(m - p0 < kMr ? m - p0 : kMr);
    float* dst = Ap + p0 * kc;
    if (trans) {
      // Stored [K, M]: each k gives 8 contiguous floats, already in packed order.
      const __mmask8 mask = static_cast<__mmask8>((1u << rows) - 1);
      for (int64_t k = 0; k < kc; ++k)
        _mm256_storeu_ps(dst + k * kMr, _mm256_maskz_loadu_ps(mask, A + k * lda + p0));
    } else {
      transpose_pack(A + p0 * lda, lda, rows, kc, dst, kMr);
    }
  }
}

MG_AVX512 void pack_b(bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n, float* Bp) {
  for (int64_t q0 = 0; q0 < n; q0 += kNr) {
    const int cols = static_cast<int>(n - q0 < kNr ? n - q0 : kNr);
    const int w = (cols + 15) / 16 * 16;  // packed width: whole vectors, zero-padded
    float* dst = Bp + q0 * kc;
    if (!trans) {
      const float* src = B + q0;
      if (cols == kNr) {
        for (int64_t k = 0; k < kc; ++k)
          for (int v = 0; v < kNv; ++v)
            _mm512_storeu_ps(dst + k * kNr + 16 * v, _mm512_loadu_ps(src + k * ldb + 16 * v));
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int v = 0; v < w / 16; ++v) {
            const int left = cols - 16 * v;
            const __mmask16 mask = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
            _mm512_storeu_ps(dst + k * w + 16 * v,
                             _mm512_maskz_loadu_ps(mask, src + k * ldb + 16 * v));
          }
      }
    } else {
      // Stored [N, K]: column j of the panel is row q0 + j of B, contiguous in k. Transpose 8
      // columns at a time (zero columns past n fill the padding).
      for (int j0 = 0; j0 < w; j0 += 8) {
        const int valid = cols - j0 < 0 ? 0 : (cols - j0 > 8 ? 8 : cols - j0);
        transpose_pack(valid ? B + (q0 + j0) * ldb : B, ldb, valid, kc, dst + j0, w);
      }
    }
  }
}

}  // namespace

const Arch& arch_avx512() {
  // Cache blocks, measured on AMD Zen 5 (48 KiB L1d, 1 MiB L2 per core, 32 MiB L3) with
  // bench/bench_gemm.cpp; the plateau is wide (kc 256..512, mc 256..512, nc 2k..10k all within a
  // few per cent of each other single-threaded):
  //  * kc = 512: long k loops amortize the C tile update, and K = 200 / 400 (the model's hidden
  //    sizes) take one kc block, so C is written once. The 512 x 48 B micro-panel (96 KiB) does
  //    not fit L1 but streams from L2 fast enough: 192 bytes per 12 cycles of FMAs.
  //  * mc = 256: the A block (256 x 512 floats, 512 KiB) stays in the core's L2.
  //  * nc = 3072: the shared B panel (512 x 3072 floats, 6 MiB) stays in L3.
  static const Arch arch = {"avx512", kMr,    kNr,           16,         /*mc=*/256,
                            /*kc=*/512, /*nc=*/3072, pack_a, pack_b, macro,
                            /*b_in_place=*/true, /*k_per_slot=*/1, macro_a_direct,
                            /*a_direct_max_n=*/512};
  return arch;
}

}  // namespace mg::gemm_detail

#else  // not x86: never selected (gemm.cpp only picks it when the CPU reports AVX-512)

namespace mg::gemm_detail {
const Arch& arch_avx512() {
  static const Arch arch = {"avx512", 0, 0, 0, 0, 0, 0, nullptr, nullptr, nullptr};
  return arch;
}
}  // namespace mg::gemm_detail

#endif
