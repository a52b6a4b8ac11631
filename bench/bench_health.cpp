// What `train --log-stats` costs (lm/health_stats.h): the training step of a preset timed as
// bench/bench_train.cpp times it (V = 10000 synthetic ids, fixed T, forward + backward + clip +
// SGD), with and without the statistics of a logged step (the gate scope around the forward, the
// gradient norms and the weight copy before the step, the ratios and layer statistics after).
// The cost at the default --log_interval 200 is a logged step's extra time over 200 steps.
//   build/release/bench/bench_health [--preset small-mos] [--steps 12] [--threads 2]
// Prints one line: preset, plain step ms, logged step ms, the cost per step at interval 200.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "lm/health_stats.h"
#include "lm/optim.h"
#include "lm/recipe_rules.h"
#include "lm/train.h"
#include "lm/train_config.h"
#include "tensor/parallel.h"
#include "tensor/philox.h"

using namespace mg;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string preset = "small-mos";
  int steps = 12, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--preset"))
      preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps"))
      steps = std::max(2, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::max(1, std::atoi(argv[i + 1]));
  }
  set_num_threads(threads);
  TrainConfig cfg = preset_config(preset);
  cfg.model.ntoken = 10000;
  RNNModel model(cfg.model, 1);
  model.train();
  const int64_t T = cfg.bptt, B = cfg.batch_size, N = T * B;
  Generator data_gen(7);
  Optimizer opt(OptimizerKind::SGD, model.named_parameters(), 0.0f);
  const std::vector<Tensor> params = model.parameters();
  HealthProbe health(model.named_parameters());
  Hidden hidden = model.init_hidden(B);
  std::vector<int64_t> ids(N), targets(N);
  // One step; with `stats`, everything a logged step of --log-stats adds. Returns seconds.
  auto step = [&](bool stats) {
    for (int64_t i = 0; i < N; ++i)  // synthetic ids, as bench_train draws them
      ids[i] =
          static_cast<int64_t>(philox_uniform(data_gen.seed, data_gen.advance(1)) * 10000) % 10000,
      targets[i] =
          static_cast<int64_t>(philox_uniform(data_gen.seed, data_gen.advance(1)) * 10000) % 10000;
    const auto t0 = Clock::now();
    hidden = detach_hidden(hidden);
    std::vector<GateSaturation> gates;
    std::optional<GateStatsScope> scope;
    if (stats) scope.emplace(&gates);
    ModelOutput out = model.forward(ids, T, B, hidden, &targets);
    scope.reset();
    regularised_loss(out, cfg.alpha, cfg.beta).backward();
    if (stats) health.before_step();
    clip_grad_norm(params, cfg.clip);
    opt.step(cfg.lr);
    opt.zero_grad();
    if (stats) (void)health.after_step(out.raw_outputs, gates, 1, 1, N);
    hidden = out.hidden;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  step(false), step(true);  // warm-up: first-touch allocations
  // Interleaved, so a drift of the machine's speed touches both alike; medians.
  std::vector<double> plain, logged;
  for (int i = 0; i < steps; ++i) plain.push_back(step(false)), logged.push_back(step(true));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double p = median(plain), l = median(logged);
  std::printf(
      "--log-stats, %s, %d threads: step %.1f ms, logged step %.1f ms (+%.1f%%); at "
      "--log_interval 200 %.3f%% of the training time\n",
      preset.c_str(), threads, 1e3 * p, 1e3 * l, 100 * (l - p) / p, 100 * (l - p) / (200 * p));
  return 0;
}
