// The pieces of `mosgrad rank`'s singular values (analysis/svd.h), timed on a random matrix: the
// fold of a block of contexts into the triangular factor (TallQR), the two stages of the reduction
// to bidiagonal form (analysis/bidiagonal.h) and the one-stage reference, and the bidiagonal's
// singular values. All of PTB valid at V = 10,000 is four folds of 20,000 rows (the last 13,750),
// then one reduction of n = 10,000 and its values.
//   build/release/bench/bench_svd [--n 4000] [--rows 8000] [--folds 2] [--one_stage 1] [--band 1]
//                                 [--width 96] [--threads T]
// Prints seconds and G multiply-adds per second (a fold: rows·n²; the reduction: 4n³/3 for either
// path), and with both, the singular values' time over all of PTB valid (73,750 contexts) projected
// from them. --band 0 stops after the folds;
// --width: the band's (analysis/bidiagonal.cpp uses 96).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "analysis/bidiagonal.h"
#include "analysis/svd.h"
#include "tensor/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 4000, rows = 8000, one_stage = 1, folds = 2, band = 1, width = 96;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (a == "--n")
      n = v;
    else if (a == "--rows")
      rows = v;
    else if (a == "--folds")
      folds = v;
    else if (a == "--width")
      width = v;
    else if (a == "--band")
      band = v;
    else if (a == "--one_stage")
      one_stage = v;
    else if (a == "--threads")
      mg::set_num_threads(static_cast<int>(v));
    else {
      std::fprintf(stderr,
                   "bench_svd: unknown flag %s (--n, --rows, --folds, --one_stage, --band, "
                   "--width, --threads)\n",
                   a.c_str());
      return 2;
    }
  }
  std::mt19937_64 rng(1);
  std::normal_distribution<double> g;
  const double nnn = double(n) * n * n;
  double fold_s = 0;  // the last fold's time
  if (rows > 0) {
    std::vector<double> block(static_cast<size_t>(rows * n));  // row-major [rows, n]
    for (double& v : block) v = g(rng);
    mg::TallQR qr(n);
    for (int fold = 0; fold < folds; ++fold) {
      const auto t0 = Clock::now();
      qr.add_rows(block.data(), rows);
      const double s = fold_s = seconds_since(t0);
      // R stays triangular: rows·n² multiply-adds (analysis/svd.cpp).
      const double madds = double(rows) * n * n / 1e9;
      std::printf("fold %lld rows into R (n = %lld): %.2f s, %.1f G multiply-adds/s\n",
                  static_cast<long long>(rows), static_cast<long long>(n), s, madds / s);
    }
  }
  if (!band) return 0;
  std::vector<double> a(static_cast<size_t>(n * n));
  for (double& v : a) v = g(rng);
  std::vector<double> d, e;
  if (one_stage) {
    std::vector<double> b = a;
    const auto t0 = Clock::now();
    mg::bidiagonalise_one_stage(b, n, d, e);
    const double s = seconds_since(t0);
    std::printf("one stage n = %lld: %.2f s, %.1f G multiply-adds/s\n", static_cast<long long>(n),
                s, 4 * nnn / 3 / s / 1e9);
  }
  auto t0 = Clock::now();
  mg::reduce_to_band(a, n, width);
  const double band_s = seconds_since(t0);
  t0 = Clock::now();
  mg::band_to_bidiagonal(a, n, width, d, e);
  const double chase_s = seconds_since(t0);
  std::printf(
      "two stages n = %lld: %.2f s (to the band %.2f s, %.1f G multiply-adds/s; the chase "
      "%.2f s)\n",
      static_cast<long long>(n), band_s + chase_s, band_s, 4 * nnn / 3 / band_s / 1e9, chase_s);
  t0 = Clock::now();
  const std::vector<double> sigma = mg::bidiagonal_singular_values(d, e);
  const double values_s = seconds_since(t0);
  std::printf("bidiagonal values n = %lld: %.2f s; largest %.3f\n", static_cast<long long>(n),
              values_s, sigma[0]);
  if (rows > 0 && folds > 0) {
    // `mosgrad rank` over all of PTB valid: 73,750 contexts folded in, then one reduction (#25's
    // target: 5 minutes in all, with the contexts and their log-probabilities, 15-50 s more).
    const double all = fold_s * 73750.0 / rows + band_s + chase_s + values_s;
    std::printf(
        "projected for N = 73,750 contexts at V = %lld: %.0f s of singular values "
        "(%.2f folds of %lld rows)\n",
        static_cast<long long>(n), all, 73750.0 / rows, static_cast<long long>(rows));
  }
  return 0;
}
