// The plan runner, top to bottom: check everything, lock DIR, then for each run and each stage:
// skip it when results.jsonl has its line, else run it, append its line, redraw the report.
#include "reproduce/reproduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "analysis/rank.h"
#include "cuda/backend.h"
#include "io/atomic_file.h"
#include "io/own_output.h"
#include "io/run_lock.h"
#include "io/strf.h"
#include "lm/batching.h"
#include "lm/corpus.h"
#include "lm/evaluate.h"
#include "lm/model_io.h"
#include "lm/pointer.h"
#include "lm/train.h"
#include "mpi/processes.h"
#include "reproduce/provenance.h"
#include "reproduce/reproduce_files.h"
#include "reproduce/reproduce_results.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace mg {

namespace fs = std::filesystem;

std::string results_path(const std::string& out) {
  return out + "/results.jsonl";
}

void write_report(const std::string& out, const ReproducePlan& plan) {
  const std::vector<StageRecord> records = read_results(results_path(out));
  check_report_files(out, records);  // never from no results, never over a file not ours
  if (records.empty())
    throw std::runtime_error("--out " + out + " has no results in results.jsonl to draw");
  write_file_atomically(out + "/results.md", results_markdown(records, plan));
  write_file_atomically(out + "/valid_curves.svg", results_figure_svg(records, plan));
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> slice(const std::vector<int64_t>& ids, int64_t tokens) {
  if (tokens <= 0 || tokens >= static_cast<int64_t>(ids.size())) return ids;
  return std::vector<int64_t>(ids.begin(), ids.begin() + tokens);
}

struct Context {
  ReproducePlan plan;
  std::string out, data_dir, precision, commit, cpu;
  std::string corpus_id;        // corpus_fingerprint: a record of another corpus is never mixed in
  Device device = Device::CPU;  // of the training stages
  const Corpus* corpus = nullptr;
  ProgressDisplay* display = nullptr;
  std::function<void(const std::string&)> say;
};

// The command line of a training stage, exactly as `mosgrad` would take it.
std::vector<std::string> train_args(const Context& c, const PlanRun& run, bool finetune,
                                    bool resume) {
  std::vector<std::string> a = {"mosgrad", finetune ? "finetune" : "train"};
  a.insert(a.end(), c.plan.train_flags.begin(), c.plan.train_flags.end());
  const std::vector<std::string> head = head_flags(run.head);  // after the plan's: they win
  a.insert(a.end(), head.begin(), head.end());
  a.insert(a.end(), {"--seed", std::to_string(run.seed), "--save", run_dir(c.out, run), "--data",
                     c.data_dir, "--precision", c.precision, "--test_at_end", "false"});
  if (finetune) a.insert(a.end(), {"--epochs", std::to_string(c.plan.finetune_epochs)});
  if (c.device == Device::CUDA) a.insert(a.end(), {"--device", "cuda"});
  if (resume) a.push_back("--resume");
  return a;
}

std::string joined(const std::vector<std::string>& a) {
  std::string s;
  for (const std::string& w : a) s += (s.empty() ? "" : " ") + w;
  return s;
}

// The stage's TrainConfig from its command line (train_args), built as `mosgrad train` builds it:
// the preset's config, each flag in order through TrainConfig::set (a bare --resume: true), the
// compute paths checked against the machine and the data directory resolved.
TrainConfig stage_config(const std::vector<std::string>& args) {
  std::string preset = "small-mos";
  for (size_t i = 2; i + 1 < args.size(); ++i)
    if (args[i] == "--preset") preset = args[i + 1];
  TrainConfig cfg = preset_config(preset);
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string name = args[i].substr(2);  // every word here is --name or its value
    cfg.set(name, name == "resume" ? "true" : args.at(++i));
  }
  compute_paths(cfg.paths, cfg.device);
  cfg.data = resolve_data_dir(cfg.data);
  return cfg;
}

std::shared_ptr<RNNModel> load_final(const std::string& dir) {
  return load_model(dir + "/best.ckpt").model;
}

