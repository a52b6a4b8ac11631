#include "lm/evaluate.h"

#include <cmath>

#include "autograd/node.h"

namespace mg {

double EvalResult::perplexity() const {
  return std::exp(loss);
}

EvalResult evaluate(RNNModel& model, const Batched& data, int64_t bptt) {
  if (eval_target_count(data) == 0)
    throw std::invalid_argument("evaluate: the data gives no targets (" +
                                std::to_string(data.rows) + " rows of " +
                                std::to_string(data.batch) + " columns; it needs at least 2 rows)");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  Hidden hidden = model.init_hidden(data.batch);
  double total = 0;  // summed NLL; each segment's mean times its N
  int64_t count = 0;
  for (int64_t i = 0; i < data.rows - 1;) {
    const Batch batch = get_batch(data, i, bptt);
    ModelOutput out = model.forward(batch.input, batch.seq_len, batch.batch, hidden, &batch.target);
    const int64_t n = batch.seq_len * batch.batch;
    total += static_cast<double>(out.loss.item()) * n;
    count += n;
    hidden = out.hidden;
    i += batch.seq_len;
  }
  model.train(was_training);
  EvalResult r;
  r.targets = count;
  r.loss = count ? total / count : 0.0;
  return r;
}

}  // namespace mg
