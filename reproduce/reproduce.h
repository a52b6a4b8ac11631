// `mosgrad reproduce --plan NAME --out DIR`: runs a comparison plan (reproduce/reproduce_plan.h) stage by
// stage, each run through train -> finetune -> dyneval -> pointer -> rank, and keeps the results
// in DIR:
//   results.jsonl      one line per finished stage (reproduce/reproduce_results.h): the plan's memory
//   results.md         the tables, rewritten after every stage (and by --report at any time)
//   valid_curves.svg   validation perplexity per epoch of every head, with the seed band
//   runs/<head>-s<seed>/  each run's directory as `mosgrad train` makes it (checkpoints, metrics)
//
// --device cuda trains and finetunes on the GPU (FP32, no TF32: the CPU's numbers to float
// rounding); dyneval, pointer and rank stay on the CPU. Each line of results.jsonl names the device
// its stage ran on, so a table that mixes devices says so.
//
// Resuming: a stage with a line in results.jsonl is skipped; a training stage that was stopped
// (Ctrl-C, kill -9, a lost machine with the directory kept) continues from its checkpoint exactly;
// an evaluation stage that was stopped runs again. Ctrl-C stops a training stage at once (saving
// its checkpoint) and any other stage when it ends. A second `reproduce` on the same DIR is refused
// while the first runs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lm/progress.h"
#include "reproduce/reproduce_plan.h"
#include "reproduce/reproduce_results.h"

namespace mg {

struct ReproduceOptions {
  std::string plan;               // --plan (required)
  std::string out;                // --out (default runs/reproduce-<plan>)
  std::string data;               // --data (resolve_data_dir)
  int64_t threads = 0;            // --threads (0: all cores), applied by mosgrad once parsed
  std::string device = "cpu";     // --device: where train and finetune run (cpu | cuda)
  bool report = false;            // --report: only rewrite results.md and valid_curves.svg
  std::vector<std::string> runs;  // --runs: only these runs ("mos-s1,..."; a further seed adds one)
  std::string command;            // the command line, for the lock file
};

struct ReproduceSummary {
  int stages_run = 0, stages_skipped = 0;
  bool interrupted = false;
};

// Throws std::invalid_argument for more than one process, an unknown plan or an unusable --out,
// before any work; and std::runtime_error when DIR holds another plan's results, results of
// another precision (results_precision), a bad line (read_results), a file reproduce did not
// write where it would write one (reproduce/reproduce_files.h), or a process is already running there.
// --report on a DIR without results is refused: a table is never redrawn from nothing.
ReproduceSummary run_reproduce(const ReproduceOptions& options, ProgressDisplay* display,
                               const std::function<void(const std::string&)>& say);

// reproduce runs in one process: its stages are one process each, and under `mpirun -np N` the N
// copies would race for DIR's lock and then fail in a training stage. N > 1 is refused before
// any work with std::invalid_argument: "reproduce runs in one process: start it without mpirun
// (got -np N)" (docs/distributed.md). run_reproduce calls it first with process_count().
void require_one_process(int processes);

// The precision a plan runs in on this CPU, given DIR's finished stages (`records`): one per
// directory, so that a table compares heads and not precisions. The plan's own where it names one,
// else the one the records used, else this CPU's ("auto"). Throws std::runtime_error naming DIR
// when the records mix precisions, lack one, differ from the plan's, or need bf16 on a CPU
// without it.
std::string results_precision(const std::vector<StageRecord>& records, const ReproducePlan& plan,
                              const std::string& out);

// Before any work: every training line of DIR's results ran the plan's flags as they are now (a
// plan whose size changed, as the afternoon plan's did when its d = 64 became the day plan, would
// otherwise skip its finished runs and mix two model sizes in one table). Throws std::runtime_error naming DIR, the run and
// the way on.
void check_results_match_plan(const std::vector<StageRecord>& records, const ReproducePlan& plan,
                              const std::string& out);

// Every line of DIR's results that names its corpus (corpus_fingerprint; lines from before the
// field name none) was measured on this one, `data_dir`'s: a table never mixes corpora. Throws
// std::runtime_error naming DIR, the run, both corpora and the ways on.
void check_results_corpus(const std::vector<StageRecord>& records, const std::string& corpus_id,
                          const std::string& out, const std::string& data_dir);

// Before any work, for every run of `runs` (empty: all): its directory is absent, empty or
// reproduce's own (check_run_dir_is_ours); its finished stages are the plan's first ones (else
// the file was edited); a run directory started in another precision is refused; and
// the checkpoints its next stage starts from are here (results.jsonl travels between machines,
// checkpoints never do). Throws std::runtime_error naming the run, the file and the ways on.
// A training stage stopped part-way continues only with the --device it started with
// (runs/<run>/device, "cpu" for a directory from before the flag).
void check_runs_can_continue(const ReproducePlan& plan, const std::string& out,
                             const std::vector<StageRecord>& records,
                             const std::vector<std::string>& runs, const std::string& precision,
                             const std::string& device);
bool run_selected(const std::vector<std::string>& runs, const PlanRun& run);
// DIR/runs/<run>/precision, written when a training stage starts (not when it resumes).
void write_run_precision(const std::string& dir, const std::string& precision);
// DIR/runs/<run>/device ("cpu" or "cuda"), written beside it.
void write_run_device(const std::string& dir, const std::string& device);
bool is_training_stage(const std::string& stage);  // train, finetune

// The files of DIR.
std::string results_path(const std::string& out);                      // DIR/results.jsonl
std::string run_dir(const std::string& out, const PlanRun& run);       // DIR/runs/<run>
void write_report(const std::string& out, const ReproducePlan& plan);  // results.md, the figure

}  // namespace mg
