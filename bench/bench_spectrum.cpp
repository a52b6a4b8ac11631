// The pieces of `mosgrad rank` on PTB-sized inputs, timed: the double Gram AᵀA of a block of
// contexts (tensor/gemm_f64.h) and the eigenvalues of an n x n symmetric matrix
// (analysis/spectrum.h).
//   build/release/bench/bench_spectrum [--n 4000] [--rows 2048] [--cols 10000] [--threads T]
// Prints seconds and G multiply-adds per second; extrapolate to V = 10,000 with n³.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "analysis/spectrum.h"
#include "tensor/parallel.h"

int main(int argc, char** argv) {
  int64_t n = 4000, rows = 2048, cols = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (a == "--n")
      n = v;
    else if (a == "--rows")
      rows = v;
    else if (a == "--cols")
      cols = v;
    else if (a == "--threads")
      mg::set_num_threads(static_cast<int>(v));
  }
  using Clock = std::chrono::steady_clock;
  std::mt19937_64 rng(1);
  std::normal_distribution<double> g;
  if (rows > 0) {
    std::vector<double> x(static_cast<size_t>(rows * cols));
    for (double& v : x) v = g(rng);
    std::vector<double> gram(static_cast<size_t>(cols * cols), 0.0);
    const auto t0 = Clock::now();
    mg::gram_accumulate_lower(x.data(), rows, cols, gram);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("gram %lld x %lld: %.2f s, %.1f G multiply-adds/s (lower triangle)\n",
                static_cast<long long>(rows), static_cast<long long>(cols), s,
                0.5 * rows * cols * cols / s / 1e9);
  }
  if (n > 0) {
    std::vector<double> a(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) a[i * n + j] = a[j * n + i] = g(rng);
    const auto t0 = Clock::now();
    const std::vector<double> l = mg::symmetric_eigenvalues(a, n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("eigenvalues n = %lld: %.2f s (x %.1f for n = 10,000: %.0f s); largest %.3f\n",
                static_cast<long long>(n), s, 1e12 / (double(n) * n * n),
                s * 1e12 / (double(n) * n * n), l[0]);
  }
  return 0;
}