double test_ppl(RNNModel& model, const Context& c) {
  return evaluate(model, batchify(slice(c.corpus->test, c.plan.test_tokens), 1), 70).perplexity();
}

// Runs one stage and fills its record's own fields; false when a training stage was stopped.
bool run_stage(const Context& c, const PlanRun& run, const std::string& stage, JsonLine& rec,
               std::string& command) {
  const std::string dir = run_dir(c.out, run);
  if (is_training_stage(stage)) {
    const bool finetune = stage == "finetune";
    // The folder may have changed since the start: a `mosgrad train --save` into it (running, or
    // stopped) is left as it is, not cleared or resumed as this run's.
    if (fs::exists(dir)) {
      RunLock::refuse_if_held(dir, "--out");
      check_run_dir_is_ours(c.out, c.plan.name, run, read_results(results_path(c.out)));
    }
    const bool resume = fs::exists(dir + (finetune ? "/finetune.ckpt" : "/checkpoint.ckpt"));
    // A start that left no state: its files go, by name (the directory is reproduce's, checked
    // before any work: check_run_dir_is_ours); anything else in it stays.
    if (!finetune && !resume) clear_stopped_start(dir);
    if (!resume) {  // the marker first, then what a resume elsewhere must match
      mark_run_dir(dir, c.plan.name, run);
      write_run_precision(dir, c.precision);
      write_run_device(dir, device_name(c.device));
    }
    if (finetune && !resume)  // start from the trained model, even if a killed finetune touched it
      copy_file_atomically(dir + "/train_best.ckpt", dir + "/best.ckpt");
    const std::vector<std::string> args = train_args(c, run, finetune, resume);
    command = joined(args);
    const TrainConfig cfg = stage_config(args);
    // The device the stage's own flags chose, not the option: what the record says is what ran.
    rec.add("device", cfg.device == Device::CUDA ? cuda_device_description() : "cpu");
    const TrainResult r = train_lm(cfg, *c.corpus, {c.display, nullptr}, finetune);
    if (c.display) c.display->finish();
    if (r.stopped) return false;
    if (!finetune)  // the trained model, kept for finetune to restart from
      copy_file_atomically(dir + "/best.ckpt", dir + "/train_best.ckpt");
    std::vector<double> ppl, elapsed;
    epoch_curves(dir + (finetune ? "/finetune_metrics.jsonl" : "/metrics.jsonl"), ppl, elapsed);
    rec.add("epochs", static_cast<int64_t>(ppl.size())).add("steps", r.steps);
    rec.add("train_s", elapsed.empty() ? 0.0 : elapsed.back());
    rec.add("valid_ppl", std::exp(r.best_val_loss)).add("test_ppl", test_ppl(*load_final(dir), c));
    rec.add("epoch_valid_ppl", ppl).add("epoch_elapsed_s", elapsed);
    return true;
  }
  rec.add("device", "cpu");  // the evaluations load the final model on the CPU
  const std::vector<int64_t> valid = slice(c.corpus->valid, c.plan.valid_tokens),
                             test = slice(c.corpus->test, c.plan.test_tokens);
  if (stage == "dyneval") {
    const DynevalConfig& d = c.plan.dyneval;
    command = strf("mosgrad dyneval --model %s/best.ckpt --lr %g --lamb %g --max_stat_batches %lld",
                   dir.c_str(), d.lr, d.lamb, static_cast<long long>(d.max_stat_batches));
    rec.add("lr", static_cast<double>(d.lr)).add("lamb", static_cast<double>(d.lamb));
    // One statistics pass for both texts: it depends only on the final weights, which it leaves
    // as they are. Dynamic evaluation adapts the model it runs on, so test starts from a fresh
    // copy of them.
    auto model = load_final(dir);
    const DynevalStats stats = gradient_statistics(*model, c.corpus->train, d);
    rec.add("valid_ppl", dynamic_evaluate(*model, stats, valid, d).perplexity());
    rec.add("test_ppl", dynamic_evaluate(*load_final(dir), stats, test, d).perplexity());
  } else if (stage == "pointer") {
    command = "mosgrad pointer --model " + dir + "/best.ckpt --grid true --window " +
              std::to_string(c.plan.pointer_window);
    auto model = load_final(dir);
    const PointerStream sv = pointer_stream(*model, valid, 70);
    const PointerGrid g =
        pointer_grid(sv, c.plan.pointer_window, c.plan.pointer_thetas, c.plan.pointer_lambdas);
    const PointerStream st = pointer_stream(*model, test, 70);
    const PointerScore best =
        pointer_grid(st, c.plan.pointer_window, {g.best.theta}, {g.best.lambda}).best;
    // The grid's size and whether its best lies on its edge (then a wider grid may do better):
    // the day plan's first runs all chose the edge of the 6 x 6 grid they searched, unremarked.
    rec.add("window", c.plan.pointer_window)
        .add("theta", g.best.theta)
        .add("lambda", g.best.lambda)
        .add("grid", std::to_string(c.plan.pointer_thetas.size()) + " x " +
                         std::to_string(c.plan.pointer_lambdas.size()))
        .add("grid_edge", g.edge);
    rec.add("model_valid_ppl", std::exp(model_only_loss(sv)))
        .add("valid_ppl", std::exp(g.best.loss));
    rec.add("model_test_ppl", std::exp(model_only_loss(st))).add("test_ppl", std::exp(best.loss));
  } else if (stage == "rank") {
    RankOptions o;
    o.contexts = c.plan.rank_contexts;
    command = "mosgrad rank --model " + dir + "/best.ckpt --contexts " + std::to_string(o.contexts);
    const RankReport r = model_rank(*load_final(dir), c.corpus->valid, o);
    write_file_atomically(dir + "/spectrum.csv", rank_csv(r));
    rec.add("contexts", r.N).add("rank", r.model.rank).add("bound", r.d + 2);
    rec.add("sigma_max", r.model.sigma.empty() ? 0.0 : r.model.sigma[0]);
    rec.add("threshold", r.model.threshold);
  }
  return true;
}

