// The results file of `mosgrad reproduce` (<out>/results.jsonl): one JSON object per finished stage
// of a run, with what it measured and how (commit, CPU, precision, threads, the exact command, wall
// time, CPU time); and what is drawn from it: a markdown table (results.md) and the validation curves
// (valid_curves.svg). The file is the plan's memory: a stage with a line is never run again, so
// committing the file carries finished results to another machine.
//
// The file is only ever replaced whole (io/atomic_file.h): a kill at any moment leaves the old
// file or the new one, never a half-written or duplicated line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/json.h"
#include "reproduce/reproduce_plan.h"

namespace mg {

// One line being built: keys in insertion order, numbers to 10 significant digits (NaN and ±inf,
// which JSON lacks, become null).
class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value);
  JsonLine& add(const std::string& key, const char* value);
  JsonLine& add(const std::string& key, double value);
  JsonLine& add(const std::string& key, int64_t value);
  JsonLine& add(const std::string& key, const std::vector<double>& values);
  std::string str() const;  // "{...}" without a newline

 private:
  std::string body_;
};

struct StageRecord {
  JsonValue json;  // an object with at least "plan", "run", "head", "seed", "stage"
  std::string text(const std::string& key) const;             // "" when absent
  double number(const std::string& key) const;                // NaN when absent or null
  std::vector<double> numbers(const std::string& key) const;  // empty when absent
};

// Every line of `path` (none when it does not exist). A line that is not such an object, that
// repeats an earlier line's run and stage, or whose numbers fail check_stage_record is an error
// naming the file and the line: the file is written whole, so a bad line means someone edited
// it, and guessing would put wrong numbers in the table.
std::vector<StageRecord> read_results(const std::string& path);
// Every number the tables and the figure read, in its range, or null (not measured): the
// perplexities in [1, 1e300], counts whole and >= 0 (seed and threads >= 1), times >= 0, λ in
// [0, 1], θ, lr, lamb, σ_max and the threshold >= 0; epoch_valid_ppl perplexities, and
// epoch_elapsed_s increasing from >= 0, as long as each other and as "epochs" says. Throws
// std::runtime_error: "<where>: field "valid_ppl" is -5, expected a perplexity in [1, 1e300] ...".
void check_stage_record(const StageRecord& record, const std::string& where);
// Appends one line by writing the whole file anew, atomically.
void append_result(const std::string& path, const std::string& line);
// The record of (run, stage), or nullptr.
const StageRecord* find_record(const std::vector<StageRecord>& records, const std::string& run,
                               const std::string& stage);

// The markdown table of every head of the plan (mean ± standard deviation over its seeds, and how
// many), the table at equal wall-clock (best validation perplexity reached by 15, 60 and 180
// minutes of training, and under it the runs whose training did not have its cores to itself), and
// one row per run.
std::string results_markdown(const std::vector<StageRecord>& records, const ReproducePlan& plan);
// Validation perplexity per training epoch: each head's mean over its seeds, and its lowest and
// highest seed as thin lines around it (the seed band).
std::string results_figure_svg(const std::vector<StageRecord>& records, const ReproducePlan& plan);

}  // namespace mg
