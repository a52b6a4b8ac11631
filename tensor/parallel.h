// One way to run loops on several cores. Every kernel in mosgrad splits work so that each output
// element is computed by exactly one thread in a fixed order: results never depend on the thread
// count (reductions that span chunks combine fixed-size partial sums serially).
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mg {

inline int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

inline void set_num_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(std::max(1, n));
#else
  (void)n;
#endif
}

// Calls fn(begin, end) over [0, n) in chunks of at least `grain` iterations. Small loops run
// inline: an OpenMP region costs microseconds, which only pays for itself on enough work.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
#ifdef _OPENMP
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), max_chunks));
  if (threads > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) fn(begin, end);
    }
    return;
  }
#else
  (void)grain;  // one thread: nothing to split
#endif
  fn(0, n);
}

}  // namespace mg
