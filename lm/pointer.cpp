#include "lm/pointer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "lm/batching.h"

namespace mg {

PointerStream pointer_stream(RNNModel& model, const std::vector<int64_t>& ids, int64_t bptt) {
  if (ids.size() < 2)
    throw std::invalid_argument("pointer: the text has " + std::to_string(ids.size()) +
                                " tokens; it needs at least 2 (one target)");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const Batched data = batchify(ids, 1);
  Hidden hidden = model.init_hidden(1);
  PointerStream s;
  s.H = model.config.layer_sizes().back();
  for (int64_t i = 0; i < data.rows - 1;) {
    const Batch batch = get_batch(data, i, bptt);
    const int64_t T = batch.seq_len;
    ModelOutput out = model.forward(batch.input, T, 1, hidden);
    const Tensor log_prob = contiguous(out.log_prob.cpu());     // [T,V]
    const Tensor h = contiguous(out.raw_outputs.back().cpu());  // [T,1,H]
    const int64_t V = log_prob.size(1);
    const float* lp = log_prob.data();
    const float* hp = h.data();
    for (int64_t t = 0; t < T; ++t) {
      const int64_t target = batch.target[t];
      s.targets.push_back(target);
      s.p_model.push_back(std::exp(static_cast<double>(lp[t * V + target])));
      s.keys.insert(s.keys.end(), hp + t * s.H, hp + (t + 1) * s.H);
    }
    hidden = out.hidden;
    i += T;
  }
  model.train(was_training);
  return s;
}

std::vector<std::vector<double>> pointer_probabilities(const PointerStream& s, int64_t window,
                                                       const std::vector<double>& thetas) {
  if (window < 1) throw std::invalid_argument("pointer: --window must be at least 1");
  const int64_t N = s.size(), H = s.H;
  const int64_t n_theta = static_cast<int64_t>(thetas.size());
  std::vector<std::vector<double>> p(thetas.size(), std::vector<double>(N, 0.0));
  for (auto& row : p) row[0] = -1;  // t = 0: nothing cached yet
#pragma omp parallel
  {
    // Each t is computed by one thread in a fixed order: the same result for any thread count.
    std::vector<double> dots(window);
#pragma omp for schedule(dynamic, 64)
    for (int64_t t = 1; t < N; ++t) {
      const int64_t first = std::max<int64_t>(0, t - window), L = t - first;
      const float* q = &s.keys[t * H];
      double max_dot = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < L; ++j) {  // h_tᵀ h_i over the cached positions i = first + j
        const float* k = &s.keys[(first + j) * H];
        double d = 0;
        for (int64_t c = 0; c < H; ++c) d += static_cast<double>(q[c]) * k[c];
        dots[j] = d, max_dot = std::max(max_dot, d);
      }
      for (int64_t a = 0; a < n_theta; ++a) {
        // softmax_i(θ·dot_i), summed over the cached positions whose next word is the target
        const double theta = thetas[a];
        double total = 0, hit = 0;
        for (int64_t j = 0; j < L; ++j) {
          const double e = std::exp(theta * (dots[j] - max_dot));
          total += e;
          if (s.targets[first + j] == s.targets[t]) hit += e;
        }
        p[a][t] = hit / total;
      }
    }
  }
  return p;
}

double pointer_mixture_loss(const PointerStream& s, const std::vector<double>& p_ptr,
                            double lambda) {
  double total = 0;
  for (int64_t t = 0; t < s.size(); ++t) {
    const double p = p_ptr[t] < 0 ? s.p_model[t] : (1 - lambda) * s.p_model[t] + lambda * p_ptr[t];
    total -= std::log(p);
  }
  return total / static_cast<double>(s.size());
}

PointerGrid pointer_grid(const PointerStream& s, int64_t window, const std::vector<double>& thetas,
                         const std::vector<double>& lambdas) {
  if (thetas.empty() || lambdas.empty())
    throw std::invalid_argument("pointer: the grid needs at least one θ and one λ");
  for (double l : lambdas)
    if (!(l >= 0 && l <= 1))
      throw std::invalid_argument("pointer: λ must be in [0, 1], got " + std::to_string(l));
  const auto p = pointer_probabilities(s, window, thetas);
  PointerGrid g;
  for (size_t a = 0; a < thetas.size(); ++a)
    for (double lambda : lambdas) {
      const PointerScore sc{thetas[a], lambda, pointer_mixture_loss(s, p[a], lambda)};
      g.scores.push_back(sc);
      if (g.scores.size() == 1 || sc.loss < g.best.loss) g.best = sc;
    }
  // θ and λ spelled as the command's own output spells them. λ at 0 or 1, its bounds, cannot
  // have a better value outside the grid.
  const auto edge = [&](const std::vector<double>& grid, double best, const char* name,
                        bool bounded) {
    const auto [lo, hi] = std::minmax_element(grid.begin(), grid.end());
    if (*lo == *hi || (best != *lo && best != *hi) || (bounded && (best == 0 || best == 1))) return;
    std::ostringstream text;
    text << (g.edge.empty() ? "" : ", ") << name << " " << best << " is the grid's "
         << (best == *hi ? "largest" : "smallest");
    g.edge += text.str();
  };
  edge(thetas, g.best.theta, "theta", false);
  edge(lambdas, g.best.lambda, "lambda", true);
  return g;
}

const std::vector<double>& pointer_thetas() {
  static const std::vector<double> v = {0.25, 0.5,  1.0,  1.5,  2.0,  3.0,  4.0, 6.0,
                                        8.0,  12.0, 16.0, 24.0, 32.0, 48.0, 64.0};
  return v;
}
const std::vector<double>& pointer_lambdas() {
  static const std::vector<double> v = {0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3};
  return v;
}

double model_only_loss(const PointerStream& s) {
  double total = 0;
  for (double p : s.p_model) total -= std::log(p);
  return total / static_cast<double>(s.size());
}

}  // namespace mg
