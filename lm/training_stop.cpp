#include "lm/training_stop.h"

#include <csignal>

#include "mpi/processes.h"

namespace mg {

namespace {
volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_at_once = 0;
}  // namespace

StopAtOnce::StopAtOnce() {
  g_at_once = 1;
}
StopAtOnce::~StopAtOnce() {
  g_at_once = 0;
}
bool stop_at_once() {
  return g_at_once != 0;
}

void request_training_stop() {
  g_stop = 1;
}
bool training_stop_requested() {
  return g_stop != 0;
}
void clear_training_stop() {
  g_stop = 0;
}

const char* const kInterruptedReason = "interrupted (Ctrl-C, SIGTERM or SIGHUP)";

std::string stop_reason(const TrainConfig& cfg, const TrainState& st, double elapsed_s) {
  if (training_stop_requested()) return kInterruptedReason;
  if (cfg.max_steps > 0 && st.step >= cfg.max_steps)
    return "reached --max-steps " + std::to_string(cfg.max_steps);
  if (cfg.max_minutes > 0 && elapsed_s >= cfg.max_minutes * 60) return "reached --max-minutes";
  return "";
}

std::string agreed_stop_reason(const TrainConfig& cfg, const TrainState& st, double elapsed_s) {
  const std::string mine = stop_reason(cfg, st, elapsed_s);
  if (process_count() == 1) return mine;
  if (any_process(mine == kInterruptedReason)) return kInterruptedReason;
  if (!any_process(!mine.empty())) return "";
  return mine.empty() ? "another process reached --max-minutes" : mine;
}

}  // namespace mg
