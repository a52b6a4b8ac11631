#include "analysis/model_gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>

#include "autograd/node.h"
#include "nn/rnn_model.h"

namespace mg {

namespace {

// The step: the largest at which the error still falls as the step grows (measured on the default
// model: at 1e-3 the worst absolute error was 3e-4, at 2e-2 1.5e-5, at 1e-1 4e-6, at 2e-1 2e-6:
// float rounding of the loss, not truncation, dominates), Richardson's (4 D(h/2) - D(h)) / 3
// cancelling the h^2 truncation term. Weights start within ±1/sqrt(H).
constexpr double kStep = 1e-1;
// Float rounding leaves about 2 ulps of the loss divided by the step in every numeric derivative
// (4e-6 for a loss near 4). A gradient entry is compared against max(|autograd|, |numeric|,
// floor) with floor = 400 ulps / step (1e-3 for a loss near 4): an entry above the floor gets its
// true relative error, one below it its error relative to the floor, so rounding alone stays under
// 0.5% and the default tolerance of 1e-2 has a margin of 2. A wrong backward is off by O(1).
double noise_floor(double loss) {
  const float l = std::fabs(static_cast<float>(loss));
  return 400 * static_cast<double>(std::nextafter(l, INFINITY) - l) / kStep;
}

// Which entries of a parameter to check: all when few; else the half with the largest |gradient|
// (where a wrong backward shows most clearly) and a random half of the rest.
std::vector<int64_t> pick_entries(const std::vector<float>& grad, int64_t want,
                                  std::mt19937_64& rng) {
  const int64_t n = static_cast<int64_t>(grad.size());
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  if (want <= 0 || n <= want) return idx;
  const int64_t top = want / 2;
  std::partial_sort(idx.begin(), idx.begin() + top, idx.end(), [&](int64_t a, int64_t b) {
    return std::fabs(grad[a]) > std::fabs(grad[b]) || (grad[a] == grad[b] && a < b);
  });
  for (int64_t i = top; i < want; ++i)  // partial Fisher-Yates over the rest
    std::swap(idx[i], idx[i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - i))]);
  idx.resize(want);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int64_t i = static_cast<int64_t>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

}  // namespace

ModelGradcheckReport gradcheck_model(const TrainConfig& cfg, const ModelGradcheckOptions& o) {
  if (cfg.device != Device::CPU)
    throw std::invalid_argument("gradcheck runs on the CPU only (drop --device cuda)");
  if (cfg.paths.precision != "fp32")
    throw std::invalid_argument("gradcheck checks the FP32 gradients: --precision " +
                                cfg.paths.precision +
                                " would compare bf16-rounded products with double-precision "
                                "differences (drop --precision)");
  RNNModel model(cfg.model, cfg.seed);
  const ComputePathsScope compute(compute_paths(cfg.paths, cfg.device), &model);
  model.name_parameters();
  model.train();  // dropouts as configured; masks replayed from `masks` on every forward
  const Generator masks = model.dropout_gen;
  const int64_t T = cfg.bptt, B = cfg.batch_size, V = cfg.model.ntoken;
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> ids(T * B), targets(T * B);
  for (int64_t i = 0; i < T * B; ++i) ids[i] = rng() % V, targets[i] = rng() % V;
  const Hidden hidden = model.init_hidden(B);
  auto forward = [&] {
    model.dropout_gen = masks;
    return model.forward(ids, T, B, hidden, &targets).loss;
  };

  ModelGradcheckReport report;
  report.model = cfg.model.summary() + ", T=" + std::to_string(T) + " B=" + std::to_string(B);
  model.zero_grad();
  Tensor loss = forward();
  report.loss = loss.item();
  loss.backward();
  if (o.after_backward) o.after_backward(model);

  const auto named = model.named_parameters();
  for (const std::string& want : o.params)
    if (std::none_of(named.begin(), named.end(), [&](const auto& p) { return p.first == want; })) {
      std::string known;
      for (const auto& p : named) known += (known.empty() ? "" : ", ") + p.first;
      throw std::invalid_argument("--params: no parameter '" + want + "'; the model has " + known);
    }
  NoGradGuard no_grad;
  const double floor = noise_floor(report.loss);
  auto loss_at = [&](float* x, float value) {
    *x = value;
    return static_cast<double>(forward().item());
  };
  for (const auto& [name, param] : named) {
    if (!o.params.empty() && std::find(o.params.begin(), o.params.end(), name) == o.params.end())
      continue;
    ParamGradcheck row{name, param.shape(), 0, param.numel()};
    const std::vector<float> grad = param.grad().defined()
                                        ? param.grad().to_vector()
                                        : std::vector<float>(static_cast<size_t>(param.numel()), 0);
    for (float g : grad) row.max_grad = std::max(row.max_grad, static_cast<double>(std::fabs(g)));
    Tensor writable = param;  // the same storage: perturbed in place, restored after each entry
    float* data = writable.data();
    for (int64_t i : pick_entries(grad, o.entries, rng)) {
      const float saved = data[i];
      // D(h) over the float step actually taken: x ± h rounds, and the rounding is not noise.
      auto difference = [&](double h) {
        const float plus = static_cast<float>(saved + h), minus = static_cast<float>(saved - h);
        const double d = (loss_at(data + i, plus) - loss_at(data + i, minus)) /
                         (static_cast<double>(plus) - minus);
        data[i] = saved;
        return d;
      };
      const double numeric = (4 * difference(kStep / 2) - difference(kStep)) / 3;
      const double analytic = grad[i];
      const double abs_err = std::fabs(analytic - numeric);
      const double scale = std::max({std::fabs(analytic), std::fabs(numeric), floor});
      row.max_abs = std::max(row.max_abs, abs_err);
      row.max_rel = std::max(row.max_rel, abs_err / scale);
      ++row.checked;
    }
    row.ok = row.max_rel <= o.tolerance;
    report.ok = report.ok && row.ok;
    report.rows.push_back(row);
  }
  return report;
}

std::string gradcheck_table(const ModelGradcheckReport& r, double tolerance) {
  std::string s = r.model + ", loss " + std::to_string(r.loss) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %-10s %-18s %-10s %-11s %-11s %s\n", "parameter", "shape",
                "entries checked", "max |grad|", "max abs err", "max rel err", "");
  s += line;
  int failed = 0;
  for (const ParamGradcheck& p : r.rows) {
    const std::string checked = with_commas(p.checked) + " of " + with_commas(p.numel);
    std::snprintf(line, sizeof line, "%-22s %-10s %-18s %-10.3g %-11.3g %-11.3g %s\n",
                  p.name.c_str(), shape_str(p.shape).c_str(), checked.c_str(), p.max_grad,
                  p.max_abs, p.max_rel, p.ok ? "ok" : "FAIL");
    s += line;
    failed += !p.ok;
  }
  std::snprintf(line, sizeof line, "%s: %d of %zu parameters above tolerance %g\n",
                failed ? "FAIL" : "ok", failed, r.rows.size(), tolerance);
  return s + line;
}

}  // namespace mg
