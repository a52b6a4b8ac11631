#include "nn/gate_stats.h"

#include <cmath>

namespace mg {

namespace {
thread_local std::vector<GateSaturation>* t_gate_stats = nullptr;
}  // namespace

GateStatsScope::GateStatsScope(std::vector<GateSaturation>* out) : previous_(t_gate_stats) {
  t_gate_stats = out;
}

GateStatsScope::~GateStatsScope() {
  t_gate_stats = previous_;
}

bool gate_stats_wanted() {
  return t_gate_stats != nullptr;
}

void report_gate_saturation(const float* acts, int64_t rows, int64_t H) {
  if (!t_gate_stats) return;
  GateSaturation s;
  s.values = rows * H;
  for (int64_t r = 0; r < rows; ++r)
    for (int gate = 0; gate < 4; ++gate) {
      const float* a = acts + r * 4 * H + gate * H;
      int64_t n = 0;
      if (gate == 2)  // g = tanh(·)
        for (int64_t u = 0; u < H; ++u) n += std::fabs(a[u]) > 0.99f;
      else  // σ(·)
        for (int64_t u = 0; u < H; ++u) n += a[u] < 0.01f || a[u] > 0.99f;
      s.saturated[gate] += n;
    }
  t_gate_stats->push_back(s);
}

}  // namespace mg
