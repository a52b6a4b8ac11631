// The training loop of the AWD-LSTM / MoS recipe (lm/train.cpp, readable top to bottom).
#pragma once

#include <functional>
#include <limits>
#include <string>

#include "lm/corpus.h"
#include "lm/progress.h"
#include "lm/train_config.h"
#include "lm/training_stop.h"  // request_training_stop(): Ctrl-C

namespace mg {

struct TrainResult {
  // The validation loss of the model best.ckpt holds, as this run measures it: the run's own best,
  // or the file's model scored when the run resumed (it may be better: a finetune's, or a budget
  // stop's validation, which the state saved before it does not record). Infinity: no best.ckpt.
  double best_val_loss = std::numeric_limits<double>::infinity();
  bool tested = false;  // --test-at-end scored best.ckpt's model on the test split: test_loss
  double test_loss = std::numeric_limits<double>::quiet_NaN();  // NaN when not evaluated
  int64_t steps = 0;        // optimizer steps in total (a resumed run counts the earlier ones)
  int64_t epochs_done = 0;  // completed epochs
  bool stopped = false;     // stopped by --max-minutes, --max-steps or Ctrl-C (checkpoint saved)
  // Validation loss of the weights at a --max-minutes / --max-steps stop (NaN otherwise); it also
  // updates best.ckpt when it is the best so far. The resume state is saved before it, so a resumed
  // run is unaffected.
  double final_val_loss = std::numeric_limits<double>::quiet_NaN();
  std::string stop_reason;
};

struct TrainHooks {
  ProgressDisplay* display = nullptr;                      // null: print nothing
  std::function<void(int64_t step, double loss)> on_step;  // each step's NLL (tests of resume)
};

// Trains (finetune = false) or finetunes (the MoS paper's second stage: restart from
// <save>/best.ckpt with ASGD and stop when validation stops improving) on corpus. Writes into
// cfg.save: checkpoint.ckpt (or finetune.ckpt) — the full training state for --resume, saved at
// every epoch end and when stopped; best.ckpt — the model with the best validation loss;
// metrics.jsonl and curves.svg (finetune_metrics.jsonl and finetune_curves.svg when finetuning).
TrainResult train_lm(const TrainConfig& cfg, const Corpus& corpus, const TrainHooks& hooks = {},
                     bool finetune = false);

}  // namespace mg
