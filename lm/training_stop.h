// When a training run stops before its epochs are done: Ctrl-C (or SIGTERM / SIGHUP), --max-steps
// or --max-minutes. The loop asks after every step; a stopped run saves its checkpoint and returns,
// and `--resume` continues it exactly.
#pragma once

#include <string>

#include "lm/train_config.h"
#include "lm/train_state.h"

namespace mg {

// Ctrl-C: the signal handler of the `mosgrad` command calls request_training_stop() (async-signal
// safe); the loop notices after the current step, saves the checkpoint and returns.
void request_training_stop();
bool training_stop_requested();
void clear_training_stop();

// While the final test runs (an evaluation at batch size 1, minutes on a real preset, with every
// file already saved), a stop signal must end the program at once rather than wait for a step
// that never comes: the `mosgrad` command's signal handler reads this and re-raises the signal.
// Set for the lifetime of one object.
class StopAtOnce {
 public:
  StopAtOnce();
  ~StopAtOnce();
  StopAtOnce(const StopAtOnce&) = delete;
  StopAtOnce& operator=(const StopAtOnce&) = delete;
};
bool stop_at_once();

// The reason an interrupted run gives (a budget stop validates first; an interrupted one does not).
extern const char* const kInterruptedReason;

// Why training should stop cleanly now ("" when it should go on).
std::string stop_reason(const TrainConfig& cfg, const TrainState& st, double elapsed_s);

// The same on every process of an mpirun, which must all stop after the same step: interrupted
// when any process got the signal; else a budget stop when any reached its budget (--max-minutes
// is measured by each process's clock).
std::string agreed_stop_reason(const TrainConfig& cfg, const TrainState& st, double elapsed_s);

}  // namespace mg
