#include "lm/column_groups.h"

#include <optional>
#include <stdexcept>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "lm/recipe_rules.h"
#include "mpi/processes.h"
#include "nn/dropout.h"

namespace mg {

OwnedGroups owned_groups(int64_t G) {
  const int64_t N = process_count(), rank = process_rank();
  if (G < 1 || G % N != 0)
    throw std::invalid_argument("--grad-groups " + std::to_string(G) + " cannot be shared by " +
                                std::to_string(N) + " processes: N must divide G");
  return {rank * (G / N), G / N};
}

int64_t validation_groups(int64_t G, int64_t eval_batch_size) {
  return eval_batch_size % G == 0 ? G : 1;
}

Batch batch_columns(const Batch& batch, int64_t first, int64_t count) {
  const int64_t T = batch.seq_len, B = batch.batch;
  if (first < 0 || count < 1 || first + count > B)
    throw std::out_of_range("batch_columns: columns [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") of a batch of " + std::to_string(B));
  Batch part;
  part.seq_len = T, part.batch = count;
  part.input.reserve(static_cast<size_t>(T * count));
  part.target.reserve(static_cast<size_t>(T * count));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = first; b < first + count; ++b) {
      part.input.push_back(batch.input[static_cast<size_t>(t * B + b)]);
      part.target.push_back(batch.target[static_cast<size_t>(t * B + b)]);
    }
  return part;
}

Hidden hidden_columns(const Hidden& hidden, int64_t first, int64_t count) {
  NoGradGuard no_grad;
  Hidden part;
  for (const LSTMState& s : hidden)
    part.push_back({contiguous(narrow(s.h.detach(), 0, first, count)),
                    contiguous(narrow(s.c.detach(), 0, first, count))});
  return part;
}

Hidden join_columns(const std::vector<Hidden>& parts) {
  NoGradGuard no_grad;
  Hidden joined;
  for (size_t l = 0; !parts.empty() && l < parts[0].size(); ++l) {
    std::vector<Tensor> hs, cs;
    for (const Hidden& p : parts) hs.push_back(p[l].h.detach()), cs.push_back(p[l].c.detach());
    joined.push_back({cat(hs, 0), cat(cs, 0)});
  }
  return joined;
}

namespace {
// The hidden state of every column, on every process: each contributes its groups' columns.
Hidden gather_hidden(const Hidden& mine /*[B/N,H_l]*/) {
  const int N = process_count();
  if (N == 1) return mine;
  Hidden all;
  for (const LSTMState& s : mine) {
    LSTMState joined;
    for (Tensor LSTMState::*field : {&LSTMState::h, &LSTMState::c}) {
      const std::vector<float> part = (s.*field).to_vector();
      std::vector<float> whole(part.size() * static_cast<size_t>(N));
      all_gather(part.data(), static_cast<int64_t>(part.size() * sizeof(float)), whole.data());
      joined.*field = Tensor::from_vector(whole, {(s.*field).size(0) * N, (s.*field).size(1)});
    }
    all.push_back(joined);
  }
  return all;
}

// Every process's values, one per group of G, in group order.
std::vector<double> gather_per_group(const std::vector<double>& mine, int64_t G) {
  std::vector<double> all(static_cast<size_t>(G));
  all_gather(mine.data(), static_cast<int64_t>(mine.size() * sizeof(double)), all.data());
  return all;
}

// The sum, in group order, of the gradients each group left: one process folds them as they come
// (acc = ((0 + g_0) + g_1) + ...); several keep theirs, and the chain adds them in the same order.
class GradientSum {
 public:
  GradientSum(std::vector<Tensor> params, int64_t groups_here)
      : params_(std::move(params)), alone_(process_count() == 1) {
    if (alone_) {
      for (const Tensor& p : params_) acc_.push_back(Tensor::zeros(p.shape(), p.device()));
    } else {
      for (const Tensor& p : params_) floats_ += p.numel();
      parts_.reserve(static_cast<size_t>(groups_here));
    }
  }

  // Takes the gradient the group just left in .grad (a parameter it never reached counts 0).
  void take_group() {
    NoGradGuard no_grad;
    if (alone_) {
      for (size_t i = 0; i < params_.size(); ++i)
        if (params_[i].grad().defined()) acc_[i] = add(acc_[i], params_[i].grad());
    } else {
      std::vector<float> flat(static_cast<size_t>(floats_), 0.0f);
      size_t at = 0;
      for (const Tensor& p : params_) {
        if (p.grad().defined()) {
          const std::vector<float> g = p.grad().to_vector();
          std::copy(g.begin(), g.end(), flat.begin() + static_cast<std::ptrdiff_t>(at));
        }
        at += static_cast<size_t>(p.numel());
      }
      parts_.push_back(std::move(flat));
    }
    for (const Tensor& p : params_) const_cast<Tensor&>(p).zero_grad();
  }

