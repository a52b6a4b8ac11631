// AWD-LSTM's AR/TAR loss and NT-ASGD's trigger (lm/recipe_rules.h).
#include "lm/recipe_rules.h"

#include <algorithm>

#include "autograd/ops.h"
#include "tensor/not_implemented.h"

namespace mg {

// NT-ASGD's test (AWD-LSTM §3): is val_loss worse than the best validation loss of all epochs
// before (`history`, oldest first) but the last `nonmono`? Never while there are at most nonmono.
bool non_monotone(const std::vector<double>& history, double val_loss, int64_t nonmono) {
  // TASK 7.2: worse than the best validation of all epochs but the last `nonmono` ones
  const size_t k = static_cast<size_t>(nonmono);
  return history.size() > k && val_loss > *std::min_element(history.begin(), history.end() - k);
  // END TASK 7.2
}

Tensor regularised_loss(const ModelOutput& out, float alpha, float beta) {
  // TASK 7.1: + alpha mean(dropped output²) (AR) + beta mean((raw h_t - raw h_{t-1})²) (TAR)
  Tensor loss = out.loss;  // mean NLL
  if (alpha != 0) loss = add(loss, mul_scalar(mean(square(out.dropped_outputs.back())), alpha));
  const Tensor& raw = out.raw_outputs.back();  // [T,B,H]
  const int64_t T = raw.size(0);
  if (beta != 0 && T > 1)
    loss = add(
        loss,
        mul_scalar(mean(square(sub(narrow(raw, 0, 1, T - 1), narrow(raw, 0, 0, T - 1)))), beta));
  return loss;
  // END TASK 7.1
}

}  // namespace mg
