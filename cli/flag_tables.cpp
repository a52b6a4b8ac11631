#include "cli/flag_tables.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "cli/unused_flags.h"
#include "lm/corpus.h"
#include "reproduce/reproduce_plan.h"

namespace mg {

std::string ModelCommandOptions::model_path() const {
  if (!model.empty()) return model;
  return (save.empty() ? "runs/" + preset : save) + "/best.ckpt";
}

namespace {

constexpr int64_t kMaxSize = int64_t{1} << 20, kMaxCount = int64_t{1} << 40;
const std::string kIn = "input", kRun = "running", kOut = "output";

// The rows every command that loads a saved model starts with: which checkpoint.
FlagTable checkpoint_rows(ModelCommandOptions& o) {
  return {
      text_flag("model", "FILE", kIn, "a model checkpoint (default <save>/best.ckpt)", o.model),
      text_flag("save", "DIR", kIn, "run directory whose best.ckpt to use (default runs/<preset>)",
                o.save),
      choice_flag("preset", kIn, "names the default run directory runs/<preset>", o.preset,
                  preset_names()),
  };
}
Flag device_flag(ModelCommandOptions& o) {
  return choice_flag("device", kRun, "where to run the model (checkpoints load on either device)",
                     o.device, {"cpu", "cuda"});
}
Flag threads_flag(int64_t& threads) {
  return int_flag("threads", kRun, "OpenMP threads (0: all cores)", threads, 0, 4096);
}
Flag data_flag(std::string& data) {
  return text_flag("data", "DIR", kIn, "corpus directory; else $MOSGRAD_DATA, else data/ptb", data);
}
// A seed flag for an unsigned seed (int_flag checks the text as a whole number first).
Flag seed_flag(const std::string& section, const std::string& help, uint64_t& seed) {
  return Flag{"seed",
              "N",
              help,
              section,
              [&seed](const std::string& v) {
                int64_t n = 0;
                int_flag("seed", "", "", n, 0, INT64_MAX).set(v);
                seed = static_cast<uint64_t>(n);
              },
              [&seed] { return std::to_string(seed); }};
}
// --fused-lstm, --fused-head, --gemm and --precision: the commands that score targets.
void add_path_flags(FlagTable& t, ModelCommandOptions& o) {
  const FlagTable paths = reference_path_flags(o.paths);
  t.insert(t.end(), paths.begin(), paths.end());
  t.push_back(precision_flag(o.paths.precision));
}

// A count where -1 means "all" and 0 means nothing useful (statistics of no segment): refused.
Flag all_or_at_least_one(Flag f, const int64_t& value) {
  f.set = [set = f.set, name = f.name, &value](const std::string& text) {
    set(text);
    if (value == 0)
      throw std::invalid_argument("--" + name + " must be -1 (all) or at least 1, got " + text);
  };
  return f;
}

}  // namespace

void model_finish(CommandLine& c) {
  for (const char* other : {"save", "preset"})
    if (c.gave("model") && c.gave(other))
      throw std::invalid_argument(
          c.command + ": --model " + c.model.model + " names the checkpoint itself; --" + other +
          " only chooses the default one (<save>/best.ckpt, runs/<preset>/best.ckpt), so the two "
          "together are ambiguous: give --model, or --" +
          other + " alone");
  if (c.gave("save") && c.gave("preset"))
    throw std::invalid_argument(c.command + ": --save " + c.model.save +
                                " names the run directory; --preset only chooses the default one "
                                "(runs/<preset>), so the two together are ambiguous: give one");
  for (const char* chosen : {"theta", "lambdasm"})  // pointer --grid chooses both itself
    if (c.model.pointer.grid && c.gave(chosen))
      throw std::invalid_argument(c.command + ": --grid chooses θ and λ on valid, so --" + chosen +
                                  " does nothing beside it: give one of the two");
}

// ---- train, finetune, graph, gradcheck: a preset, then the flags -----------------------------

void train_defaults(CommandLine& c, const std::string& preset) {
  c.train = preset_config(preset.empty() ? "small-mos" : preset);
}
FlagTable train_flags(CommandLine& c) {
  return c.train.flag_table();
}
void train_finish(CommandLine& c) {
  refuse_flags_that_do_nothing(c);
  // --gemm reference or --precision bf16 where they cannot run: refused before the corpus is read.
  compute_paths(c.train.paths, c.train.device);
  c.train.data = resolve_data_dir(c.train.data);
}

// graph and gradcheck build one model from a preset and run one forward pass on the CPU: of train's
// rows they take the model's, its batch and seed, the threads and the compute paths, not the data,
// the run directory, the device or the schedule, which they never read (so --epochs there is an
// unknown flag, not a silent no-op).
namespace {
FlagTable model_build_rows(TrainConfig& t) {
  static const std::vector<std::string> kept = {"preset",     "threads",    "batch_size",
                                                "bptt",       "seed",       "fused_lstm",
                                                "fused_head", "gemm",       "precision"};
  FlagTable rows;
  for (Flag& f : t.flag_table())
    if (f.section == "model" || std::find(kept.begin(), kept.end(), f.name) != kept.end())
      rows.push_back(std::move(f));
  return rows;
}
}  // namespace

void graph_defaults(CommandLine& c, const std::string& preset) {
  c.train = preset_config(preset.empty() ? "tiny" : preset);
  c.out = "graph.dot";
}
FlagTable graph_flags(CommandLine& c) {
  FlagTable t = model_build_rows(c.train);
  t.push_back(text_flag(
      "out", "FILE", kOut,
      "the DOT file to write (FILE.svg too when dot is installed)", c.out));
  t.push_back(bool_flag("values", kOut,
                        "run the backward too; each box and parameter shows its value and its "
                        "gradient (μ σ over the entries), as micrograd draws them",
                        c.values));
  return t;
}

void gradcheck_defaults(CommandLine& c, const std::string& preset) {
  c.train = preset_config(preset.empty() ? "tiny" : preset);
  // Small enough for a few thousand forwards in seconds; a preset given keeps its sizes.
  ModelConfig& m = c.train.model;
  m.ntoken = 50, c.train.batch_size = 2, c.train.bptt = 5;
  if (preset.empty()) m.emsize = m.nhid = m.nhidlast = 16, m.n_experts = 3;
}
FlagTable gradcheck_flags(CommandLine& c) {
  FlagTable t = model_build_rows(c.train);
  const std::string gc = "gradient check";
  ModelGradcheckOptions& o = c.gradcheck;
  t.insert(t.end(),
           {int_flag("vocab", gc, "V, the random vocabulary's size",
                     c.train.model.ntoken, 2, int64_t{1} << 20),
            int_flag("entries", gc,
                     "entries checked per parameter: half the largest gradients, half at random "
                     "(0: all)",
                     o.entries, 0, kMaxCount),
            double_flag("tolerance", gc, "the largest relative error that passes",
                        o.tolerance, 0, 1e9),
            Flag{"params", "NAME,...", "the parameters to check (default all)", gc,
                 [&o](const std::string& v) {
                   if (v == "all") return o.params.clear();
                   o.params.clear();
                   size_t start = 0;
                   while (start <= v.size()) {
                     const size_t end = std::min(v.find(',', start), v.size());
                     if (end == start)
                       throw std::invalid_argument("--params expects all or NAME,NAME,..., got '" +
                                                   v + "'");
                     o.params.push_back(v.substr(start, end - start));
                     start = end + 1;
                   }
                 },
                 nullptr}});
  return t;
}
void gradcheck_finish(CommandLine& c) {
  c.gradcheck.seed = c.train.seed;
}

// ---- the commands that run a saved model -----------------------------------------------------

FlagTable eval_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  FlagTable t = checkpoint_rows(o);
  t.insert(t.end(), {data_flag(o.data),
                     choice_flag("split", kIn, "which part of the corpus to score",
                                 o.split, {"valid", "test", "train"}),
                     device_flag(o), threads_flag(o.threads),
                     int_flag("batch_size", kRun,
                              "columns (0: 1 for test, 10 otherwise, as the papers)",
                              o.batch_size, 0, kMaxSize),
                     int_flag("bptt", kRun, "segment length", o.bptt, 1, kMaxSize),
                     int_flag("grad_groups", kRun,
                              "column groups, each scored alone, summed in order (under mpirun "
                              "shared among the processes; must divide the batch size)",
                              o.grad_groups, 1, kMaxSize)});
  add_path_flags(t, o);
  return t;
}

