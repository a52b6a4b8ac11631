#include "lm/train_summary.h"

#include <cmath>
#include <filesystem>

#include "io/strf.h"
#include "lm/evaluate.h"

namespace mg {

std::vector<std::string> train_summary(const TrainResult& r, const std::string& best_path) {
  std::vector<std::string> lines;
  const std::string how = r.stopped ? " (" + r.stop_reason + ")" : "";
  const long long steps = static_cast<long long>(r.steps);
  // The model in best_path has finite weights (load_model refuses others) and was kept for a
  // finite validation; a non-finite score now means its outputs overflow on the data scored.
  const std::string cause = "likely cause " + best_path +
                            ": its weights are finite but its outputs overflow on this data (a "
                            "model whose training diverged?)";
  if (std::isinf(r.best_val_loss) && r.best_val_loss > 0 && !std::filesystem::exists(best_path)) {
    lines.push_back(strf("%lld steps, no epoch finished yet, so no validation", steps) + how);
  } else {
    require_finite_perplexity(r.best_val_loss, "the validation perplexity of " + best_path, cause);
    lines.push_back(strf("best valid ppl %.2f after %lld steps", std::exp(r.best_val_loss), steps) +
                    how);
  }
  if (r.tested) {
    require_finite_perplexity(r.test_loss, "the test perplexity of " + best_path, cause);
    lines.push_back(strf("test ppl %.2f", std::exp(r.test_loss)));
  }
  return lines;
}

}  // namespace mg
