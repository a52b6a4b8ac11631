// Training-health statistics (`train --log-stats`): beside the learning curves, what tells a
// healthy run from a sick one before the loss does (Karpathy's "A Recipe for Training Neural
// Networks"; CS231n's update-to-data ratio of ~1e-3): per parameter, the gradient's norm before
// clipping and the size of the step's update against the weight; per LSTM layer, the mean and
// spread of its output and how many of its gates are saturated (nn/gate_stats.h).
//
// Taken on the logged steps only (every --log_interval), from copies: no number of the run changes
// (the same losses, checkpoints and metrics bit for bit, tests/lm/test_health_stats.cpp), and a
// logged step costs one copy of the weights and a pass over them and the layer outputs.
// metrics.jsonl gets one "kind":"stats" line per logged step (lm/metrics.h); `mosgrad plot` draws
// them (lm/learning_curves.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lm/metrics.h"
#include "nn/gate_stats.h"
#include "tensor/tensor.h"

namespace mg {

class HealthProbe {
 public:
  explicit HealthProbe(std::vector<std::pair<std::string, Tensor>> params);
  // After backward, before clipping and the optimizer step: each gradient's norm, and a copy of
  // each weight.
  void before_step();
  // After the optimizer step: ‖w_new − w_old‖ / ‖w_old‖ per parameter, with the forward's layer
  // outputs (raw_outputs, per layer [T,B,H]) and the gate saturation its fused LSTM reported
  // (one entry per layer, or none on the LSTM built from ops).
  StatsMetrics after_step(const std::vector<Tensor>& raw_outputs,
                          const std::vector<GateSaturation>& gates, int64_t epoch, int64_t step,
                          int64_t tokens);

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<double> grad_norms_;
  std::vector<std::vector<float>> before_;
};

}  // namespace mg
