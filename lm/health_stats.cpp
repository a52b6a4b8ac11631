#include "lm/health_stats.h"

#include <cmath>

namespace mg {

namespace {

// Values of a CPU or GPU tensor, on the host.
std::vector<float> host_values(const Tensor& t) {
  return t.is_cuda() ? t.cpu().to_vector() : t.to_vector();
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

}  // namespace

HealthProbe::HealthProbe(std::vector<std::pair<std::string, Tensor>> params)
    : params_(std::move(params)) {}

void HealthProbe::before_step() {
  grad_norms_.clear();
  before_.clear();
  for (const auto& [name, p] : params_) {
    const Tensor g = p.grad();
    grad_norms_.push_back(g.defined() ? norm(host_values(g)) : 0.0);
    before_.push_back(host_values(p));
  }
}

StatsMetrics HealthProbe::after_step(const std::vector<Tensor>& raw_outputs,
                                     const std::vector<GateSaturation>& gates, int64_t epoch,
                                     int64_t step, int64_t tokens) {
  StatsMetrics m;
  m.epoch = epoch, m.step = step, m.tokens = tokens;
  for (size_t i = 0; i < params_.size() && i < before_.size(); ++i) {
    const std::vector<float> now = host_values(params_[i].second);
    const std::vector<float>& was = before_[i];
    double moved = 0;
    for (size_t j = 0; j < now.size(); ++j) {
      const double d = static_cast<double>(now[j]) - was[j];
      moved += d * d;
    }
    const double size = norm(was);
    m.params.push_back({params_[i].first, grad_norms_[i], size > 0 ? std::sqrt(moved) / size : 0});
  }
  for (size_t l = 0; l < raw_outputs.size(); ++l) {
    const std::vector<float> h = host_values(raw_outputs[l]);
    double sum = 0, sq = 0;
    for (float x : h) sum += x, sq += static_cast<double>(x) * x;
    const double n = static_cast<double>(h.size() ? h.size() : 1);
    StatsMetrics::Layer layer;
    layer.mean = sum / n;
    layer.std = std::sqrt(std::max(0.0, sq / n - layer.mean * layer.mean));
    if (gates.size() == raw_outputs.size()) {
      layer.gates = true;
      for (int g = 0; g < 4; ++g) layer.saturated[g] = gates[l].fraction(g);
    }
    m.layers.push_back(layer);
  }
  return m;
}

}  // namespace mg