// Further seeds of the plan's heads (reproduce/reproduce_plan.h): those a results file or a run
// directory that reproduce made for this plan (reproduce/reproduce_files.h; any other directory is
// left alone) already holds, so that the table and a plain continuation include them (a run stopped
// in its training stage has a directory but no line yet), and those --runs asks for (the command
// line refuses --runs with --report; called so, only checked). Any other --runs name is refused,
// listing what is allowed, and so is a results line of no run of the plan (or under another head
// than its run's): an edited file.
void add_runs_beyond_the_plan(ReproducePlan& plan, const std::string& out,
                              const std::vector<StageRecord>& records,
                              const ReproduceOptions& options) {
  std::vector<std::string> found;
  for (const StageRecord& r : records) found.push_back(r.text("run"));
  // Every line is of one of the plan's runs or a further seed of one of its heads, under that
  // run's head: any other is an edited file, refused rather than left out of the table unseen.
  ReproducePlan with_records = plan;
  const std::vector<std::string> stray = add_further_seeds(with_records, found);
  if (!stray.empty())
    throw std::runtime_error(results_path(out) + " has lines of run '" + stray[0] +
                             "', which is neither a run of plan '" + plan.name +
                             "' nor a further seed (<head>-s<N>) of one of its heads: correct or "
                             "remove those lines");
  for (const StageRecord& r : records)
    for (const PlanRun& run : with_records.runs)
      if (run.name() == r.text("run") && !r.text("head").empty() && r.text("head") != run.head)
        throw std::runtime_error(results_path(out) + ": the " + r.text("stage") + " line of run '" +
                                 run.name() + "' says head '" + r.text("head") +
                                 "'; that run's head is '" + run.head +
                                 "': correct or remove the line");
  std::error_code ec;
  std::vector<std::string> dirs;  // runs/<head>-s<seed>/ that reproduce made for this plan
  if (fs::is_directory(out + "/runs", ec))
    for (const auto& entry : fs::directory_iterator(out + "/runs", ec))
      if (entry.is_directory(ec)) dirs.push_back(entry.path().filename().string());
  ReproducePlan with_dirs = plan;
  add_further_seeds(with_dirs, dirs);
  for (const PlanRun& r : with_dirs.runs)
    if (std::find(dirs.begin(), dirs.end(), r.name()) != dirs.end() &&
        run_dir_made_here(run_dir(out, r), plan.name, r))
      found.push_back(r.name());
  std::sort(found.begin(), found.end());  // the table's order, not the file's or the listing's
  add_further_seeds(plan, found);         // any other folder stays out of the table (and untouched)
  ReproducePlan asked = plan;
  const std::vector<std::string> unknown = add_further_seeds(asked, options.runs);
  if (unknown.empty()) {
    if (!options.report) plan = asked;
    return;
  }
  std::vector<std::string> known, heads;
  uint64_t next_seed = 1;  // for the example: the first head's next seed
  for (const PlanRun& r : plan.runs) {
    known.push_back(r.name());
    if (std::find(heads.begin(), heads.end(), r.head) == heads.end()) heads.push_back(r.head);
    if (r.head == plan.runs[0].head) next_seed = std::max(next_seed, r.seed + 1);
  }
  const auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  throw std::invalid_argument("--runs: plan " + plan.name + " has no run '" + unknown[0] +
                              "'; its runs are " + list(known) +
                              ", or a further seed of one of its heads (" + list(heads) +
                              ") as <head>-s<seed> (a seed from 1 to 999999999, no leading "
                              "zero), for example " +
                              heads[0] + "-s" + std::to_string(next_seed));
}

}  // namespace

