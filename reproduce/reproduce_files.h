// What `mosgrad reproduce` (reproduce/reproduce.h) may replace or remove in its --out DIR, and how it
// reads a run's metrics back. The rule: reproduce replaces or removes only files it can prove it
// wrote; anything else is refused before any work, naming the path and what to do.
//   DIR/runs/<run>/         proven by its marker (made_by_reproduce, written first when reproduce
//                           makes the directory), by the `precision` file that only reproduce
//                           writes (directories from before the marker), or by a line of <run> in
//                           results.jsonl; an empty directory holds nothing to lose
//   DIR/results.md          proven by its heading ("## Plan `") and DIR's results.jsonl lines
//   DIR/valid_curves.svg    proven by its <svg> header (io/svg_plot.h) and the same lines
#pragma once

#include <string>
#include <vector>

#include "reproduce/reproduce_plan.h"
#include "reproduce/reproduce_results.h"

namespace mg {

// The marker's name in a run directory, and its one line: "plan <plan>, run <run>".
constexpr const char* kRunMarker = "made_by_reproduce";
void mark_run_dir(const std::string& dir, const std::string& plan, const PlanRun& run);

// True when `dir` is a directory reproduce made for (plan, run): its marker names them, or it has
// no marker but a `precision` file (made before the marker existed).
bool run_dir_made_here(const std::string& dir, const std::string& plan, const PlanRun& run);

// Before any work, and again before each training stage (a user's own run may have been started
// there since), for a run reproduce is about to run: DIR/runs/<run> is absent, an empty directory
// (or one holding only the temporaries of a killed save), or proven as above. Anything else (a
// symlink, a file, a user's own run, another plan's run; DIR/runs a symlink) throws
// std::runtime_error naming it and the ways on.
void check_run_dir_is_ours(const std::string& out, const std::string& plan, const PlanRun& run,
                           const std::vector<StageRecord>& records);

// Before any work and before every redraw: results.md and valid_curves.svg are absent, or
// mosgrad's and backed by `records` (results.jsonl's lines). Throws std::runtime_error naming the
// file: a table or figure is never redrawn from no results, nor over a file mosgrad did not draw.
void check_report_files(const std::string& out, const std::vector<StageRecord>& records);

// A training stage that starts again in a run directory proven above (a start killed before its
// first checkpoint): removes the files `train` and the later stages write there (best.ckpt,
// train_best.ckpt, finetune.ckpt, the metrics files and plots, spectrum.csv), by name, and
// nothing else; a file anyone else put there stays.
void clear_stopped_start(const std::string& dir);

// src's bytes into dst through io/atomic_file.h: never half a file, never through a symlink.
void copy_file_atomically(const std::string& src, const std::string& dst);

// The per-epoch validation perplexities and elapsed seconds of a run's metrics file. Every field
// read is checked: a line that does not parse, an epoch record without its numbers, an epoch that
// does not follow the one before, a val_loss outside [0, 690] or an elapsed time that is negative
// or goes back is an error naming the file, the line and the field. A last line without its
// newline (a crash mid-write) is skipped, as `mosgrad plot` skips it; so are the records a stop
// wrote inside an epoch (at_stop).
void epoch_curves(const std::string& metrics, std::vector<double>& ppl, std::vector<double>& t);

}  // namespace mg
