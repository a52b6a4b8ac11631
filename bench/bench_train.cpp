// Training and evaluation throughput of one preset, the way bench/torch_bench.py measures PyTorch:
// V = 10000 (PTB), synthetic token ids, fixed T, forward + backward + clip + SGD step; median
// tokens/s of several timed runs after a warm-up step; peak RSS of this process (run one preset per
// process).
//   build/release/bench/bench_train --preset small-mos [--seconds 10] [--repeats 3] [--threads 2]
//                                   [--mode train|eval|both] [--profile] [--device cpu|cuda]
//                                   [--tf32] [--precision fp32|bf16] [--stream-chunk-rows R]
// Prints one JSON line: {"preset":..., "train_tok_s":..., "eval_tok_s":..., "peak_rss_mb":...}
// On the CPU, training also gives "fma_peak_gflops": the FP32 FMA peak (bench/fma_peak.h) with
// the same threads, best of bursts right before and right after the timed steps. The share of the
// ceiling (tokens/s x FLOP per token / peak) then divides two figures of the same minute: this
// machine's speed drifts by 5-10% over minutes (other tenants), and a peak measured at the end of
// `make bench`, a quarter of an hour later, mixed two states.
// With --device cuda the model runs on the GPU; each timed run ends with a device synchronisation,
// and the line adds the peak GPU memory held by tensors ("peak_gpu_mb") and the share of the
// timed wall time cuBLAS's GEMMs kept the GPU busy ("gemm_share", from CUDA events).
// --stream-chunk-rows sets the fused head's rows per chunk where its logits stream (evaluation;
// nn/heads.h FusedLossOptions); the GPU's default chunk (nn/fused_head_loss.cpp) came from it.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "bench/fma_peak.h"
#include "cuda/backend.h"
#include "lm/optim.h"
#include "lm/recipe_rules.h"
#include "lm/train.h"
#include "lm/train_config.h"
#include "tensor/allocator.h"
#include "tensor/parallel.h"

using namespace mg;
using Clock = std::chrono::steady_clock;

namespace {

// Floating-point operations of one training token, counting the matrix products only (the
// elementwise passes are a few per cent): the forward's products, and twice as many backward (the
// gradient of each product's input and of its weight). With the FP32 FMA peak this gives the share
// of the FP32 ceiling a run reaches, in bench/run.sh's table.
//   LSTM layer l (input n_in, hidden h): 2 * 4h * (n_in + h)    (input and recurrent products)
//   softmax / sigsoftmax head:           2 * E * V              (logits; E = the last layer)
//   mixture heads (K experts, last H):   2 * H * K * E + 2 * H * K  (latent, prior)
//                                        + 2 * K * E * V (mos, mosig) or 2 * E * V (moc)
double train_flop_per_token(const ModelConfig& m) {
  double fwd = 0;
  const std::vector<int64_t> sizes = m.layer_sizes();
  int64_t in = m.emsize;
  for (int64_t h : sizes) fwd += 2.0 * 4 * h * (in + h), in = h;
  const double E = m.emsize, V = m.ntoken, K = m.n_experts, H = sizes.back();
  if (!is_mixture(m.head))
    fwd += 2 * E * V;
  else
    fwd += 2 * H * K * E + 2 * H * K + (m.head == HeadKind::MoC ? 2 * E * V : 2 * K * E * V);
  return 3 * fwd;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux reports KiB
}

std::vector<int64_t> random_ids(int64_t n, int64_t V, Generator& gen) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int64_t>(philox_uniform(gen.seed, gen.advance(1)) * V) % V;
  return ids;
}

}  // namespace

