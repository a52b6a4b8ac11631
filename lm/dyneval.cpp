#include "lm/dyneval.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "io/strf.h"
#include "tensor/kernels.h"

namespace mg {

namespace {

// The settings that make the adaptation steps η·∇/(MS+ε) larger than the defaults do, as the
// flags that set them: what to change when the steps diverge.
std::string step_settings(const DynevalConfig& cfg) {
  const DynevalConfig d;
  std::string larger;
  const auto add = [&](const std::string& s) { larger += (larger.empty() ? "" : ", ") + s; };
  if (cfg.lr > d.lr) add(strf("--lr %g (default %g)", cfg.lr, d.lr));
  if (cfg.epsilon < d.epsilon) add(strf("--epsilon %g (default %g)", cfg.epsilon, d.epsilon));
  if (cfg.mean_squares) add("--ms true (MS from the mean of the squares: a smaller MS)");
  if (cfg.max_stat_batches > 0)
    add(strf("--max_stat_batches %lld (MS summed over fewer segments: a smaller MS)",
             static_cast<long long>(cfg.max_stat_batches)));
  if (larger.empty())
    return strf("the steps diverged at the default settings: lower --lr (%g) or raise --epsilon",
                cfg.lr);
  return "the steps diverged; likely cause " + larger + ": lower --lr or raise --epsilon";
}

// The error when the loss of the segment scored after `steps` adaptation steps, ending at target
// `target` of `targets`, is not finite or so large that the mean over the text cannot be.
std::runtime_error diverged(const DynevalConfig& cfg, double loss, int64_t steps, int64_t target,
                            int64_t targets) {
  std::string what = strf("dyneval: the loss is %g nats per word at target %lld of %lld", loss,
                          static_cast<long long>(target), static_cast<long long>(targets));
  what += steps == 0 ? " before any adaptation step"
                     : strf(" after %lld adaptation step%s", static_cast<long long>(steps),
                            steps == 1 ? "" : "s");
  if (std::isfinite(loss))
    what += strf(", so the mean over the text is above %.2f nats", max_finite_loss() + 1);
  what += " and the perplexity cannot be finite: ";
  return std::runtime_error(what + (steps == 0 ? "the model itself gives it, whatever the dyneval "
                                                 "settings"
                                               : step_settings(cfg)));
}

}  // namespace

DynevalStats gradient_statistics(RNNModel& model, const std::vector<int64_t>& train_ids,
                                 const DynevalConfig& cfg) {
  require_eval_targets(static_cast<int64_t>(train_ids.size()), cfg.stat_batch_size,
                       "dyneval: the training text for the gradient statistics");
  const std::vector<Tensor> params = model.parameters();
  // Dropout off but gradients on: "train mode without dropout" is eval mode with grad recording.
  model.eval();

  // ---- MS = sqrt(Σ ∇²) over the training segments (sqrt(mean ∇²) with --ms) ----
  std::vector<std::vector<double>> sum_sq(params.size());
  for (size_t p = 0; p < params.size(); ++p)
    sum_sq[p].assign(static_cast<size_t>(params[p].numel()), 0.0);
  const Batched train = batchify(train_ids, cfg.stat_batch_size);
  Hidden hidden = model.init_hidden(train.batch);
  int64_t segments = 0;
  for (int64_t i = 0; i < train.rows - 1;) {
    const Batch b = get_batch(train, i, cfg.bptt);
    model.zero_grad();
    hidden = detach_hidden(hidden);
    ModelOutput out = model.forward(b.input, b.seq_len, b.batch, hidden, &b.target);
    out.loss.backward();
    for (size_t p = 0; p < params.size(); ++p) {
      const Tensor g = params[p].grad();
      if (!g.defined()) continue;
      const Tensor host = g.cpu();  // the statistics are kept on the host, whatever the device
      const float* d = host.data();
      double* s = sum_sq[p].data();
      parallel_for(params[p].numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        double* sk = s;
        for (int64_t k = begin; k < end; ++k) sk[k] += static_cast<double>(d[k]) * d[k];
      });
    }
    hidden = out.hidden;
    i += b.seq_len;
    if (++segments == cfg.max_stat_batches) break;
  }
  model.zero_grad();
  double gsum = 0;  // Σ over parameters of each one's mean MS
  for (auto& m : sum_sq) {
    double mean_ms = 0;
    for (double& v : m)
      v = std::sqrt(cfg.mean_squares ? v / std::max<int64_t>(segments, 1) : v), mean_ms += v;
    gsum += m.empty() ? 0 : mean_ms / m.size();
  }

  // ---- each weight's share of the decay (clipped at 1/λ where it is used) ----
  DynevalStats stats;
  stats.segments = segments;
  stats.ms.resize(params.size());
  stats.ratio.resize(params.size());
  for (size_t p = 0; p < params.size(); ++p) {
    stats.ms[p].resize(sum_sq[p].size());
    stats.ratio[p].resize(sum_sq[p].size());
    for (size_t k = 0; k < sum_sq[p].size(); ++k) {
      stats.ms[p][k] = static_cast<float>(sum_sq[p][k]);
      stats.ratio[p][k] = static_cast<float>(sum_sq[p][k] / gsum);
    }
  }
  return stats;
}

