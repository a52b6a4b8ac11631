// The state of a training run that a checkpoint holds, beyond the weights: position, counters,
// validation history, optimizer kind and state, both random streams and the carried hidden state.
// save_state and restore_state mirror each other, so --resume continues bit for bit.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "lm/corpus.h"
#include "lm/optim.h"
#include "lm/train_config.h"
#include "nn/rnn_model.h"

namespace mg {

// Everything that changes while training, so a resumed run continues exactly where it stopped.
// The sums of the log interval under way (one metrics.jsonl line per --log-interval steps). They
// are part of the state, so a run stopped mid-interval and resumed writes the uninterrupted run's
// next line, not one averaged over the steps since the resume.
struct IntervalSums {
  double loss = 0, grad_norm = 0;  // summed over the interval's steps
  int64_t steps = 0;
};

struct TrainState {
  int64_t epoch = 1, batch_pos = 0, step = 0, tokens = 0;
  double elapsed_s = 0, epoch_loss_sum = 0;
  int64_t epoch_loss_count = 0;
  IntervalSums interval;
  double best_val = std::numeric_limits<double>::infinity();
  std::vector<double> val_history;  // NT-ASGD looks back `nonmono` epochs
  OptimizerKind optimizer = OptimizerKind::SGD;
};

// What the training loop advances besides the weights: with them, all a checkpoint must hold for
// a resumed run to continue bit for bit.
struct Progress {
  std::unique_ptr<Optimizer> opt;  // SGD, ASGD after NT-ASGD's switch (or from a finetune's start)
  TrainState st;                   // where the run is: epoch, step, position, best validation
  Hidden hidden;                   // the LSTM state carried from one segment to the next
  Generator bptt_gen;              // variable BPTT's segment lengths
};

// Writes the whole state to `path` (atomically): parameters "model.*", optimizer state "optim.*",
// hidden state "hidden.<l>.h/c", the config (TrainConfig::to_map), counters, RNG states,
// vocabulary, and the corpus it trains on (corpus_fingerprint), when given.
void save_state(const std::string& path, const TrainConfig& cfg, const RNNModel& model,
                const Progress& progress, const Vocab& vocab, const std::string& corpus_id = "");

// The mirror of save_state: the model's weights and all of `progress` (its optimizer rebuilt as
// the checkpoint's kind; its hidden state must already have this model's shapes, which the file's
// must match). Refuses a checkpoint of another vocabulary or of another corpus (its fingerprint,
// when the checkpoint has one: the same words in another text would not continue exactly), and
// flags that define the run (model,
// --optimizer, --batch_size, --max_train_tokens) that differ from the checkpoint's. Every field is
// checked: a damaged or crafted one (with a valid CRC) is an error naming the file and the field.
// The second form takes the checkpoint already read (the fuzz target's way in).
void restore_state(const std::string& state_path, const TrainConfig& cfg, const Corpus& corpus,
                   RNNModel& model, Progress& progress);
void restore_state(const Checkpoint& ck, const TrainConfig& cfg, const Corpus& corpus,
                   RNNModel& model, Progress& progress);

// Doubles as text with 17 digits (exact round trip), space-separated.
std::string join_doubles(const std::vector<double>& v);

}  // namespace mg
