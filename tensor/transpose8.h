// The in-register transpose of an 8 x 8 block of floats that the AVX-512 GEMM's packing
// (tensor/gemm_avx512.cpp) and the tiled transposed copy (transpose_rows, tensor/copy_contiguous.cpp) share.
// x86-64 with GCC or Clang only; include it where immintrin.h is available.
#pragma once

#include <immintrin.h>

namespace mg {

// r[0..7] are 8 rows of 8 floats; afterwards r[i] holds column i (unpack pairs of rows, shuffle
// pairs of pairs, then swap 128-bit halves). target("avx2") is a subset of every caller's target,
// so it inlines into the AVX-512 kernels too.
__attribute__((target("avx2"), always_inline)) inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

}  // namespace mg
