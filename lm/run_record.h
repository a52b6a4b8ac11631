// What a training run records as it goes (lm/train.cpp): the files of its run directory, its clock,
// the sums of a log interval and the record of an epoch for metrics.jsonl, the learning curves.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "lm/learning_curves.h"
#include "lm/metrics.h"
#include "lm/train_config.h"
#include "lm/train_state.h"

namespace mg {

using TrainClock = std::chrono::steady_clock;

// The files of a run directory; finetuning keeps its own state and record beside the first stage's.
struct RunFiles {
  std::string state, best, metrics, curves;
  RunFiles(const TrainConfig& cfg, bool finetune)
      : state(cfg.save + (finetune ? "/finetune.ckpt" : "/checkpoint.ckpt")),
        best(cfg.save + "/best.ckpt"),
        metrics(cfg.save + (finetune ? "/finetune_metrics.jsonl" : "/metrics.jsonl")),
        curves(cfg.save + (finetune ? "/finetune_curves.svg" : "/curves.svg")) {}
};

// Seconds since the start of the run; a resumed run continues the count it saved.
struct Stopwatch {
  double before;
  TrainClock::time_point start = TrainClock::now();
  explicit Stopwatch(double seconds_before) : before(seconds_before) {}
  double operator()() const {
    return before + std::chrono::duration<double>(TrainClock::now() - start).count();
  }
};

// The state at the start of the epoch after st's: its first segment, no loss summed yet.
inline TrainState next_epoch(TrainState st) {
  ++st.epoch;
  st.batch_pos = 0, st.epoch_loss_sum = 0, st.epoch_loss_count = 0;
  return st;
}

// The learning curves so far as an SVG; a failure to draw them only warns.
inline void draw_curves(const RunFiles& files, const std::string& title,
                        const std::function<void(const std::string&)>& say) {
  try {
    plot_learning_curves(files.metrics, files.curves, title);
  } catch (const std::exception& e) {
    say(std::string("warning: could not draw the learning curves: ") + e.what());
  }
}

// One log interval: its sums (in TrainState, so they survive a stop and resume) and its clock,
// turned into one metrics.jsonl record.
struct LogInterval {
  int64_t tokens = 0;  // since `start`: the speed of this process, not of a run before a resume
  TrainClock::time_point start = TrainClock::now();

  void add(TrainState& st, double nll, double grad_norm, int64_t n) {
    st.interval.loss += nll, st.interval.grad_norm += grad_norm, ++st.interval.steps, tokens += n;
  }
  IntervalMetrics take(TrainState& st, const TrainConfig& cfg, int64_t rows, double elapsed_s) {
    const double secs = std::chrono::duration<double>(TrainClock::now() - start).count();
    const IntervalSums& sums = st.interval;
    IntervalMetrics m;
    m.epoch = st.epoch, m.step = st.step, m.batch = st.batch_pos / cfg.bptt,
    m.batches = (rows - 1) / cfg.bptt;
    m.tokens = st.tokens, m.loss = sums.loss / sums.steps, m.lr = cfg.lr,
    m.tokens_per_s = tokens / std::max(secs, 1e-9);
    m.elapsed_s = elapsed_s, m.grad_norm = sums.grad_norm / sums.steps;
    st.interval = IntervalSums(), *this = LogInterval();
    return m;
  }
};

inline EpochMetrics epoch_record(const TrainState& st, double val_loss, bool improved,
                                 double elapsed_s) {
  EpochMetrics em;
  em.epoch = st.epoch, em.step = st.step, em.tokens = st.tokens, em.val_loss = val_loss,
  em.elapsed_s = elapsed_s;
  em.train_loss = st.epoch_loss_count ? st.epoch_loss_sum / st.epoch_loss_count : 0;
  em.optimizer = optimizer_kind_name(st.optimizer), em.best = improved;
  return em;
}

}  // namespace mg
