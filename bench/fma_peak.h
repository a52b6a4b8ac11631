// The machine's FP32 FMA peak, the ceiling the benchmarks' shares are taken of: independent FMA
// chains on registers only (no memory traffic), enough of them to cover latency x pipes (12 chains
// of 16 lanes; Zen 5 needs 2 pipes x 4 cycles = 8). x and y go through an empty asm so the
// compiler cannot fold the chains, and nothing is touched inside the loop: an asm operand there
// would make GCC keep the array in memory and time stores instead.
// Used by bench_gemm (its "peak" lines) and bench_train (the ceiling measured right before and
// after its timed steps, so that a share compares figures taken in the same minute).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "tensor/gemm_kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

namespace mg::bench {

constexpr int kChains = 12;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx512f"))) inline double fma_loop_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  __asm__ volatile("" : "+v"(x), "+v"(y));
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(x, y, acc[i]);
  }
  // Summed through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its own header.
  float s = 0;
  float tmp[16];
  for (int i = 0; i < kChains; ++i) {
    _mm512_storeu_ps(tmp, acc[i]);
    for (float t : tmp) s += t;
  }
  return s;
}
__attribute__((target("avx2,fma"))) inline double fma_loop_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  __asm__ volatile("" : "+x"(x), "+x"(y));
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(x, y, acc[i]);
  }
  float s = 0;
  float tmp[8];
  for (int i = 0; i < kChains; ++i) {
    _mm256_storeu_ps(tmp, acc[i]);
    for (float t : tmp) s += t;
  }
  return s;
}
#endif

// Vector lanes of the widest FP32 FMA the CPU has (16, 8), or 0: no peak to measure.
inline int fma_lanes() {
  return gemm_kernel_supported(GemmKernel::kAvx512) ? 16
         : gemm_kernel_supported(GemmKernel::kAvx2) ? 8
                                                     : 0;
}

// GFLOP/s of the FMA loop on `threads` threads, best of `reps` bursts of ~25 ms.
inline double measure_peak(int threads, int lanes, int reps = 5) {
  using Clock = std::chrono::steady_clock;
  const int64_t iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    double sink = 0;
    const auto t0 = Clock::now();
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) reduction(+ : sink) schedule(static)
#endif
    for (int t = 0; t < threads; ++t) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
      sink += lanes == 16 ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
#endif
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (sink == 12345.678) std::printf("#\n");  // use the result
    best = std::max(best, 2.0 * kChains * lanes * iters * threads / s / 1e9);
  }
  return best;
}

}  // namespace mg::bench
