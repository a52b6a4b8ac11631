// What a training run refuses (lm/train.cpp): inputs that cannot work, checked before any work,
// and a loss or gradient that has diverged, checked at every step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lm/batching.h"
#include "lm/corpus.h"
#include "lm/train_config.h"

namespace mg {

// A loss far above guessing uniformly (ln V nats per word) means training has diverged, even while
// it is still finite ("ppl inf"): such weights must neither train on nor be kept as the best model.
double diverged_loss(int64_t V);
// The error for a diverged `what` ("training loss", "validation loss", "gradient norm") at `step`,
// saying what was (not) saved and what to try.
std::string diverged_message(const std::string& what, double value, int64_t step, int64_t V,
                             const std::string& state_path);

// Never replace a user's run with a worse or half-made one: without --resume a directory that holds
// a run (or a finetune) is refused; with it, there must be something to resume. And the flags must
// fit together (--grad-groups, the test split at --test_batch_size). That both splits have targets
// is checked where they are batched (Run's constructor, lm/train_run.cpp).
void check_run_inputs(const TrainConfig& cfg, bool finetune, const std::string& state_path,
                      const Corpus& corpus);

// The files a run writes in its folder (its state, best.ckpt, metrics, lock), before any work: a
// symlink at one is refused (mosgrad never writes through one), and so is anything there that is
// not a regular file (a FIFO would block the run's first write to it until a reader came, which
// may be never; a device or a directory cannot hold the file), naming it. Nothing there is fine.
void check_run_files(const std::vector<std::string>& paths);

}  // namespace mg
