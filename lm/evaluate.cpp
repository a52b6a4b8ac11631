#include "lm/evaluate.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "autograd/node.h"
#include "lm/column_groups.h"

namespace mg {

double EvalResult::perplexity() const {
  return std::exp(loss);
}

double max_finite_loss() {
  return std::log(std::numeric_limits<double>::max());
}

void require_finite_perplexity(double loss, const std::string& what, const std::string& cause) {
  if (std::isfinite(loss) && std::isfinite(std::exp(loss))) return;
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "loss %.6g nats per target, ppl %g", loss, std::exp(loss));
  throw std::runtime_error(what + " is not finite (" + numbers + "): " + cause);
}

EvalResult evaluate(RNNModel& model, const Batched& data, int64_t bptt, int64_t groups) {
  if (eval_target_count(data) == 0)
    throw std::invalid_argument("evaluate: the data gives no targets (" +
                                std::to_string(data.rows) + " rows of " +
                                std::to_string(data.batch) + " columns; it needs at least 2 rows)");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  // Summed NLL (each segment's mean times its N) and the targets, of all columns at once (groups
  // 1) or of each column group on its own, the groups' sums added in order (lm/column_groups.h).
  const auto [total, count] = grouped_eval_sums(model, data, bptt, groups);
  model.train(was_training);
  EvalResult r;
  r.targets = count;
  r.loss = count ? total / count : 0.0;
  return r;
}

}  // namespace mg