int run(int argc, char** argv) {
  std::string preset = "small-mos", mode = "both";
  double seconds = 10;
  int repeats = 3, threads = 0;
  bool profile = false, tf32 = false;
  int64_t stream_chunk_rows = 0;   // 0: the head's default
  std::string precision = "fp32";  // fp32 | bf16: the operands of every CPU GEMM (tensor/gemm.h)
  Device device = Device::CPU;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--preset")
      preset = next();
    else if (a == "--seconds")
      seconds = std::stod(next());
    else if (a == "--repeats")
      repeats = std::stoi(next());
    else if (a == "--threads")
      threads = std::stoi(next());
    else if (a == "--mode")
      mode = next();
    else if (a == "--profile")
      profile = true;
    else if (a == "--device")
      device = parse_device(next());
    else if (a == "--tf32")
      tf32 = true;
    else if (a == "--precision")
      precision = next();
    else if (a == "--stream-chunk-rows")
      stream_chunk_rows = std::stoll(next());
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (threads > 0) set_num_threads(threads);
  if (precision != "fp32" && precision != "bf16") {
    std::fprintf(stderr, "--precision expects fp32 or bf16, got '%s'\n", precision.c_str());
    return 2;
  }
  if (precision == "bf16") set_gemm_precision(GemmPrecision::kBf16);  // throws without AVX512_BF16
  TrainConfig cfg = preset_config(preset);
  cfg.model.ntoken = 10000;
  RNNModel model(cfg.model, 1);
  model.head->fused_options.stream_chunk_rows = stream_chunk_rows;
  if (device == Device::CUDA) require_cuda(), cuda_set_tf32(tf32), model.to(Device::CUDA);
  auto sync = [&] {
    if (device == Device::CUDA) cuda_synchronize();
  };
  const int64_t T = cfg.bptt, B = cfg.batch_size, N = T * B;
  Generator data_gen(7);
  Optimizer opt(OptimizerKind::SGD, model.named_parameters(), 0.0f);
  const std::vector<Tensor> params = model.parameters();

  auto train_step = [&](Hidden& hidden, bool timed_parts, double* parts) {
    const std::vector<int64_t> ids = random_ids(N, 10000, data_gen),
                               targets = random_ids(N, 10000, data_gen);
    auto t0 = Clock::now();
    hidden = detach_hidden(hidden);
    ModelOutput out = model.forward(ids, T, B, hidden, &targets);
    Tensor loss = regularised_loss(out, cfg.alpha, cfg.beta);
    auto t1 = Clock::now();
    loss.backward();
    auto t2 = Clock::now();
    clip_grad_norm(params, cfg.clip);
    opt.step(cfg.lr);
    opt.zero_grad();
    hidden = out.hidden;
    auto t3 = Clock::now();
    if (timed_parts) {
      parts[0] += std::chrono::duration<double>(t1 - t0).count();
      parts[1] += std::chrono::duration<double>(t2 - t1).count();
      parts[2] += std::chrono::duration<double>(t3 - t2).count();
    }
  };

  double train_tok_s = 0, eval_tok_s = 0, gemm_share = 0, fma_peak = 0;
  const int lanes = device == Device::CPU ? bench::fma_lanes() : 0;
  if (mode == "train" || mode == "both") {
    model.train();
    Hidden hidden = model.init_hidden(B);
    double parts[3] = {0, 0, 0};
    train_step(hidden, false, parts);  // warm-up: first-touch allocations
    sync();
    if (device == Device::CUDA) cuda_gemm_timing(true);
    if (lanes) fma_peak = bench::measure_peak(num_threads(), lanes);  // ~0.15 s
    std::vector<double> rates, cpu_rates;
    double timed = 0;  // seconds of all timed runs
    for (int r = 0; r < repeats; ++r) {
      int64_t tokens = 0;
      const auto start = Clock::now();
      const std::clock_t cpu0 = std::clock();
      while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
        train_step(hidden, profile, parts);
        tokens += N;
      }
      sync();
      const double run = std::chrono::duration<double>(Clock::now() - start).count();
      rates.push_back(tokens / run);
      cpu_rates.push_back(tokens / (double(std::clock() - cpu0) / CLOCKS_PER_SEC));
      timed += run;
    }
    train_tok_s = median(rates);
    if (lanes) fma_peak = std::max(fma_peak, bench::measure_peak(num_threads(), lanes));
    // Tokens per second of this process's CPU time: with --threads 1 it measures the work, not
    // the machine's other jobs (with more threads, OpenMP's waiting spins count too).
    if (profile) std::fprintf(stderr, "train tokens per CPU second: %.1f\n", median(cpu_rates));
    if (device == Device::CUDA) gemm_share = cuda_gemm_timing(false) / timed;
    if (profile)
      std::fprintf(stderr, "time split: forward %.1f s, backward %.1f s, clip+step %.1f s\n",
                   parts[0], parts[1], parts[2]);
  }
  if (mode == "eval" || mode == "both") {
    model.eval();
    NoGradGuard no_grad;
    Hidden hidden = model.init_hidden(10);
    const int64_t Te = cfg.bptt, Be = 10;
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
      int64_t tokens = 0;
      const auto start = Clock::now();
      while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
        const std::vector<int64_t> ids = random_ids(Te * Be, 10000, data_gen),
                                   targets = random_ids(Te * Be, 10000, data_gen);
        ModelOutput out = model.forward(ids, Te, Be, hidden, &targets);
        hidden = out.hidden;
        tokens += Te * Be;
      }
      sync();
      rates.push_back(tokens / std::chrono::duration<double>(Clock::now() - start).count());
    }
    eval_tok_s = median(rates);
  }
  if (device == Device::CUDA) {
    std::printf(
        "{\"impl\":\"mosgrad\",\"device\":\"%s\",\"preset\":\"%s\",\"train_tok_s\":%.1f,\"eval_tok_"
        "s\":%.1f,"
        "\"peak_gpu_mb\":%.1f,\"gemm_share\":%.3f}\n",
        cuda_device_description().c_str(), preset.c_str(), train_tok_s, eval_tok_s,
        cuda_peak_live_bytes() / 1048576.0, gemm_share);
    return 0;
  }
  std::printf(
      "{\"impl\":\"mosgrad\",\"preset\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"train_tok_"
      "s\":%.1f,\"eval_tok_s\":%.1f,\"peak_rss_mb\":%.1f,\"peak_tensor_mb\":%.1f,\"train_flop_per_"
      "token\":%.0f,\"fma_peak_gflops\":%.1f}\n",
      preset.c_str(), precision.c_str(), num_threads(), train_tok_s, eval_tok_s, peak_rss_mb(),
      allocator_stats().peak_live_bytes / 1048576.0, train_flop_per_token(cfg.model), fma_peak);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
}
