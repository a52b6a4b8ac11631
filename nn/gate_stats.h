// Gate saturation of the LSTM layers, for the training-health statistics (--log-stats,
// lm/health_stats.h). A gate is saturated where its derivative nearly vanishes, so the gradient
// through it stops: a sigmoid gate (i, f, o) below 0.01 or above 0.99 (σ' = σ(1-σ) < 0.0099), the
// candidate g = tanh(·) beyond ±0.99 (tanh' = 1-g² < 0.02).
//
// While a GateStatsScope is alive on this thread, every fused LSTM layer's forward (nn/lstm_fused)
// appends one GateSaturation, in call order, so a model's forward gives one per layer. Without a
// scope nothing is counted and nothing is copied. The LSTM built from ops (--fused-lstm false)
// does not report (its gates are the course's task 4.1).
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

struct GateSaturation {
  int64_t values = 0;                   // per gate: T*B*H
  int64_t saturated[4] = {0, 0, 0, 0};  // i, f, g, o
  double fraction(int gate) const {
    return values ? static_cast<double>(saturated[gate]) / static_cast<double>(values) : 0.0;
  }
};

class GateStatsScope {
 public:
  explicit GateStatsScope(std::vector<GateSaturation>* out);
  ~GateStatsScope();
  GateStatsScope(const GateStatsScope&) = delete;
  GateStatsScope& operator=(const GateStatsScope&) = delete;

 private:
  std::vector<GateSaturation>* previous_;
};

// True while a scope is alive on this thread: the layer should report.
bool gate_stats_wanted();
// acts [rows, 4H]: post-activation i, f, g, o blocks of each row (CPU memory). Appends one entry.
void report_gate_saturation(const float* acts, int64_t rows, int64_t H);

}  // namespace mg
