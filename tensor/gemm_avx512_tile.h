// The parts of an AVX-512 micro-kernel that do not depend on the number format of its operands,
// shared by the FP32 kernel (gemm_avx512.cpp) and the bf16 one (gemm_avx512_bf16.cpp): both hold
// an M x (16*NV) tile of C in FP32 zmm accumulators and differ only in their k loop.
// Included by those two files only. The functions carry the FP32 kernel's target attribute, a
// subset of the bf16 kernel's, so GCC inlines them into either.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define MG_AVX512_TILE __attribute__((target("avx512f,avx512vl,avx2,fma"), always_inline)) inline

namespace mg::gemm_detail {

// Fetch the C tile (rows ldc apart) while the k loop runs, so the update at the end does not
// stall on memory. Every line of a row: its 16*NV floats span NV lines, NV+1 if the row does not
// start a line (a prefetch of only the first and the last float left the middle line of a 48-float
// row to the update, a miss to memory per row when C is larger than the caches).
template <int M, int NV>
MG_AVX512_TILE void prefetch_c_tile(const float* c, int64_t ldc) {
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * NV - 1), _MM_HINT_T0);
  }
}

// C = alpha * acc + beta * C for the tile; `last` marks the columns of the last vector that are
// inside C (masked loads and stores: the edge tile needs no scalar path). beta == 0: C is not
// read, so NaNs in it do not propagate.
template <int M, int NV>
MG_AVX512_TILE void store_c_tile(const __m512 (&acc)[M][NV], float* c, int64_t ldc, float alpha,
                                 float beta, __mmask16 last) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = v == NV - 1 ? last : static_cast<__mmask16>(0xffff);
      __m512 r;
      if (beta == 0) {
        r = _mm512_mul_ps(va, acc[i][v]);
      } else {
        const __m512 old = _mm512_maskz_loadu_ps(mask, row + 16 * v);
        r = _mm512_fmadd_ps(va, acc[i][v], _mm512_mul_ps(vb, old));
      }
      _mm512_mask_storeu_ps(row + 16 * v, mask, r);
    }
  }
}

// Cache lines a micro-kernel call fetches ahead while it runs: lines [first, end) of a region
// whose rows are ld bytes apart with per_row lines each, line l at
// base + (l / per_row) * ld + 64 * (l % per_row) (a contiguous range: per_row = 1, ld = 64).
// The kernel issues them a share at a time over its k loop (prefetch_share): a burst of them
// before each call stalled on the miss buffers.
struct PrefetchLines {
  const char* base = nullptr;
  int64_t ld = 64, per_row = 1, first = 0, end = 0;
};

// The lines of pf due once `done` of a call's `blocks` k blocks are done; `next` is the first not
// yet issued (start it at pf.first), returned updated. Hint: _MM_HINT_T0 (to L1) or _MM_HINT_T1
// (to L2).
template <int kHint>
MG_AVX512_TILE int64_t prefetch_share(const PrefetchLines& pf, int64_t done, int64_t blocks,
                                      int64_t next) {
  const int64_t to = pf.first + (pf.end - pf.first) * done / blocks;
  for (; next < to; ++next) {
    const char* line = pf.base + next / pf.per_row * pf.ld + 64 * (next % pf.per_row);
#if defined(__clang__)  // clang's hint is a plain int constant; GCC's the enum _mm_hint
    _mm_prefetch(line, kHint);
#else
    _mm_prefetch(line, static_cast<_mm_hint>(kHint));
#endif
  }
  return next;
}

}  // namespace mg::gemm_detail
