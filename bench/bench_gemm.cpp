// GEMM throughput on the model's shapes and 1024^3, next to the machine's FP32 FMA peak.
//
//   make MODE=release build/release/bench/bench_gemm && ./build/release/bench/bench_gemm
//   options: --kernel auto|scalar|avx2|avx512|avx512_bf16   --runs R (default 5)   --threads T
//
// Output, one line per measurement, for bench/run.sh to merge with bench/torch_gemm.py's:
//   gemm <shape> mosgrad <GFLOP/s>          (median of the runs)
//   peak <1t|2t> fma <GFLOP/s>              (register-only FMA loop)
// A shape is written op(A) @ op(B) as "MxK@KxN", with "-NT" etc. when an operand is transposed.
// Lines starting with # are commentary: kernel and thread count, best and worst run, and GFLOP
// per second of process CPU time (robust to other jobs time-sharing the cores).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "tensor/gemm.h"
#include "tensor/gemm_kernels.h"
#include "bench/fma_peak.h"
#include "tensor/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Shape {
  bool ta, tb;
  int64_t M, K, N;
  bool packed = false;  // B packed once outside the timing (mg::PackedB), as the LSTM's W_hh
};

std::string shape_name(const Shape& s) {
  std::string n = std::to_string(s.M) + "x" + std::to_string(s.K) + "@" + std::to_string(s.K) +
                  "x" + std::to_string(s.N);
  if (s.ta || s.tb) n += std::string("-") + (s.ta ? "T" : "N") + (s.tb ? "T" : "N");
  if (s.packed) n += "-prepacked";
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  mg::GemmKernel kind = mg::GemmKernel::kAuto;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i], val = argv[i + 1];
    if (opt == "--runs")
      runs = std::max(3, std::atoi(val.c_str()));
    else if (opt == "--threads")
      mg::set_num_threads(std::atoi(val.c_str()));
    else if (opt == "--kernel") {
      for (mg::GemmKernel k :
           {mg::GemmKernel::kAuto, mg::GemmKernel::kScalar, mg::GemmKernel::kAvx2,
            mg::GemmKernel::kAvx512, mg::GemmKernel::kAvx512Bf16})
        if (val == mg::gemm_kernel_name(k)) kind = k;
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--kernel auto|scalar|avx2|avx512|avx512_bf16] [--runs R] [--threads T]\n",
          argv[0]);
      return 2;
    }
  }
  if (!mg::gemm_kernel_supported(kind)) {
    std::fprintf(stderr, "kernel %s not supported on this CPU\n", mg::gemm_kernel_name(kind));
    return 1;
  }
  // The prepacked shape packs for the process's precision: bf16 when that kernel is benchmarked.
  if (kind == mg::GemmKernel::kAvx512Bf16) mg::set_gemm_precision(mg::GemmPrecision::kBf16);
  const bool packed_ok = kind == mg::GemmKernel::kAvx512Bf16 || kind == mg::GemmKernel::kAuto ||
                         kind == mg::gemm_default_kernel();
  const mg::GemmKernel resolved = kind == mg::GemmKernel::kAuto ? mg::gemm_default_kernel() : kind;
  const std::string who = kind == mg::GemmKernel::kAuto
                              ? "mosgrad"
                              : std::string("mosgrad-") + mg::gemm_kernel_name(kind);
  std::printf("# kernel %s, %d threads, median of %d runs\n", mg::gemm_kernel_name(resolved),
              mg::num_threads(), runs);

  const int lanes = mg::bench::fma_lanes();
  if (lanes) {
    const int max_t = mg::num_threads();
    for (int t = 1; t <= std::max(2, max_t); ++t)
      std::printf("peak %dt fma %.1f\n", t, mg::bench::measure_peak(t, lanes));
    std::fflush(stdout);
  }

  const Shape shapes[] = {
      {false, false, 1024, 1024, 1024},
      {false, false, 700, 200, 10000},      // output projection: (T*B x H) @ (H x V)
      {false, true, 700, 200, 10000},       // same with the weight stored [V, H]
      {false, false, 3500, 200, 10000},     // a longer unroll
      {false, false, 700, 10000, 200},      // its input gradient: dlogits @ W, W stored [V, H]
      {false, false, 20, 400, 1600},        // one LSTM time step: (B x 2H) @ (2H x 4H)
      {false, false, 20, 400, 1600, true},  // the same, W_hh packed once per sequence (bf16 LSTM)
      {false, false, 700, 400, 1600},       // the LSTM input product over all steps
  };
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    if (s.packed && !packed_ok) continue;  // PackedB packs for the default or the bf16 kernel
    std::vector<float> A(static_cast<size_t>(s.M * s.K)), B(static_cast<size_t>(s.K * s.N)),
        C(static_cast<size_t>(s.M * s.N));
    for (float& x : A) x = u(rng);
    for (float& x : B) x = u(rng);
    const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const mg::PackedB packed_b =
        s.packed ? mg::PackedB(s.tb, s.K, s.N, B.data(), ldb) : mg::PackedB();
    auto call = [&] {
      if (s.packed)
        mg::gemm_packed_b(s.M, s.N, s.K, 1.0f, A.data(), lda, packed_b, 0.0f, C.data(), s.N);
      else
        mg::gemm_with_kernel(kind, s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb,
                             0.0f, C.data(), s.N);
    };
    const double flop = 2.0 * s.M * s.N * s.K;
    // Calls per run: enough for ~0.2 s, so that timer resolution and one-off stalls do not matter.
    // Sized from the fastest of three calls: one slow call (another job had the core) would
    // otherwise make every run a handful of calls long and as noisy as a single one.
    call();
    double once = 1e9;
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      call();
      once = std::min(once, std::max(1e-7, seconds_since(t0)));
    }
    const int64_t calls = std::max<int64_t>(1, static_cast<int64_t>(0.2 / once));
    std::vector<double> rates, per_cpu_s;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = Clock::now();
      const std::clock_t c0 = std::clock();
      for (int64_t c = 0; c < calls; ++c) call();
      rates.push_back(flop * calls / seconds_since(t0) / 1e9);
      per_cpu_s.push_back(flop * calls / (double(std::clock() - c0) / CLOCKS_PER_SEC) / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    std::sort(per_cpu_s.begin(), per_cpu_s.end());
    std::printf("gemm %s %s %.1f\n", shape_name(s).c_str(), who.c_str(), rates[rates.size() / 2]);
    // GFLOP per second of process CPU time: what the threads achieve while they hold a core,
    // comparable with "peak 1t" when other jobs share the machine (an idle spinning OpenMP
    // thread counts against it).
    std::printf("# %s best %.1f worst %.1f (%lld calls per run), per CPU-second %.1f\n",
                shape_name(s).c_str(), rates.back(), rates.front(), static_cast<long long>(calls),
                per_cpu_s[per_cpu_s.size() / 2]);
    std::fflush(stdout);
  }
  return 0;
}
