// AVX512_BF16 GEMM kernels (--precision bf16): the operands are rounded to bfloat16 (nearest, ties
// to even) while they are packed, and the 8 x 48 micro-kernel multiplies them with VDPBF16PS,
// which for each of 16 FP32 lanes adds the products of two adjacent bf16 pairs:
//   acc[j] += a[2j] * b[2j] + a[2j+1] * b[2j+1]
// so one instruction does twice the multiply-adds of an FP32 FMA, and accumulates in FP32
// (mixed precision as in Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", 2019).
// A product of two bf16 (8-bit significands) is exact in FP32; each addition rounds as in FP32.
// The instruction ignores MXCSR: denormal inputs count as zero and denormal results are flushed
// to zero (tests/tensor/test_gemm_bf16.cpp derives the tolerance this implies).
//
// The loop nest, blocking and threading are gemm.cpp's, the C tile's prefetch and update
// gemm_avx512_tile.h's (shared with gemm_avx512.cpp); only the packing and the k loop differ.
// Because VDPBF16PS consumes k in pairs, the packed layouts hold pairs:
//  * A block, m x kc: micro-panel p of 8 rows at Ap + p*8*kc2 (kc2 = ceil(kc/2) pairs), the pair
//    (op(A)(i,2q), op(A)(i,2q+1)) as one 32-bit word at [q*8 + i];
//  * B panel, kc x n: micro-panel of 48 columns (the last w = n rounded up to 16 wide) at
//    Bp + q0*kc2, the pair (op(B)(2q,j), op(B)(2q+1,j)) at [q*w + j].
// An odd kc is padded with a zero k, rows and columns past the edge with zeros. The driver passes
// these buffers as float*: a pair has a float's size, so its buffers (sized for FP32) are large
// enough; the functions below view them as uint32_t.
#include "tensor/gemm_kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))

#include <immintrin.h>

#include "tensor/gemm_avx512_tile.h"

#define MG_BF16 __attribute__((target("avx512bf16,avx512f,avx512vl,avx512bw,avx2,fma")))

