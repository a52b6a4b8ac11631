// What `mosgrad reproduce` checks before any work (reproduce/reproduce.h): one precision per results
// directory and per run, and that every run it will touch can go on from where it stopped.
#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/read_file.h"
#include "reproduce/reproduce.h"
#include "reproduce/reproduce_files.h"
#include "tensor/gemm.h"

namespace mg {

namespace fs = std::filesystem;

std::string run_dir(const std::string& out, const PlanRun& run) {
  return out + "/runs/" + run.name();
}

void require_one_process(int processes) {
  if (processes > 1)
    throw std::invalid_argument("reproduce runs in one process: start it without mpirun (got -np " +
                                std::to_string(processes) + ")");
}

bool run_selected(const std::vector<std::string>& runs, const PlanRun& run) {
  return runs.empty() || std::find(runs.begin(), runs.end(), run.name()) != runs.end();
}

std::string results_precision(const std::vector<StageRecord>& records, const ReproducePlan& plan,
                              const std::string& out) {
  std::string used;
  for (const StageRecord& r : records) {
    const std::string p = r.text("precision");
    if (p.empty())
      throw std::runtime_error(results_path(out) + ": a line of " + r.text("run") + " '" +
                               r.text("stage") + "' without its precision; was it edited?");
    if (used.empty()) used = p;
    if (p != used)
      throw std::runtime_error(results_path(out) + " mixes precisions (" + used + " and " + p +
                               "); a table compares heads at one precision: split the file");
  }
  const std::string wanted = plan.precision == "auto" && !used.empty() ? used : plan.precision;
  const std::string precision = resolve_precision(wanted);
  if (!used.empty() && precision != used)
    throw std::runtime_error("--out " + out + " holds results measured in " + used + ", plan '" +
                             plan.name + "' runs in " + precision +
                             ": choose another --out (a table compares heads at one precision)");
  if (precision == "bf16" && !gemm_bf16_kernel_name())
    throw std::runtime_error("--out " + out +
                             " holds results measured in bf16, which needs a CPU with "
                             "AVX512_BF16; this one has none: continue it on such a CPU");
  return precision;
}

namespace {

// A run directory's one-line files (precision, device): what its training started with.
void write_run_file(const std::string& dir, const std::string& name, const std::string& value) {
  fs::create_directories(dir);
  write_file_atomically(dir + "/" + name, value + "\n");
}
// The file's line, or `absent` when the directory has none.
std::string read_run_file(const std::string& dir, const std::string& name,
                          const std::string& absent) {
  if (!fs::exists(dir + "/" + name)) return absent;
  std::string value = read_file(dir + "/" + name, "run " + name + " file");
  value.erase(value.find_last_not_of(" \n\r\t") + 1);
  return value;
}

}  // namespace

void write_run_precision(const std::string& dir, const std::string& precision) {
  write_run_file(dir, "precision", precision);
}

void write_run_device(const std::string& dir, const std::string& device) {
  write_run_file(dir, "device", device);
}

bool is_training_stage(const std::string& stage) {
  return stage == "train" || stage == "finetune";
}

void check_results_match_plan(const std::vector<StageRecord>& records, const ReproducePlan& plan,
                              const std::string& out) {
  std::string flags;
  for (const std::string& f : plan.train_flags) flags += " " + f;
  for (const StageRecord& r : records) {
    // A line without its command (written by hand) has nothing to compare.
    if (!is_training_stage(r.text("stage")) || r.text("command").empty()) continue;
    const std::string expected = "mosgrad " + r.text("stage") + flags + " ";
    if (r.text("command").compare(0, expected.size(), expected) == 0) continue;
    // The afternoon plan's former size (d = 64) lives on as the day plan.
    const std::string way_on =
        plan.name == "afternoon"
            ? " (the afternoon plan's d = 64 runs are the day plan's now: replace "
              "\"plan\":\"afternoon\" by \"plan\":\"day\" in results.jsonl and use --plan day)"
            : "";
    throw std::runtime_error("--out " + out + " holds a " + r.text("stage") + " result of " +
                             r.text("run") + " measured with other flags than plan '" + plan.name +
                             "' has now (" + r.text("command") + "; the plan's:" + flags +
                             "): the plan was resized since" + way_on +
                             "; choose another --out for its new size");
  }
}

void check_results_corpus(const std::vector<StageRecord>& records, const std::string& corpus_id,
                          const std::string& out, const std::string& data_dir) {
  for (const StageRecord& r : records)
    if (!r.text("corpus").empty() && r.text("corpus") != corpus_id)
      throw std::runtime_error("--out " + out + " holds results of " + r.text("run") +
                               " measured on another corpus (" + r.text("corpus") +
                               ") than --data " + data_dir + " (" + corpus_id +
                               "): use the --data they were measured on, or another --out");
}

void check_runs_can_continue(const ReproducePlan& plan, const std::string& out,
                             const std::vector<StageRecord>& records,
                             const std::vector<std::string>& runs, const std::string& precision,
                             const std::string& device) {
  for (const PlanRun& run : plan.runs) {
    if (!run_selected(runs, run)) continue;
    check_run_dir_is_ours(out, plan.name, run, records);  // never someone else's files
    bool later_done = false;  // a stage's record after a missing one: the file was edited
    for (auto s = plan.stages.rbegin(); s != plan.stages.rend(); ++s) {
      const bool done = find_record(records, run.name(), *s) != nullptr;
      if (!done && later_done)
        throw std::runtime_error(results_path(out) + " has later stages of " + run.name() +
                                 " but not '" + *s + "'; remove that run's lines to redo it");
      later_done = later_done || done;
    }
    const std::string dir = run_dir(out, run);
    // A training stage stopped on another machine, its directory copied here: it continues only
    // in the precision it started in (checkpoints do not record it; `train` may resume in either).
    if (const std::string started = read_run_file(dir, "precision", ""); !started.empty()) {
      if (started != precision)
        throw std::runtime_error(dir + " was started in " + started + " and would continue in " +
                                 precision + " here: continue it on a CPU that runs " + started +
                                 ", or remove the directory to start that run again");
    }
    const auto next = std::find_if(plan.stages.begin(), plan.stages.end(), [&](auto& s) {
      return find_record(records, run.name(), s) == nullptr;
    });
    // A stopped training stage continues on the device it started on: its record names one
    // device, and its epochs' times add up across the resumes (a directory from before --device
    // trained on the CPU).
    if (next != plan.stages.end() && is_training_stage(*next) &&
        fs::exists(dir + (*next == "train" ? "/checkpoint.ckpt" : "/finetune.ckpt"))) {
      const std::string started = read_run_file(dir, "device", "cpu");
      if (started != device)
        throw std::runtime_error(run.name() + "'s " + *next + " stage started with --device " +
                                 started + " and would continue with --device " + device +
                                 ": continue it with --device " + started + ", or remove " + dir +
                                 " to start that run again");
    }
    if (next == plan.stages.begin() || next == plan.stages.end()) continue;
    // Finetune starts from train_best.ckpt, or resumes from finetune.ckpt (which also reads the
    // best model so far, best.ckpt); the evaluations read best.ckpt.
    std::vector<std::string> needed = {dir + "/best.ckpt"};
    if (*next == "finetune")
      needed = fs::exists(dir + "/finetune.ckpt")
                   ? std::vector<std::string>{dir + "/finetune.ckpt", dir + "/best.ckpt"}
                   : std::vector<std::string>{dir + "/train_best.ckpt"};
    for (const std::string& file : needed)
      if (!fs::exists(file))
        throw std::runtime_error(
            run.name() + " has finished '" + *(next - 1) + "' but its '" + *next +
            "' stage needs " + file +
            ", which is not here (results.jsonl keeps the numbers, never the checkpoints): copy " +
            dir + " from the machine that ran it, or remove " + run.name() + "'s lines from " +
            results_path(out) + " to run it again from the start");
  }
}

}  // namespace mg
