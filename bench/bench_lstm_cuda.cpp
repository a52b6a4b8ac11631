// The GPU LSTM's step paths side by side at the presets' shapes (cuda/lstm_fused.cu): one
// cooperative launch for all steps (cuda/lstm_persistent.cu), one kernel per step with h_{t-1}
// staged in shared memory (and its BPTT step with dG_{t+1} staged), one kernel
// per step and hidden unit, and a cuBLAS GEMM plus a gate kernel per step; then Auto, the default.
//   build/release-cuda/bench/bench_lstm_cuda [--repeats 20]
// Prints, per shape and path, the milliseconds of one forward (no graph, as in evaluation) and of
// one forward + backward (medians).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "cuda/backend.h"
#ifdef MG_PERSISTENT_PROFILE
#include "cuda/lstm_steps.h"
#endif
#include "nn/lstm.h"

using namespace mg;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of fn over `repeats` runs (synchronised before and after each), after a
// warm-up.
template <typename Fn>
double time_ms(Fn fn, int repeats) {
  fn();
  cuda_synchronize();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    fn();
    cuda_synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(ms);
}

}  // namespace

int run(int argc, char** argv) {
  int repeats = 20;
  std::string only;  // --only TEXT: the shapes whose name contains TEXT
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--repeats" && i + 1 < argc)
      repeats = std::stoi(argv[++i]);
    else if (std::string(argv[i]) == "--only" && i + 1 < argc)
      only = argv[++i];
    else
      throw std::runtime_error(std::string("unknown flag ") + argv[i] +
                               " (allowed: --repeats N, --only TEXT)");
  require_cuda();
  struct Shape4 {
    const char* name;
    int64_t T, B, in, H;
  };
  const std::vector<Shape4> shapes = {{"small layer 1 (train)", 35, 20, 200, 400},
                                      {"small layer 1 (eval)", 35, 10, 200, 400},
                                      {"mos-paper layer 1 (train)", 70, 12, 280, 960},
                                      {"mos-paper layer 1 (eval)", 70, 10, 280, 960},
                                      {"mos-paper layer 3 (train)", 70, 12, 960, 620},
                                      {"mos-paper layer 3 (eval)", 70, 10, 960, 620}};
  const std::pair<CudaLstmSteps, const char*> paths[] = {{CudaLstmSteps::Persistent, "persist"},
                                                         {CudaLstmSteps::Staged, "staged"},
                                                         {CudaLstmSteps::PerUnit, "per-unit"},
                                                         {CudaLstmSteps::Gemm, "cuBLAS"},
                                                         {CudaLstmSteps::Auto, "auto"}};
  std::printf("%-28s", "shape (T,B,in,H)");
  for (const auto& p : paths) std::printf(" %9s fwd %9s f+b", p.second, p.second);
  std::printf("\n");
  for (const Shape4& s : shapes) {
    if (std::string(s.name).find(only) == std::string::npos) continue;
    Generator gen(1);
    const float k = 1.0f / std::sqrt(static_cast<float>(s.H));
    auto param = [&](const mg::Shape& shape) {
      return Tensor::uniform(shape, -k, k, gen).cuda().requires_grad_();
    };
    const Tensor x = Tensor::uniform({s.T, s.B, s.in}, -1, 1, gen).cuda().requires_grad_();
    const LSTMWeights w{param({4 * s.H, s.in}), param({4 * s.H, s.H}), param({4 * s.H}),
                        param({4 * s.H})};
    const LSTMState h0{Tensor::zeros({s.B, s.H}, Device::CUDA),
                       Tensor::zeros({s.B, s.H}, Device::CUDA)};
    const Tensor dy = Tensor::ones({s.T, s.B, s.H}, Device::CUDA);
    std::printf("%-28s", s.name);
    for (const auto& p : paths) {
      cuda_lstm_set_steps(p.first);
      const double fwd = time_ms(
          [&] {
            NoGradGuard no_grad;
            lstm_fused(x, h0, w);
          },
          repeats);
      const double both = time_ms([&] { lstm_fused(x, h0, w).first.backward(dy); }, repeats);
      std::printf(" %10.3f ms %10.3f ms", fwd, both);
#ifdef MG_PERSISTENT_PROFILE
      if (p.first == CudaLstmSteps::Persistent) persistent_profile_print(s.name);
#endif
    }
    cuda_lstm_set_steps(CudaLstmSteps::Auto);
    std::printf("\n");
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_lstm_cuda: %s\n", e.what());
    return 1;
  }
}
