// What a training run shows on the terminal: a live progress bar (or plain log lines when stdout
// is not a terminal) and a per-epoch summary line, from the records of lm/metrics.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "lm/metrics.h"

namespace mg {

// The terminal display. On a TTY: one line redrawn in place with \r, e.g.
//   epoch 1 [=========>          ] 48%  663/1327  2,650 tok/s  loss 5.12  ppl 167.3  ETA 4m12s
// Otherwise (a file or pipe, as in CI or nohup): one plain line per interval. Epoch summaries are
// always full lines:
//   | end of epoch 1 | time 350.2s | train ppl 200.3 | valid loss 4.90 | valid ppl 134.3 | sgd |
//   saved best
class ProgressDisplay {
 public:
  // out: where to print (stdout normally); is_tty decides the style (use isatty(fileno(out))).
  ProgressDisplay(std::FILE* out, bool is_tty);
  void interval(const IntervalMetrics& m);
  void epoch(const EpochMetrics& m);
  void message(const std::string& line);  // a plain line (clears an unfinished bar first)
  void finish();                          // ends an unfinished bar line

 private:
  std::FILE* out_;
  bool tty_;
  bool bar_open_ = false;
  // The ETA's reference point: where (batch, elapsed seconds) the current epoch's timing starts.
  int64_t eta_epoch_ = -1;
  int64_t eta_batch_ = 0;
  double eta_elapsed_s_ = 0;
  size_t bar_width_ = 0;  // characters of the last bar drawn, so a shorter one can blank them
};

// A remaining time as the display shows it: "1h02m", "4m12s", "35s"; "--" when unknown (not finite
// or negative).
std::string format_eta(double seconds);

}  // namespace mg