FlagTable dyneval_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  DynevalConfig& d = o.dyneval;
  const std::string dyn = "dynamic evaluation";
  FlagTable t = checkpoint_rows(o);
  t.insert(t.end(),
           {data_flag(o.data),
            choice_flag("split", kIn, "which part of the corpus to score", o.split,
                        {"valid", "test", "train"}),
            device_flag(o), threads_flag(o.threads),
            float_flag("lamb", dyn, "λ: decay towards the trained weights", d.lamb, 0, 1e6),
            float_flag("lr", dyn, "η: step size", d.lr, 0, 1e6),
            float_flag("epsilon", dyn, "ε in ∇/(MS+ε)", d.epsilon, 1e-12, 1e6),
            int_flag("bptt", dyn, "segment length of the adaptation steps", d.bptt, 1, kMaxSize),
            int_flag("stat_batch_size", dyn, "batch size of the gradient statistics",
                     d.stat_batch_size, 1, kMaxSize),
            all_or_at_least_one(int_flag("max_stat_batches", dyn,
                                         "gradient statistics on at most N training segments "
                                         "(-1: all)",
                                         d.max_stat_batches, -1, kMaxCount),
                                d.max_stat_batches),
            bool_flag("ms", dyn, "MS = sqrt(mean ∇²) instead of sqrt(Σ ∇²)", d.mean_squares)});
  add_path_flags(t, o);
  return t;
}