EvalResult dynamic_evaluate(RNNModel& model, const DynevalStats& stats,
                            const std::vector<int64_t>& eval_ids, const DynevalConfig& cfg) {
  require_eval_targets(static_cast<int64_t>(eval_ids.size()), 1, "dyneval: the text to score");
  std::vector<Tensor> params = model.parameters();
  if (stats.ms.size() != params.size())
    throw std::invalid_argument("dyneval: the gradient statistics are of a model with " +
                                std::to_string(stats.ms.size()) + " parameters, this one has " +
                                std::to_string(params.size()));
  for (size_t p = 0; p < params.size(); ++p)
    if (static_cast<int64_t>(stats.ms[p].size()) != params[p].numel())
      throw std::invalid_argument("dyneval: the gradient statistics do not fit parameter " +
                                  std::to_string(p) + " (" + std::to_string(stats.ms[p].size()) +
                                  " weights, the model's has " + std::to_string(params[p].numel()) +
                                  ")");
  model.eval();  // as in the statistics: no dropout, gradients recorded

  // θ₀: the weights the model starts from, which the decay pulls back towards; decrate = MS / Σ
  // mean(MS), clipped at 1/λ so the decay cannot overshoot (rounding to float is monotone, so
  // clipping the rounded ratio gives the rounded clipped ratio).
  std::vector<std::vector<float>> theta0(params.size()), decrate(params.size());
  const float max_rate = static_cast<float>(1.0 / cfg.lamb);
  for (size_t p = 0; p < params.size(); ++p) {
    theta0[p] = params[p].to_vector();
    decrate[p] = stats.ratio[p];
    for (float& r : decrate[p]) r = std::min(r, max_rate);
  }

  // ---- dynamic evaluation, batch size 1: score a segment, then adapt to it ----
  const Batched data = batchify(eval_ids, 1);
  Hidden hidden = model.init_hidden(1);
  double total = 0, weight = 0;
  // The shares below add up to (rows - 1) / bptt, and every loss is >= 0: once the weighted sum
  // passes this ceiling the mean's perplexity cannot be finite, so the run stops there (diverged
  // steps make NaN or huge losses) instead of after the whole text.
  const double ceiling = (max_finite_loss() + 1) * static_cast<double>(data.rows - 1) / cfg.bptt;
  int64_t steps = 0;
  for (int64_t i = 0; i < data.rows - 1;) {
    const Batch b = get_batch(data, i, cfg.bptt);
    model.zero_grad();
    hidden = detach_hidden(hidden);
    ModelOutput out = model.forward(b.input, b.seq_len, 1, hidden, &b.target);
    const double loss = out.loss.item();
    const double share =
        static_cast<double>(b.seq_len) / cfg.bptt;  // the last segment may be short
    if (!(total + share * loss <= ceiling))
      throw diverged(cfg, loss, steps, i + b.seq_len, data.rows - 1);
    out.loss.backward();
    {
      NoGradGuard no_grad;
      for (size_t p = 0; p < params.size(); ++p) {
        const Tensor g = params[p].grad();
        if (!g.defined()) continue;
        // On the GPU the update runs on host copies (dynamic evaluation is batch 1: small).
        Tensor weights = params[p].is_cuda() ? params[p].cpu() : params[p];
        const Tensor grad = g.cpu();
        float* w = weights.data();
        const float *d = grad.data(), *ms = stats.ms[p].data(), *rate = decrate[p].data(),
                    *w0 = theta0[p].data();
        // Each weight on its own, so any split over threads gives the same bits; the scalars are
        // locals so that the loop vectorizes (tensor/kernels.h).
        const float lamb = cfg.lamb, lr = cfg.lr, epsilon = cfg.epsilon;
        parallel_for(params[p].numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
          float* wk = w;
          for (int64_t k = begin; k < end; ++k)
            wk[k] += lamb * rate[k] * (w0[k] - wk[k]) - lr * d[k] / (ms[k] + epsilon);
        });
        if (params[p].is_cuda()) copy_into(params[p], weights);
      }
    }
    total += share * loss;
    weight += share;
    hidden = out.hidden;
    i += b.seq_len, ++steps;
  }
  model.zero_grad();
  EvalResult r;
  r.loss = weight > 0 ? total / weight : 0;
  r.targets = data.rows - 1;
  require_finite_perplexity(r.loss, "dyneval: the perplexity", step_settings(cfg));
  return r;
}

EvalResult dynamic_evaluate(RNNModel& model, const std::vector<int64_t>& train_ids,
                            const std::vector<int64_t>& eval_ids, const DynevalConfig& cfg) {
  require_eval_targets(static_cast<int64_t>(eval_ids.size()), 1, "dyneval: the text to score");
  const DynevalStats stats = gradient_statistics(model, train_ids, cfg);
  return dynamic_evaluate(model, stats, eval_ids, cfg);
}

}  // namespace mg
