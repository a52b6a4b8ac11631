// The lines `mosgrad train` and `finetune` end with, read from what the run leaves in its files:
// the validation perplexity of the model best.ckpt holds and, when the run scored it, that
// model's test perplexity.
#pragma once

#include <string>
#include <vector>

#include "lm/train.h"

namespace mg {

// "best valid ppl P after N steps[ (why it stopped)]" from r.best_val_loss, the loss of the model
// in best_path as the run measured it (a resumed run scores the file's model, which may be
// another run's), or "N steps, no epoch finished yet, so no validation" when there is no such
// file; then "test ppl P" when r.tested. A value that is not a finite perplexity (NaN, one that
// overflows exp, or no score for a best.ckpt that exists) is std::runtime_error naming the file,
// never a line: a script must not record it as a result.
std::vector<std::string> train_summary(const TrainResult& r, const std::string& best_path);

}  // namespace mg