namespace mg::gemm_detail {
namespace {

constexpr int kMr = 8, kNv = 3, kNr = 16 * kNv;
constexpr int64_t kKc = 512;  // the kc block, in k (not pairs)

inline int64_t pairs(int64_t kc) {
  return (kc + 1) / 2;
}

// What one micro-kernel call of macro_a_direct fetches ahead while it runs: the next A
// micro-panel's rows into L1, and the driver's upcoming range (B's next kc block) into L2.
struct Prefetches {
  PrefetchLines next_a, upcoming;
};

// One pair of k of the tile: acc += a column of A pairs (broadcast) times a row of B pairs. A
// function, not a lambda: a lambda does not inherit its enclosing function's target attribute,
// so builds without -march (debug, asan) could not inline the intrinsics into it.
template <int M, int NV>
__attribute__((target("avx512bf16,avx512f,avx512vl,avx512bw,avx2,fma"), always_inline)) inline void
k_step(__m512 (&acc)[M][NV], const uint32_t* __restrict& a, const uint32_t* __restrict& b,
       int64_t bs) {
  __m512bh bv[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
  }
  a += kMr;
  b += bs;
}

// Tile of M <= 8 rows and NV <= 3 vectors of C, from kc2 pairs of k. Same structure, register use
// and edge handling as the FP32 micro-kernel in gemm_avx512.cpp; the B row is a vector of 16
// pairs and A a broadcast pair. kPrefetch: also issue pf's prefetches, a share every 16 pairs.
template <int M, int NV, bool kPrefetch>
MG_BF16 void micro(int64_t kc2, const uint32_t* __restrict a, const uint32_t* __restrict b,
                   int64_t bs, float* __restrict c, int64_t ldc, float alpha, float beta,
                   int n_last, const Prefetches* pf) {
  __m512 acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  prefetch_c_tile<M, NV>(c, ldc);
  if constexpr (!kPrefetch) {
#pragma GCC unroll 4
    for (int64_t q = 0; q < kc2; ++q) k_step<M, NV>(acc, a, b, bs);
  } else {
    const int64_t blocks = (kc2 + 15) / 16;
    int64_t a_line = pf->next_a.first, up_line = pf->upcoming.first;
    for (int64_t q0 = 0, done = 1; q0 < kc2; q0 += 16, ++done) {
      a_line = prefetch_share<_MM_HINT_T0>(pf->next_a, done, blocks, a_line);
      up_line = prefetch_share<_MM_HINT_T1>(pf->upcoming, done, blocks, up_line);
      const int64_t q1 = q0 + 16 < kc2 ? q0 + 16 : kc2;
#pragma GCC unroll 4
      for (int64_t q = q0; q < q1; ++q) k_step<M, NV>(acc, a, b, bs);
    }
  }
  // n_last (1..16) columns of the last vector are inside C.
  store_c_tile<M, NV>(acc, c, ldc, alpha, beta, static_cast<__mmask16>((1u << n_last) - 1));
}

using MicroFn = void (*)(int64_t, const uint32_t*, const uint32_t*, int64_t, float*, int64_t, float,
                         float, int, const Prefetches*);
template <int M, bool P>
constexpr MicroFn micro_row[kNv] = {micro<M, 1, P>, micro<M, 2, P>, micro<M, 3, P>};
template <bool P>
constexpr const MicroFn* kMicro[kMr] = {micro_row<1, P>, micro_row<2, P>, micro_row<3, P>,
                                        micro_row<4, P>, micro_row<5, P>, micro_row<6, P>,
                                        micro_row<7, P>, micro_row<8, P>};

MG_BF16 void pack_pairs_transposed(const float* src, int64_t ld, int rows, int64_t kc,
                                   uint32_t* dst, int64_t dst_ld);

MG_BF16 void macro(int64_t m, int64_t n, int64_t kc, const float* Ap_f, const float* Bp_f,
                   int64_t /*ldb_direct: never, b_in_place is false*/, float alpha, float beta,
                   float* C, int64_t ldc) {
  const auto* Ap = reinterpret_cast<const uint32_t*>(Ap_f);
  const auto* Bp = reinterpret_cast<const uint32_t*>(Bp_f);
  const int64_t kc2 = pairs(kc);
  for (int64_t jr = 0; jr < n; jr += kNr) {
    const int cols = static_cast<int>(n - jr < kNr ? n - jr : kNr);
    const int nv = (cols + 15) / 16;
    const int n_last = cols - 16 * (nv - 1);
    for (int64_t ir = 0; ir < m; ir += kMr) {
      const int rows = static_cast<int>(m - ir < kMr ? m - ir : kMr);
      kMicro<false>[rows - 1][nv - 1](kc2, Ap + ir * kc2, Bp + jr * kc2, 16 * nv,
                                      C + ir * ldc + jr, ldc, alpha, beta, n_last, nullptr);
    }
  }
}

// A not packed as a block but one micro-panel (8 rows) at a time, right before its use by all
// the B micro-panels (ir outer), into a buffer that stays in L1; the next one is prefetched
// meanwhile, a share per B micro-panel. For narrow products with a large A (the head's
// d ctx = dz W: 700 x 10000 @ 10000 x 200, dz 28 MB from DRAM), where packing the whole block
// first read all of it from memory with no multiply-adds to overlap (14% of the product), and
// packing B's next kc block, also from memory, was another 11%: the driver names it (upcoming)
// and it is prefetched into L2 here, a share per call.
MG_BF16 void macro_a_direct(int64_t m, int64_t n, int64_t kc, const float* A, int64_t lda,
                            const float* Bp_f, float alpha, float beta, float* C, int64_t ldc,
                            const Upcoming& upcoming) {
  const auto* Bp = reinterpret_cast<const uint32_t*>(Bp_f);
  const int64_t kc2 = pairs(kc);
  // The driver's kc blocks are at most kKc deep: 8 rows x kKc/2 pairs, 8 KiB.
  alignas(64) static thread_local uint32_t panel[kMr * kKc / 2];
  const int64_t panels = (n + kNr - 1) / kNr, calls = (m + kMr - 1) / kMr * panels;
  const int64_t up_lines = (upcoming.bytes + 63) / 64;
  Prefetches pf;
  pf.next_a.ld = static_cast<int64_t>(sizeof(float)) * lda;
  pf.next_a.per_row = (kc + 15) / 16;  // cache lines per row (if 64-byte aligned)
  pf.upcoming.base = upcoming.begin;   // contiguous: the default ld = 64, per_row = 1
  int64_t call = 0;
  for (int64_t ir = 0; ir < m; ir += kMr) {
    const int rows = static_cast<int>(m - ir < kMr ? m - ir : kMr);
    const int64_t next_rows = m - ir - kMr < 0 ? 0 : (m - ir - kMr < kMr ? m - ir - kMr : kMr);
    const int64_t next_lines = next_rows * pf.next_a.per_row;
    pack_pairs_transposed(A + ir * lda, lda, rows, kc, panel, kMr);
    // Never a pointer past A's rows: with no next micro-panel there is nothing to fetch.
    pf.next_a.base = next_rows ? reinterpret_cast<const char*>(A + (ir + kMr) * lda) : nullptr;
    for (int64_t jr = 0, jp = 0; jr < n; jr += kNr, ++jp, ++call) {
      const int cols = static_cast<int>(n - jr < kNr ? n - jr : kNr);
      const int nv = (cols + 15) / 16;
      const int n_last = cols - 16 * (nv - 1);
      pf.next_a.first = next_lines * jp / panels, pf.next_a.end = next_lines * (jp + 1) / panels;
      pf.upcoming.first = up_lines * call / calls, pf.upcoming.end = up_lines * (call + 1) / calls;
      kMicro<true>[rows - 1][nv - 1](kc2, panel, Bp + jr * kc2, 16 * nv, C + ir * ldc + jr, ldc,
                                     alpha, beta, n_last, &pf);
    }
  }
}

// The index that interleaves two rows of 16 bf16 (x[0..15] from row k, x[16..31] from row k+1)
// into 16 pairs: word j = (x[j], x[16+j]).
MG_BF16 inline __m512i interleave_index() {
  alignas(64) static const uint16_t idx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                               21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                               11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(idx);
}

// dst[j] = pair(r0[j], r1[j]) for j < width; r0, r1 hold `valid` floats (r1 == nullptr: a zero
// row, the padding of an odd k); columns valid..width are zero pairs. Both rows rounded to nearest
// even by VCVTNE2PS2BF16.
MG_BF16 void interleave_rows(const float* r0, const float* r1, int64_t valid, int64_t width,
                             uint32_t* dst) {
  const __m512i idx = interleave_index();
  for (int64_t j = 0; j < width; j += 16) {
    const int64_t in = valid - j < 0 ? 0 : (valid - j > 16 ? 16 : valid - j);
    const int64_t out = width - j > 16 ? 16 : width - j;
    const __mmask16 lmask = static_cast<__mmask16>((1u << in) - 1);
    const __mmask16 smask = static_cast<__mmask16>((1u << out) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(lmask, r0 + j);
    const __m512 hi = r1 ? _mm512_maskz_loadu_ps(lmask, r1 + j) : _mm512_setzero_ps();
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // [lo 0..15 | hi 0..15]
    _mm512_mask_storeu_epi32(dst + j, smask, _mm512_permutexvar_epi16(idx, both));
  }
}

// The two stages of an 8 x 8 transpose of pair words held as four zmm: Z_r holds rows 2r and 2r+1
// (words 0-7: row 2r's pairs q = 0..7, words 8-15: row 2r+1's). VPERMT2D picks each output word
// from two inputs (index bit 4 chooses the second).
//  Stage 1: Y_gs = rows 4g..4g+3 of pairs 4s..4s+3, word 4*(q - 4s) + (row - 4g), from Z_2g, Z_2g+1.
//  Stage 2: O_s  = pairs 2s and 2s+1 of rows 0..7, word 8*(q - 2s) + row, from Y_0(s/2), Y_1(s/2):
//  16 contiguous words of the packed A micro-panel.
// Eight permutes instead of the 24 shuffles of an 8 x 8 ymm transpose: the bf16 packing of A ran
// into the shuffle port, not into memory (bench_gemm 700x10000@10000x200).
struct TransposeIndex {
  alignas(64) uint32_t stage1[2][16], stage2[2][16];
  TransposeIndex() {
    for (int s = 0; s < 2; ++s)
      for (int ql = 0; ql < 4; ++ql)
        for (int rl = 0; rl < 4; ++rl)
          stage1[s][4 * ql + rl] = ((rl / 2) << 4) | (8 * (rl % 2) + 4 * s + ql);
    for (int s = 0; s < 2; ++s)
      for (int e = 0; e < 2; ++e)
        for (int row = 0; row < 8; ++row)
          stage2[s][8 * e + row] = ((row / 4) << 4) | (4 * (2 * s + e) + row % 4);
  }
};

// `rows` (<= 8) source rows contiguous in k, src(i, k) = src[i*ld + k], k < kc, into pairs
// dst[q*dst_ld + i] = pair(src(i,2q), src(i,2q+1)) for 8 columns i (past `rows`: zero). Two rows'
// 16 floats each become one zmm of pairs (VCVTNE2PS2BF16), and the transpose above puts them in
// place: the A block when A is row-major (dst_ld = 8), the B panel when B is stored transposed.
MG_BF16 void pack_pairs_transposed(const float* src, int64_t ld, int rows, int64_t kc,
                                   uint32_t* dst, int64_t dst_ld) {
  static const TransposeIndex index;
  const __m512i s1[2] = {_mm512_load_si512(index.stage1[0]), _mm512_load_si512(index.stage1[1])};
  const __m512i s2[2] = {_mm512_load_si512(index.stage2[0]), _mm512_load_si512(index.stage2[1])};
  // The 8 rows are 8 streams ld apart (the head's 700 x 10000 dlogits come from DRAM): prefetch
  // each a few lines ahead, as the FP32 packing does.
  constexpr int64_t kAhead = 256;  // floats: 16 cache lines ahead on each row
  for (int64_t k = 0; k < kc; k += 16) {
    const int64_t left = kc - k > 16 ? 16 : kc - k;
    const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1);
    // Past the end of these rows, prefetch the start of the next 8 (the next micro-panel, or the
    // next block's): a row is only kc floats long, too short for a prefetcher to warm up on.
    // Prefetches never fault, so the address may lie past A; it is formed as an integer.
    const int64_t ahead = k + kAhead, wrap = ahead >= kc ? 8 : 0, kk = wrap ? ahead - kc : ahead;
    for (int i = 0; i < 8; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(src) +
                                                 sizeof(float) * ((i + wrap) * ld + kk)),
                   _MM_HINT_T0);
    __m512i z[4];
    for (int r = 0; r < 4; ++r) {
      const int i = 2 * r;
      const __m512 lo = i < rows ? _mm512_maskz_loadu_ps(mask, src + i * ld + k) : _mm512_setzero_ps();
      const __m512 hi =
          i + 1 < rows ? _mm512_maskz_loadu_ps(mask, src + (i + 1) * ld + k) : _mm512_setzero_ps();
      z[r] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // words 0-7: row i, 8-15: row i+1
    }
    const int64_t q0 = k / 2, nq = (left + 1) / 2;
    for (int s = 0; s < 4; ++s) {
      if (2 * s >= nq) break;
      const __m512i y0 = _mm512_permutex2var_epi32(z[0], s1[s / 2], z[1]);
      const __m512i y1 = _mm512_permutex2var_epi32(z[2], s1[s / 2], z[3]);
      const __m512i out = _mm512_permutex2var_epi32(y0, s2[s % 2], y1);  // pairs 2s, 2s+1
      uint32_t* d = dst + (q0 + 2 * s) * dst_ld;
      const bool both = 2 * s + 1 < nq;
      if (dst_ld == 8) {
        _mm512_mask_storeu_epi32(d, both ? 0xffff : 0x00ff, out);
      } else {  // pair 2s+1 goes dst_ld further: its 8 words (8-15) stored from d + dst_ld - 8
        _mm512_mask_storeu_epi32(d, 0x00ff, out);
        if (both) _mm512_mask_storeu_epi32(d + dst_ld - 8, 0xff00, out);
      }
    }
  }
}

MG_BF16 void pack_a(bool trans, const float* A, int64_t lda, int64_t m, int64_t kc, float* Ap_f) {
  auto* Ap = reinterpret_cast<uint32_t*>(Ap_f);
  const int64_t kc2 = pairs(kc);
  for (int64_t p0 = 0; p0 < m; p0 += kMr) {
    const int rows = static_cast<int>(m - p0 < kMr ? m - p0 : kMr);
    uint32_t* dst = Ap + p0 * kc2;
    if (trans) {
      // Stored [K, M]: rows 2q and 2q+1 each give 8 contiguous values of i.
      for (int64_t q = 0; q < kc2; ++q) {
        const float* r0 = A + 2 * q * lda + p0;
        interleave_rows(r0, 2 * q + 1 < kc ? r0 + lda : nullptr, rows, kMr, dst + q * kMr);
      }
    } else {
      pack_pairs_transposed(A + p0 * lda, lda, rows, kc, dst, kMr);
    }
  }
}

MG_BF16 void pack_b(bool trans, const float* B, int64_t ldb, int64_t kc, int64_t n, float* Bp_f) {
  auto* Bp = reinterpret_cast<uint32_t*>(Bp_f);
  const int64_t kc2 = pairs(kc);
  for (int64_t q0 = 0; q0 < n; q0 += kNr) {
    const int cols = static_cast<int>(n - q0 < kNr ? n - q0 : kNr);
    const int w = (cols + 15) / 16 * 16;  // packed width: whole vectors, zero-padded
    uint32_t* dst = Bp + q0 * kc2;
    if (!trans) {
      // Row-major [K, N]: rows 2q and 2q+1 of the panel interleave into one row of pairs.
      for (int64_t q = 0; q < kc2; ++q) {
        const float* r0 = B + 2 * q * ldb + q0;
        interleave_rows(r0, 2 * q + 1 < kc ? r0 + ldb : nullptr, cols, w, dst + q * w);
      }
    } else {
      // Stored [N, K]: column j of the panel is row q0 + j of B, contiguous in k.
      for (int j0 = 0; j0 < w; j0 += 8) {
        const int valid = cols - j0 < 0 ? 0 : (cols - j0 > 8 ? 8 : cols - j0);
        pack_pairs_transposed(valid ? B + (q0 + j0) * ldb : B, ldb, valid, kc, dst + j0, w);
      }
    }
  }
}

}  // namespace

