#include "lm/dyneval.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace mg {

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
  for (int64_t i = 0; i < data.rows - 1;) {
    const Batch b = get_batch(data, i, cfg.bptt);
    model.zero_grad();
    hidden = detach_hidden(hidden);
    ModelOutput out = model.forward(b.input, b.seq_len, 1, hidden, &b.target);
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
    const double share =
        static_cast<double>(b.seq_len) / cfg.bptt;  // the last segment may be short
    total += share * out.loss.item();
    weight += share;
    hidden = out.hidden;
    i += b.seq_len;
  }
  model.zero_grad();
  EvalResult r;
  r.loss = weight > 0 ? total / weight : 0;
  r.targets = data.rows - 1;
  return r;
}

EvalResult dynamic_evaluate(RNNModel& model, const std::vector<int64_t>& train_ids,
                            const std::vector<int64_t>& eval_ids, const DynevalConfig& cfg) {
  require_eval_targets(static_cast<int64_t>(eval_ids.size()), 1, "dyneval: the text to score");
  const DynevalStats stats = gradient_statistics(model, train_ids, cfg);
  return dynamic_evaluate(model, stats, eval_ids, cfg);
}

}  // namespace mg