  // Leaves the sum of every group, over every process, in each parameter's .grad.
  void finish() {
    if (alone_) {
      for (size_t i = 0; i < params_.size(); ++i) params_[i].impl().grad = acc_[i].impl_ptr();
      return;
    }
    std::vector<const float*> mine;
    for (const std::vector<float>& part : parts_) mine.push_back(part.data());
    std::vector<float> sum(static_cast<size_t>(floats_));
    chain_sum(sum.data(), mine, floats_);
    size_t at = 0;
    for (const Tensor& p : params_) {
      const auto from = sum.begin() + static_cast<std::ptrdiff_t>(at);
      at += static_cast<size_t>(p.numel());
      const std::vector<float> g(from, sum.begin() + static_cast<std::ptrdiff_t>(at));
      p.impl().grad = Tensor::from_vector(g, p.shape()).to(p.device()).impl_ptr();
    }
  }

 private:
  std::vector<Tensor> params_;
  const bool alone_;
  std::vector<Tensor> acc_;                // one process: the running sum
  int64_t floats_ = 0;                     // several: P, and this process's groups' gradients
  std::vector<std::vector<float>> parts_;  // [P] each, in group order
};
}  // namespace

GroupedStep grouped_forward_backward(RNNModel& model, const Batch& batch, const Hidden& hidden,
                                     int64_t G, float alpha, float beta, bool gate_stats) {
  GroupedStep r;
  if (G == 1 && process_count() == 1) {  // the plain step
    std::optional<GateStatsScope> gates;
    if (gate_stats) gates.emplace(&r.gates);
    r.first = model.forward(batch.input, batch.seq_len, batch.batch, hidden, &batch.target);
    gates.reset();
    regularised_loss(r.first, alpha, beta).backward();
    r.nll = r.first.loss.item();
    r.hidden = r.first.hidden;
    return r;
  }
  const int64_t B = batch.batch, width = B / G;
  if (B % G != 0)
    throw std::invalid_argument("--batch_size " + std::to_string(B) +
                                " is not divisible into --grad-groups " + std::to_string(G));
  const OwnedGroups mine = owned_groups(G);
  const Generator step_start = model.dropout_gen;  // every group draws the step's masks
  GradientSum sum(model.parameters(), mine.count);
  std::vector<double> nll_mine;
  std::vector<Hidden> hidden_mine;
  for (int64_t g = mine.first; g < mine.first + mine.count; ++g) {
    model.dropout_gen = step_start;
    const ColumnGroupScope columns({g * width, B});
    const Batch part = batch_columns(batch, g * width, width);
    std::optional<GateStatsScope> gates;
    if (gate_stats && g == 0) gates.emplace(&r.gates);
    ModelOutput out = model.forward(part.input, part.seq_len, part.batch,
                                    hidden_columns(hidden, g * width, width), &part.target);
    gates.reset();
    // Group g's share of the batch's mean: its mean times width / B = 1 / G.
    mul_scalar(regularised_loss(out, alpha, beta), 1.0f / static_cast<float>(G)).backward();
    sum.take_group();
    nll_mine.push_back(out.loss.item());
    hidden_mine.push_back(detach_hidden(out.hidden));
    if (g == 0 && gate_stats) r.first = std::move(out);  // else freed now: 1/G of the activations
  }
  sum.finish();
  for (double nll : gather_per_group(nll_mine, G)) r.nll += nll;
  r.nll /= static_cast<double>(G);
  r.hidden = gather_hidden(join_columns(hidden_mine));
  return r;
}

std::pair<double, int64_t> grouped_eval_sums(RNNModel& model, const Batched& data, int64_t bptt,
                                             int64_t G) {
  if (G < 1 || data.batch % G != 0)
    throw std::invalid_argument("evaluation: " + std::to_string(data.batch) +
                                " columns are not divisible into " + std::to_string(G) + " groups");
  // Shared among the processes when they divide the groups; otherwise every process does all.
  const bool shared = G % process_count() == 0;
  const OwnedGroups mine = shared ? owned_groups(G) : OwnedGroups{0, G};
  const int64_t width = data.batch / G;
  std::vector<double> sums_mine;
  for (int64_t g = mine.first; g < mine.first + mine.count; ++g) {
    Hidden hidden = model.init_hidden(width);
    double total = 0;  // summed NLL of the group: each segment's mean times its N
    for (int64_t i = 0; i < data.rows - 1;) {
      const Batch whole = get_batch(data, i, bptt);
      const Batch batch = G == 1 ? whole : batch_columns(whole, g * width, width);
      ModelOutput out =
          model.forward(batch.input, batch.seq_len, batch.batch, hidden, &batch.target);
      const int64_t n = batch.seq_len * batch.batch;
      total += static_cast<double>(out.loss.item()) * n;
      hidden = out.hidden;
      i += batch.seq_len;
    }
    sums_mine.push_back(total);
  }
  const std::vector<double> sums = shared ? gather_per_group(sums_mine, G) : sums_mine;
  double total = 0;
  for (double s : sums) total += s;
  return {total, eval_target_count(data)};
}

}  // namespace mg