const Arch& arch_avx512_bf16() {
  // Same register tile, kc and nc as the FP32 kernel. kc counts k (not pairs). A packed A block
  // is half the FP32 one's bytes, so mc doubles to 512 (512 x 512 pairs of bf16 = 512 KiB, the
  // L2 share the FP32 block has; bench_gemm, 2 threads, Zen 5: 1024^3 723 -> 837 GFLOP/s).
  // macro_a_direct up to N = 256: its whole kc x N B panel (256 KiB at most) stays in L2 next to
  // the streaming A; wider ones lost to packing A as a block (128 x 1600 @ 1600 x 400: 757 -> 684
  // GFLOP/s), narrower ones gained (700 x 10000 @ 10000 x 200: 690 -> 840).
  static const Arch arch = {"avx512_bf16",       kMr,         kNr,    16,     /*mc=*/512,
                            /*kc=*/kKc,          /*nc=*/3072, pack_a, pack_b, macro,
                            /*b_in_place=*/false, /*k_per_slot=*/2, macro_a_direct,
                            /*a_direct_max_n=*/256};
  return arch;
}

}  // namespace mg::gemm_detail

#else  // not x86: never selected (gemm.cpp only picks it when the CPU reports AVX512_BF16)

namespace mg::gemm_detail {
const Arch& arch_avx512_bf16() {
  static const Arch arch = {"avx512_bf16", 0, 0, 0, 0, 0, 0, nullptr, nullptr, nullptr, false};
  return arch;
}
}  // namespace mg::gemm_detail

#endif
