// What a training run shows and records: a live progress bar (or plain log lines when stdout is not
// a terminal), a per-epoch summary line, and a metrics file with one JSON object per line (JSONL) for
// every log interval and every epoch — the input of `mosgrad plot`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace mg {

// One log interval of training.
struct IntervalMetrics {
  int64_t epoch = 0;          // 1-based
  int64_t step = 0;           // optimizer steps since the start of the run
  int64_t batch = 0;          // segment index within the epoch
  int64_t batches = 0;        // approximate number of segments in the epoch (for the bar and ETA)
  int64_t tokens = 0;         // training tokens seen since the start of the run
  double loss = 0;            // mean NLL over the interval
  double lr = 0;
  double tokens_per_s = 0;
  double elapsed_s = 0;       // since the start of the run (resumed runs continue the count)
  double grad_norm = 0;       // before clipping, averaged over the interval
};

// The end of one epoch.
struct EpochMetrics {
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t tokens = 0;
  double train_loss = 0;      // mean NLL over the epoch
  double val_loss = 0;        // mean NLL per validation target
  double elapsed_s = 0;
  double epoch_s = 0;
  std::string optimizer;      // "sgd", "asgd", "adam"
  bool best = false;          // validation improved and the model was saved
};

// Writes metrics.jsonl lines:
//   {"kind":"interval","epoch":1,"step":200,"batch":200,"tokens":140000,"loss":5.12,"ppl":167.3,
//    "lr":20,"tok_per_s":2650.1,"elapsed_s":52.8,"grad_norm":0.61}
//   {"kind":"epoch","epoch":1,"step":1327,"tokens":929000,"train_loss":5.3,"train_ppl":200.3,
//    "val_loss":4.9,"val_ppl":134.3,"elapsed_s":350.2,"epoch_s":350.2,"optimizer":"sgd","best":true}
// Appends when the file exists (a resumed run continues it); flushes every line.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path);  // throws std::runtime_error naming the file
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const IntervalMetrics& m);
  void write(const EpochMetrics& m);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The terminal display. On a TTY: one line redrawn in place with \r, e.g.
//   epoch 1 [=========>          ] 48%  663/1327  2,650 tok/s  loss 5.12  ppl 167.3  ETA 4m12s
// Otherwise (a file or pipe, as in CI or nohup): one plain line per interval. Epoch summaries are
// always full lines:
//   | end of epoch 1 | time 350.2s | train ppl 200.3 | valid loss 4.90 | valid ppl 134.3 | sgd | saved best
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
  size_t bar_width_ = 0;      // characters of the last bar drawn, so a shorter one can blank them
};

// A remaining time as the display shows it: "1h02m", "4m12s", "35s"; "--" when unknown (not finite
// or negative).
std::string format_eta(double seconds);

// Reads a metrics.jsonl file and writes an SVG of the learning curves: training perplexity per
// interval and validation perplexity per epoch against training tokens (log-scale y axis), with
// axes, ticks, a legend and a title. Hand-written SVG, no plotting dependency.
// Throws std::runtime_error naming the file when it is missing, empty or has a malformed line.
void plot_learning_curves(const std::string& metrics_path, const std::string& svg_path,
                          const std::string& title = "");

}  // namespace mg
