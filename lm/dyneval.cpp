#include "lm/dyneval.h"

#include <cmath>

#include "autograd/ops.h"

namespace mg {

EvalResult dynamic_evaluate(RNNModel& model, const std::vector<int64_t>& train_ids,
                            const std::vector<int64_t>& eval_ids, const DynevalConfig& cfg) {
  require_eval_targets(static_cast<int64_t>(eval_ids.size()), 1, "dyneval: the text to score");
  require_eval_targets(static_cast<int64_t>(train_ids.size()), cfg.stat_batch_size,
                       "dyneval: the training text for the gradient statistics");
  std::vector<Tensor> params = model.parameters();
  // Dropout off but gradients on: "train mode without dropout" is eval mode with grad recording.
  model.eval();

  // ---- gradient statistics on training data: MS = sqrt(sum of squared gradients) ----
  std::vector<std::vector<double>> ms(params.size());
  for (size_t p = 0; p < params.size(); ++p)
    ms[p].assign(static_cast<size_t>(params[p].numel()), 0.0);
  const Batched train = batchify(train_ids, cfg.stat_batch_size);
  Hidden hidden = model.init_hidden(train.batch);
  int64_t batches = 0;
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
      for (size_t k = 0; k < ms[p].size(); ++k) ms[p][k] += static_cast<double>(d[k]) * d[k];
    }
    hidden = out.hidden;
    i += b.seq_len;
    if (++batches == cfg.max_stat_batches) break;
  }
  double gsum = 0;
  for (auto& m : ms) {
    double mean_ms = 0;
    for (double& v : m)
      v = std::sqrt(cfg.mean_squares ? v / std::max<int64_t>(batches, 1) : v), mean_ms += v;
    gsum += m.empty() ? 0 : mean_ms / m.size();
  }

  // ---- decay rates, clipped at 1/λ, and the trained weights θ₀ to decay towards ----
  std::vector<std::vector<float>> decrate(params.size()), theta0(params.size());
  for (size_t p = 0; p < params.size(); ++p) {
    theta0[p] = params[p].to_vector();
    decrate[p].resize(ms[p].size());
    for (size_t k = 0; k < ms[p].size(); ++k)
      decrate[p][k] = static_cast<float>(std::min(ms[p][k] / gsum, 1.0 / cfg.lamb));
  }

  // ---- dynamic evaluation, batch size 1: score a segment, then adapt to it ----
  const Batched data = batchify(eval_ids, 1);
  hidden = model.init_hidden(1);
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
        const float* d = grad.data();
        for (size_t k = 0; k < decrate[p].size(); ++k)
          w[k] += cfg.lamb * decrate[p][k] * (theta0[p][k] - w[k]) -
                  cfg.lr * d[k] / (static_cast<float>(ms[p][k]) + cfg.epsilon);
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

}  // namespace mg