ReproduceSummary run_reproduce(const ReproduceOptions& options, ProgressDisplay* display,
                               const std::function<void(const std::string&)>& say) {
  require_one_process(process_count());  // first: under mpirun the processes would race on DIR
  Context c;
  c.plan = reproduce_plan(options.plan);
  c.out = options.out.empty() ? "runs/reproduce-" + c.plan.name : options.out;
  c.display = display, c.say = say;
  if (fs::exists(c.out) && !fs::is_directory(c.out))
    throw std::invalid_argument("--out " + c.out + " is a file, not a directory");
  ReproduceSummary summary;
  std::vector<StageRecord> records = read_results(results_path(c.out));
  for (const StageRecord& r : records)
    if (r.text("plan") != c.plan.name)
      throw std::runtime_error("--out " + c.out + " holds results of plan '" + r.text("plan") +
                               "', not '" + c.plan.name + "': choose another --out");
  check_results_match_plan(records, c.plan, c.out);
  add_runs_beyond_the_plan(c.plan, c.out, records, options);
  c.device = parse_device(options.device);
  if (options.report) {
    if (c.device != Device::CPU)
      throw std::invalid_argument(
          "--device cuda: --report true redraws the tables and trains nothing; drop one of them");
    if (!fs::exists(c.out))
      throw std::invalid_argument("--out " + c.out +
                                  " does not exist: --report redraws the tables "
                                  "of a directory that holds a results.jsonl");
    check_report_files(c.out, records);
    if (records.empty())  // nothing is redrawn from nothing: a table of dashes replaces no table
      throw std::runtime_error("--out " + c.out + " has no results in " + results_path(c.out) +
                               ": --report draws the tables from them");
    write_report(c.out, c.plan);
    say("wrote " + c.out + "/results.md and " + c.out + "/valid_curves.svg from " +
        std::to_string(records.size()) + " results");
    return summary;
  }
  if (c.device == Device::CUDA) require_cuda();  // no GPU or a CPU-only build: refused here
  c.data_dir = resolve_data_dir(options.data);
  c.precision = results_precision(records, c.plan, c.out);
  if (c.device == Device::CUDA && c.precision != "fp32")
    throw std::invalid_argument("--device cuda trains in fp32, and " + c.out + " with plan '" +
                                c.plan.name + "' runs in " + c.precision +
                                " here: use --device cpu, or another --out on a CPU without "
                                "AVX512_BF16 (where the plan runs in fp32)");
  check_runs_can_continue(c.plan, c.out, records, options.runs, c.precision, device_name(c.device));
  check_report_files(c.out, records);  // the table and figure it will redraw are its own
  PathFlags path_flags;                // the plan's precision, the fast paths otherwise
  path_flags.precision = c.precision;
  const ComputePaths paths = compute_paths(path_flags, Device::CPU);  // no bf16: refused now
  // Every folder a selected run will write in takes files: not found out after a stage's work.
  require_writable_dir("--out", c.out);
  for (const PlanRun& run : c.plan.runs)
    if (run_selected(options.runs, run)) require_writable_dir("--out", run_dir(c.out, run));
  fs::create_directories(c.out + "/runs");
  const RunLock lock(c.out, options.command.empty() ? "mosgrad reproduce" : options.command,
                     "--out");
  const Corpus corpus = load_corpus(c.data_dir, 1000000);
  c.corpus = &corpus, c.corpus_id = corpus_fingerprint(corpus);
  check_results_corpus(records, c.corpus_id, c.out, c.data_dir);
  c.commit = source_commit(), c.cpu = cpu_description();
  const ComputePathsScope compute(paths);  // the stages' commands apply their own flags too
  say("plan " + c.plan.name + ": " + c.plan.description + "; " +
      std::to_string(c.plan.runs.size()) + " runs into " + c.out + " (" + c.precision + ", " +
      std::to_string(num_threads()) + " threads, " + c.cpu +
      (c.device == Device::CUDA ? "; training on " + cuda_device_description() : "") + ")");

  for (const PlanRun& run : c.plan.runs) {
    if (!run_selected(options.runs, run)) continue;
    for (const std::string& stage : c.plan.stages) {
      if (find_record(records, run.name(), stage)) {
        ++summary.stages_skipped;
        continue;
      }
      // Ctrl-C between two stages stops before the next one; one that comes during the last stage
      // has nothing left to stop, and the plan is complete. (One asked before this call's first
      // stage is left to that stage: a training stage stops at its first step, with a checkpoint.)
      if (summary.stages_run > 0 && training_stop_requested()) {
        summary.interrupted = true;
        say("stopped before " + run.name() + " " + stage + "; run the same command to continue");
        return summary;
      }
      say(run.name() + ": " + stage + " ...");
      const auto start = Clock::now();
      const double cpu_start = process_cpu_seconds();
      JsonLine rec;
      rec.add("plan", c.plan.name).add("run", run.name()).add("head", run.head);
      rec.add("seed", static_cast<int64_t>(run.seed)).add("stage", stage).add("date", utc_now());
      rec.add("commit", c.commit).add("cpu", c.cpu).add("precision", c.precision);
      rec.add("threads", static_cast<int64_t>(num_threads())).add("corpus", c.corpus_id);
      std::string command;
      JsonLine fields;
      if (!run_stage(c, run, stage, fields, command)) {
        summary.interrupted = true;
        say("stopped during " + run.name() + " " + stage + "; run the same command to continue");
        return summary;
      }
      const double wall = std::chrono::duration<double>(Clock::now() - start).count();
      // CPU seconds beside wall seconds: the report names a training stage that shared its cores.
      rec.add("command", command).add("wall_s", wall);
      rec.add("cpu_s", process_cpu_seconds() - cpu_start);
      std::string line = rec.str(), more = fields.str();
      if (more != "{}") line = line.substr(0, line.size() - 1) + "," + more.substr(1);
      append_result(results_path(c.out), line);
      records = read_results(results_path(c.out));
      write_report(c.out, c.plan);
      ++summary.stages_run;
      say(run.name() + ": " + stage + strf(" done in %.0f s", wall));
    }
  }
  write_report(c.out, c.plan);
  say("plan " + c.plan.name + " complete: " + c.out + "/results.md");
  return summary;
}

}  // namespace mg
