// The run that lm/train.cpp's loop advances, and the steps around the loop that act on it: where a
// run starts (fresh, finetuning, resumed), validation that keeps the best model, NT-ASGD's switch,
// the validation at a budget stop and the test of the best model. Used by train_lm only.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "lm/batching.h"
#include "lm/corpus.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/optim.h"
#include "lm/run_record.h"
#include "lm/train_config.h"
#include "lm/train_state.h"

namespace mg {

// best.ckpt and the validation loss of the model in it, measured as this run measures. The file is
// only ever replaced by a model better than the one it holds: when resuming, it may hold another
// run's model (a finetune's, better than this run's own record of its best), so it is scored once.
struct BestModelFile {
  std::string path;
  double loss = INFINITY;  // INFINITY: no file yet
};

// Everything one training run works on, so that the helpers below take the run instead of a dozen
// parameters each; train_lm's loop reads top to bottom over the same names. Made from the config
// and the corpus before the model exists (the data and the files are checked first); start_state
// gives it the model. Its Progress (opt, st, hidden, bptt_gen) is what the loop advances and a
// checkpoint holds.
struct Run : Progress {
  const TrainConfig& cfg;
  const Corpus& corpus;
  const bool finetune;
  const RunFiles files;
  const bool writes_files;   // rank 0 (of mpirun's N; the only one without MPI) writes every file
  const Batched train_data;  // B columns
  const Batched val_data;    // eval_batch_size columns
  std::function<void(const std::string&)> say;  // a line for the display (none without one)
  RNNModel* model = nullptr;                    // the model trained, from start_state on
  BestModelFile best;                           // best.ckpt and the loss of the model it holds

  Run(const TrainConfig& c, const Corpus& data, bool fine,
      std::function<void(const std::string&)> display);
};

// A model's mean loss on the run's validation data, in the groups training runs in where they
// divide the validation batch (lm/column_groups.h): the same bits under mpirun as without.
double validation_loss(const Run& r, RNNModel& model);

// Validation of the weights reached (ASGD's averaged ones). st.best_val follows this run's best;
// the weights replace best.ckpt only when they beat the file. Returns the loss and whether
// best.ckpt now holds as good a model (saved now, or equal to it: an epoch replayed after a crash
// that came between saving best.ckpt and the state).
std::pair<double, bool> validate_and_keep_best(Run& r);

// The bar a run must beat to replace best.ckpt: none without the file; a fresh finetune's is the
// file's model scored at the start (st.best_val); a resumed run scores the file's model on its own
// validation data (vocabulary checked), which may differ from its record of its best: the file may
// hold a finetune's model, and --max_eval_tokens / --eval_batch_size may have changed.
BestModelFile best_model_file(const Run& r);

// The run trains `model` (kept by reference) from here: the optimizer and state it starts from are
// fresh; the best model with ASGD from the first step (finetuning, which must then beat that
// model's validation); or everything from the checkpoint.
void start_state(Run& r, RNNModel& model);

// SGD -> ASGD now (a fresh averaging optimizer), saying why on the display.
void switch_to_asgd(Run& r, const std::string& why);

// NT-ASGD: switch SGD -> ASGD once the validation is non-monotone. When finetuning the same test
// ends the run: returns true then.
bool nt_asgd(Run& r, double val_loss);

// A budget stop scores the weights reached ("validation perplexity after 15 minutes"), keeps them
// when best, and records that validation, so a short run's metrics file is not empty.
double validate_at_stop(Run& r, MetricsWriter& metrics, double elapsed_s);

// The papers' test figure: the best model on the test split with batch size 1.
double test_best_model(const Run& r);

}  // namespace mg
