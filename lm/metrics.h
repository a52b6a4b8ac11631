// What a training run records: one record per log interval and per epoch, written to a metrics file
// with one JSON object per line (JSONL). The same records feed the terminal display
// (lm/progress.h); the file is the input of `mosgrad plot` (lm/learning_curves.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mg {

// One log interval of training.
struct IntervalMetrics {
  int64_t epoch = 0;    // 1-based
  int64_t step = 0;     // optimizer steps since the start of the run
  int64_t batch = 0;    // segment index within the epoch
  int64_t batches = 0;  // approximate number of segments in the epoch (for the bar and ETA)
  int64_t tokens = 0;   // training tokens seen since the start of the run
  double loss = 0;      // mean NLL over the interval
  double lr = 0;
  double tokens_per_s = 0;
  double elapsed_s = 0;  // since the start of the run (resumed runs continue the count)
  double grad_norm = 0;  // before clipping, averaged over the interval
};

// The end of one epoch.
struct EpochMetrics {
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t tokens = 0;
  double train_loss = 0;  // mean NLL over the epoch
  double val_loss = 0;    // mean NLL per validation target
  double elapsed_s = 0;
  double epoch_s = 0;
  std::string optimizer;  // "sgd", "asgd", "adam"
  bool best = false;      // validation improved and the model was saved
  bool at_stop = false;   // written at a --max-steps / --max-minutes stop, inside the epoch
};

// Training-health statistics of one logged step (--log-stats, lm/health_stats.h).
struct StatsMetrics {
  int64_t epoch = 0, step = 0, tokens = 0;
  struct Param {
    std::string name;     // "rnns.0.weight_hh"
    double grad_norm;     // ‖∇‖ before clipping
    double update_ratio;  // ‖Δw‖ / ‖w‖ of this step's update
  };
  struct Layer {
    double mean, std;                    // of the layer's output h [T,B,H], before dropout
    bool gates = false;                  // the fused LSTM reported its gates (nn/gate_stats.h)
    double saturated[4] = {0, 0, 0, 0};  // fraction of i, f, g, o saturated
  };
  std::vector<Param> params;
  std::vector<Layer> layers;
};

// Writes metrics.jsonl lines:
//   {"kind":"interval","epoch":1,"step":200,"batch":200,"tokens":140000,"loss":5.12,"ppl":167.3,
//    "lr":20,"tok_per_s":2650.1,"elapsed_s":52.8,"grad_norm":0.61}
//   {"kind":"epoch","epoch":1,"step":1327,"tokens":929000,"train_loss":5.3,"train_ppl":200.3,
//    "val_loss":4.9,"val_ppl":134.3,"elapsed_s":350.2,"epoch_s":350.2,"optimizer":"sgd","best":true}
//   {"kind":"stats","epoch":1,"step":200,"tokens":140000,"grad_norm.encoder.weight":0.08,
//    "update_ratio.encoder.weight":0.0012,...,"act_mean.0":0.01,"act_std.0":0.21,"sat_i.0":0.02,
//    "sat_f.0":0.05,"sat_g.0":0.003,"sat_o.0":0.01,...}   (--log-stats; flat keys, one per number)
// Appends when the file exists (a resumed run continues it). Each line goes out whole in one write
// or not at all: a write that fails part-way (a full disk) is cut back off before the error is
// thrown, so the file only ever holds whole lines. Never through a symlink: a link planted at the
// file's name is refused, as the checkpoints and the run lock refuse one.
class MetricsWriter {
 public:
  // Throws std::runtime_error naming the file; an empty path writes nothing (under mpirun, every
  // process but rank 0).
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const IntervalMetrics& m);
  void write(const EpochMetrics& m);
  void write(const StatsMetrics& m);
  const std::string& path() const { return path_; }

 private:
  void write_line(const std::string& line);
  std::string path_;
  int fd_ = -1;
};

// One history per file: a fresh run (not --resume) calls this before its first record. When `path`
// holds records (of a run stopped before its first checkpoint, which a fresh run may reuse the
// directory of), they are moved aside to the first free "<path>.N" (N = 1, 2, ...), whose name is
// returned; "" when there was nothing to keep.
std::string set_aside_old_metrics(const std::string& path);

// A resumed run continues from its checkpoint's step, but the file may hold records written after
// that checkpoint, before the run was killed: drops every record whose "step" is past `step`
// (rewriting the file atomically), so the resumed run does not repeat steps. An unterminated last
// line that does not parse (torn by the kill) goes too; any other line that does not parse is an
// error naming it, and the file is left as it was. A missing file is left missing.
void drop_records_after(const std::string& path, int64_t step);

// Whether the file holds the validation of a --max-steps / --max-minutes stop at `step` (an epoch
// record with "at_stop": true): a kill during that validation leaves a checkpoint at the budget
// without it, which a resume then makes up. A missing file holds none.
bool stop_validated(const std::string& path, int64_t step);

}  // namespace mg
