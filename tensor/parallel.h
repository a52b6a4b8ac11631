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

// The barrier handed to parallel_team's body: every thread of the team waits until all have
// called it. With a team of one it does nothing.
class TeamBarrier {
 public:
  explicit TeamBarrier(bool team) : team_(team) {}
  void operator()() const {
#ifdef _OPENMP
    if (team_) {
#pragma omp barrier
    }
#endif
  }

 private:
  [[maybe_unused]] bool team_;  // read only with OpenMP
};

// Runs fn(begin, end, barrier) once on each of up to `max_threads` threads of one team; thread t
// takes its share of [0, n), cut at multiples of `align`. For loops of many short dependent steps
// (an RNN over time): one region with a barrier per step costs much less than a region (fork and
// join) per step. Every thread, even one whose share is empty, must call barrier() equally often,
// and fn must not throw (an exception cannot leave an OpenMP region).
template <typename Fn>
void parallel_team(int64_t n, int64_t align, int max_threads, const Fn& fn) {
  if (n <= 0) return;
#ifdef _OPENMP
  const int64_t units = (n + align - 1) / align;
  const int threads =
      static_cast<int>(std::min<int64_t>({max_threads, omp_get_max_threads(), units}));
  if (threads > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = std::min(n, units * t / nt * align),
                    end = std::min(n, units * (t + 1) / nt * align);
      fn(begin, end, TeamBarrier(nt > 1));
    }
    return;
  }
#else
  (void)align, (void)max_threads;
#endif
  fn(int64_t{0}, n, TeamBarrier(false));
}

}  // namespace mg