FlagTable generate_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  GenerateConfig& g = o.generate;
  const std::string gen = "sampling";
  FlagTable t = checkpoint_rows(o);
  t.insert(
      t.end(),
      {device_flag(o), threads_flag(o.threads),
       int_flag("words", gen, "how many words to sample", g.words, 0, kMaxCount),
       float_flag("temperature", gen, "sample from p^(1/T)", g.temperature, 1e-6, 1e6),
       seed_flag(gen, "sampling seed", g.seed),
       text_flag("prompt", "TEXT", gen, "words to start from (unknown words read as <unk>)",
                 g.prompt, true)});
  // generate scores no targets, so only the LSTM and the GEMM choose a path there.
  const FlagTable paths = reference_path_flags(o.paths);
  t.insert(t.end(), {paths[0], paths[2], precision_flag(o.paths.precision)});
  return t;
}

void export_defaults(CommandLine& c, const std::string&) {
  c.model.out = "model.safetensors";
}
FlagTable export_flags(CommandLine& c) {
  FlagTable t = checkpoint_rows(c.model);
  t.push_back(text_flag("out", "FILE", kOut,
                        "the .safetensors file to write", c.model.out));
  return t;
}

void import_defaults(CommandLine& c, const std::string&) {
  c.model.out = "imported.ckpt";
}
FlagTable import_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  return {text_flag("in", "FILE", kIn, "the .safetensors file to read (required)", o.in),
          text_flag("out", "FILE", kOut, "the checkpoint to write", o.out)};
}

void rank_defaults(CommandLine& c, const std::string&) {
  c.model.split = "valid", c.model.out = "rank";
}
FlagTable rank_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  const std::string an = "rank";
  FlagTable t = checkpoint_rows(o);
  t.insert(
      t.end(),
      {data_flag(o.data),
       choice_flag("split", kIn, "which part of the corpus gives the contexts",
                   o.split, {"valid", "test", "train"}),
       device_flag(o), threads_flag(o.threads),
       int_flag("contexts", an,
                "N: the first N targets of the split (0: all of them; PTB valid 73,750)",
                o.rank.contexts, 0, kMaxCount),
       int_flag("batch_size", an, "columns the split is cut into (as for valid)",
                o.rank.batch_size, 1, kMaxSize),
       int_flag("bptt", an, "segment length of the forward passes", o.rank.bptt, 1,
                kMaxSize),
       text_flag("out", "DIR", kOut, "directory for spectrum.csv and spectrum.svg",
                 o.out)});
  return t;
}

FlagTable pointer_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  PointerOptions& p = o.pointer;
  const std::string ptr = "cache pointer";
  FlagTable t = checkpoint_rows(o);
  t.insert(
      t.end(),
      {data_flag(o.data),
       choice_flag("split", kIn, "which part of the corpus to score, at batch size 1", o.split,
                   {"valid", "test"}),
       device_flag(o), threads_flag(o.threads),
       int_flag("window", ptr, "L: how many earlier positions the cache holds", p.window, 1,
                kMaxSize),
       double_flag("theta", ptr, "θ: sharpness of the attention over the cache", p.theta, 0, 1e6),
       // λ = 1 is the cache alone, which gives a word outside the window probability 0.
       double_flag("lambdasm", ptr, "λ: weight of the cache in the mixture, below 1", p.lambda, 0,
                   1, true),
       bool_flag("grid", ptr,
                 "choose θ and λ on valid (θ 0.25..64, λ 0.02..0.3), then score --split", p.grid),
       int_flag("bptt", kRun, "segment length of the model's pass", p.bptt, 1, kMaxSize)});
  add_path_flags(t, o);
  return t;
}

void demo_defaults(CommandLine& c, const std::string&) {
  c.model.out = "bottleneck-demo", c.model.threads = 1;
}
FlagTable demo_flags(CommandLine& c) {
  ModelCommandOptions& o = c.model;
  const std::string demo = "demo";
  return {
      int_flag("dim", demo, "d, every head's context and decoder size", o.demo.d, 1,
               63),  // < V = 64
      int_flag("experts", demo, "K, components of MoS and MoC", o.demo.experts, 2, 64),
      int_flag("steps", demo, "Adam steps per head", o.demo.steps, 1, 1000000),
      seed_flag(demo, "seed of the true distribution and the initial weights",
                o.demo.seed),
      int_flag("threads", kRun,
               "OpenMP threads (the demo's tensors are too small to split; 0: all cores)",
               o.threads, 0, 4096),
      text_flag("out", "DIR", kOut, "directory for demo.csv and demo.svg",
                o.out)};
}

// ---- reproduce, plot ---------------------------------------------------------------------------

FlagTable reproduce_flags(CommandLine& c) {
  ReproduceOptions& o = c.reproduce;
  const std::string in = "plan";
  return {text_flag("plan", "NAME", in,
                    "quick, afternoon, day, paper (docs/reproduction.md), or a speedrun record: ptb-1h, ptb-3h "
                    "(docs/speedrun.md); required", o.plan),
          text_flag("out", "DIR", in, "results and runs directory (default runs/reproduce-<plan>)",
                    o.out),
          data_flag(o.data),
          threads_flag(o.threads),
          choice_flag("device", kRun,
                      "where train and finetune run (cuda: FP32 on the GPU; dyneval, pointer and "
                      "rank stay on the CPU)",
                      o.device, {"cpu", "cuda"}),
          bool_flag("report", in, "only rewrite results.md and valid_curves.svg from results.jsonl",
                    o.report),
          Flag{"runs",
               "A,B",
               "only these runs, e.g. mos-s1,softmax-s1 (default all); a further seed of a plan's "
               "head (mos-s4) adds that run",
               in,
               [&o](const std::string& v) {
                 std::string name;
                 for (std::istringstream list(v); std::getline(list, name, ',');)
                   if (!name.empty()) o.runs.push_back(name);
                 // An empty list is a mistake (an unset shell variable), not "every run".
                 if (o.runs.empty())
                   throw std::invalid_argument("--runs '" + v +
                                               "' names no run: give names like mos-s1,softmax-s1, "
                                               "or leave --runs out for every run of the plan");
               },
               {}}};
}
void reproduce_finish(CommandLine& c) {
  if (c.reproduce.plan.empty()) {
    std::string names;
    for (const std::string& n : reproduce_plan_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument("reproduce needs --plan NAME: one of " + names);
  }
  reproduce_plan(c.reproduce.plan);  // an unknown plan is an error before anything else
  // --report reads results.jsonl alone: a flag that would choose runs or how they run does
  // nothing there, and is refused rather than silently ignored.
  if (c.reproduce.report)
    for (const char* flag : {"runs", "data", "device"})
      if (c.gave(flag))
        throw std::invalid_argument(std::string("reproduce --report only rewrites results.md and "
                                                "valid_curves.svg from results.jsonl, every run "
                                                "in it: --") +
                                    flag + " has no effect there; leave it out");
  for (const std::string& w : c.words)
    c.reproduce.command += (c.reproduce.command.empty() ? "" : " ") + w;
}

FlagTable plot_flags(CommandLine& c) {
  return {text_flag("title", "TEXT", kOut, "the figure's title (default RUN_DIR)", c.title)};
}

}  // namespace mg
