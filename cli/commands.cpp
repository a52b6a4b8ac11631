#include "cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "lm/corpus.h"
#include "lm/train_config.h"

namespace mg {

std::string ModelCommandOptions::model_path() const {
  if (!model.empty()) return model;
  return (save.empty() ? "runs/" + preset : save) + "/best.ckpt";
}

const std::vector<std::string>& model_command_names() {
  static const std::vector<std::string> names = {"eval",   "dyneval", "generate",        "export",
                                                 "import", "rank",    "bottleneck-demo", "pointer"};
  return names;
}

FlagTable model_command_flags(const std::string& command, ModelCommandOptions& o) {
  constexpr int64_t kMaxSize = int64_t{1} << 20, kMaxCount = int64_t{1} << 40;
  const std::string in = "input", run = "running", dyn = "dynamic evaluation", gen = "sampling",
                    out = "output";
  FlagTable model_rows = {
      text_flag("model", "FILE", in, "a model checkpoint (default <save>/best.ckpt)", o.model),
      text_flag("save", "DIR", in, "run directory whose best.ckpt to use (default runs/<preset>)",
                o.save),
      text_flag("preset", "NAME", in,
                "names the default run directory runs/<preset> (default small-mos)", o.preset),
  };
  const Flag device =
      choice_flag("device", run, "where to run the model (checkpoints load on either device)",
                  o.device, {"cpu", "cuda"});
  const Flag threads =
      int_flag("threads", run, "OpenMP threads (0: all cores)", o.threads, 0, 4096);
  const Flag data =
      text_flag("data", "DIR", in, "corpus directory; else $MOSGRAD_DATA, else data/ptb", o.data);
  const Flag split = choice_flag("split", in, "which part of the corpus to score (default test)",
                                 o.split, {"valid", "test", "train"});
  // generate scores no targets, so only the LSTM and the GEMM choose a path there.
  const FlagTable paths = reference_path_flags(o.paths);
  const FlagTable generate_paths = {paths[0], paths[2], precision_flag(o.paths.precision)};
  FlagTable t;
  if (command == "eval") {
    t = model_rows;
    t.insert(t.end(), {data, split, device, threads,
                       int_flag("batch_size", run,
                                "columns (default 1 for test, 10 for valid, as the papers)",
                                o.batch_size, 0, kMaxSize),
                       int_flag("bptt", run, "segment length (default 70)", o.bptt, 1, kMaxSize)});
    t.insert(t.end(), paths.begin(), paths.end());
    t.push_back(precision_flag(o.paths.precision));
  } else if (command == "dyneval") {
    DynevalConfig& d = o.dyneval;
    t = model_rows;
    t.insert(
        t.end(),
        {data, split, device, threads,
         float_flag("lamb", dyn, "λ: decay towards the trained weights (default 0.075)", d.lamb, 0,
                    1e6),
         float_flag("lr", dyn, "η: step size (default 0.002)", d.lr, 0, 1e6),
         float_flag("epsilon", dyn, "ε in ∇/(MS+ε) (default 0.001)", d.epsilon, 1e-12, 1e6),
         int_flag("bptt", dyn, "segment length of the adaptation steps (default 5)", d.bptt, 1,
                  kMaxSize),
         int_flag("stat_batch_size", dyn, "batch size of the gradient statistics (default 100)",
                  d.stat_batch_size, 1, kMaxSize),
         int_flag("max_stat_batches", dyn,
                  "gradient statistics on at most N training segments (-1: all)",
                  d.max_stat_batches, -1, kMaxCount),
         bool_flag("ms", dyn, "MS = sqrt(mean ∇²) instead of sqrt(Σ ∇²)", d.mean_squares)});
    t.insert(t.end(), paths.begin(), paths.end());
    t.push_back(precision_flag(o.paths.precision));
  } else if (command == "generate") {
    GenerateConfig& g = o.generate;
    t = model_rows;
    t.insert(
        t.end(),
        {device, threads,
         int_flag("words", gen, "how many words to sample (default 100)", g.words, 0, kMaxCount),
         float_flag("temperature", gen, "sample from p^(1/T) (default 1)", g.temperature, 1e-6,
                    1e6),
         Flag{"seed", "N", "sampling seed (default 1)", gen,
              [&g](const std::string& v) {
                int64_t n = 0;
                int_flag("seed", "", "", n, 0, INT64_MAX).set(v);
                g.seed = static_cast<uint64_t>(n);
              },
              [&g] { return std::to_string(g.seed); }},
         text_flag("prompt", "TEXT", gen, "words to start from (unknown words read as <unk>)",
                   g.prompt, true)});
    t.insert(t.end(), generate_paths.begin(), generate_paths.end());
  } else if (command == "export") {
    t = model_rows;
    o.out = "model.safetensors";
    t.push_back(text_flag("out", "FILE", out,
                          "the .safetensors file to write (default model.safetensors)", o.out));
  } else if (command == "import") {
    o.out = "imported.ckpt";
    t = {text_flag("in", "FILE", in, "the .safetensors file to read (required)", o.in),
         text_flag("out", "FILE", out, "the checkpoint to write (default imported.ckpt)", o.out)};
  } else if (command == "rank") {
    const std::string an = "rank";
    o.split = "valid", o.out = "rank";
    t = model_rows;
    t.insert(
        t.end(),
        {data,
         choice_flag("split", in, "which part of the corpus gives the contexts (default valid)",
                     o.split, {"valid", "test", "train"}),
         device, threads,
         int_flag("contexts", an,
                  "N: the first N targets of the split (default 0: all of them; PTB valid 73,750)",
                  o.rank.contexts, 0, kMaxCount),
         int_flag("batch_size", an, "columns the split is cut into (default 10, as for valid)",
                  o.rank.batch_size, 1, kMaxSize),
         int_flag("bptt", an, "segment length of the forward passes (default 70)", o.rank.bptt, 1,
                  kMaxSize),
         text_flag("out", "DIR", out, "directory for spectrum.csv and spectrum.svg (default rank)",
                   o.out)});
  } else if (command == "pointer") {
    PointerOptions& p = o.pointer;
    const std::string ptr = "cache pointer";
    t = model_rows;
    t.insert(t.end(),
             {data,
              choice_flag("split", in,
                          "which part of the corpus to score, at batch size 1 (default test)",
                          o.split, {"valid", "test"}),
              device, threads,
              int_flag("window", ptr, "L: how many earlier positions the cache holds (default 500)",
                       p.window, 1, kMaxSize),
              double_flag("theta", ptr, "θ: sharpness of the attention over the cache (default 1)",
                          p.theta, 0, 1e6),
              double_flag("lambdasm", ptr, "λ: weight of the cache in the mixture (default 0.1)",
                          p.lambda, 0, 1),
              bool_flag("grid", ptr,
                        "choose θ and λ on valid (θ 0.25..1.5, λ 0.05..0.3), then score --split",
                        p.grid),
              int_flag("bptt", run, "segment length of the model's pass (default 70)", p.bptt, 1,
                       kMaxSize)});
    t.insert(t.end(), paths.begin(), paths.end());
    t.push_back(precision_flag(o.paths.precision));
  } else if (command == "bottleneck-demo") {
    const std::string demo = "demo";
    o.out = "bottleneck-demo", o.threads = 1;
    t = {
        int_flag("dim", demo, "d, every head's context and decoder size (default 4)", o.demo.d, 1,
                 63),  // < V = 64
        int_flag("experts", demo, "K, components of MoS and MoC (default 4)", o.demo.experts, 2,
                 64),
        int_flag("steps", demo, "Adam steps per head (default 1500)", o.demo.steps, 1, 1000000),
        Flag{"seed", "N", "seed of the true distribution and the initial weights (default 1)", demo,
             [&o](const std::string& v) {
               int64_t n = 0;
               int_flag("seed", "", "", n, 0, INT64_MAX).set(v);
               o.demo.seed = static_cast<uint64_t>(n);
             },
             [&o] { return std::to_string(o.demo.seed); }},
        int_flag(
            "threads", run,
            "OpenMP threads (default 1: the demo's tensors are too small to split; 0: all cores)",
            o.threads, 0, 4096),
        text_flag("out", "DIR", out,
                  "directory for demo.csv and demo.svg (default bottleneck-demo)", o.out)};
  } else {
    throw std::invalid_argument("no flag table for command '" + command + "'");
  }
  return t;
}

namespace {
// The switches of a table: flags whose value is true/false may stand alone (--resume, --tf32).
std::vector<std::string> switches_of(const FlagTable& table) {
  std::vector<std::string> names;
  for (const Flag& f : table)
    if (f.value.empty() || f.value == "true|false") names.push_back(f.name);
  return names;
}
}  // namespace

TrainConfig parse_train_command(const std::string& command, int argc, char** argv, bool* help) {
  TrainConfig probe;
  const ParsedArgs a = parse_command_line(command, argc, argv, 2, switches_of(probe.flag_table()));
  *help = a.help;
  TrainConfig cfg = preset_config(a.get("preset", "small-mos"));
  const FlagTable table = cfg.flag_table();
  if (a.help) return cfg;
  for (const auto& [name, value] : a.flags) apply_flag(table, command, name, value);
  // --gemm reference or --precision bf16 where they cannot run: refused before the corpus is read.
  compute_paths(cfg.paths, cfg.device);
  cfg.data = resolve_data_dir(cfg.data);
  return cfg;
}

FlagTable graph_flags(TrainConfig& cfg, std::string& out) {
  FlagTable t = cfg.flag_table();
  t.push_back(text_flag(
      "out", "FILE", "output",
      "the DOT file to write (default graph.dot; FILE.svg too when dot is installed)", out));
  return t;
}

TrainConfig parse_graph_command(int argc, char** argv, std::string* out, bool* help) {
  TrainConfig probe;
  std::string ignored;
  const ParsedArgs a =
      parse_command_line("graph", argc, argv, 2, switches_of(graph_flags(probe, ignored)));
  *help = a.help;
  TrainConfig cfg = preset_config(a.get("preset", "tiny"));
  *out = "graph.dot";
  const FlagTable table = graph_flags(cfg, *out);
  if (!a.help)
    for (const auto& [name, value] : a.flags) apply_flag(table, "graph", name, value);
  return cfg;
}

FlagTable gradcheck_flags(GradcheckCommand& c) {
  FlagTable t = c.cfg.flag_table();
  const std::string gc = "gradient check";
  ModelGradcheckOptions& o = c.options;
  t.insert(t.end(),
           {int_flag("vocab", gc, "V, the random vocabulary's size (default 50)",
                     c.cfg.model.ntoken, 2, int64_t{1} << 20),
            int_flag("entries", gc,
                     "entries checked per parameter: half the largest gradients, half at random "
                     "(default 24; 0: all)",
                     o.entries, 0, int64_t{1} << 40),
            double_flag("tolerance", gc, "the largest relative error that passes (default 0.01)",
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

GradcheckCommand parse_gradcheck_command(int argc, char** argv, bool* help) {
  GradcheckCommand probe;
  const ParsedArgs a =
      parse_command_line("gradcheck", argc, argv, 2, switches_of(gradcheck_flags(probe)));
  *help = a.help;
  GradcheckCommand c;
  c.cfg = preset_config(a.get("preset", "tiny"));
  // Small enough for a few thousand forwards in seconds; a preset given keeps its sizes.
  ModelConfig& m = c.cfg.model;
  m.ntoken = 50, c.cfg.batch_size = 2, c.cfg.bptt = 5;
  if (a.get("preset", "").empty()) m.emsize = m.nhid = m.nhidlast = 16, m.n_experts = 3;
  const FlagTable table = gradcheck_flags(c);
  if (!a.help)
    for (const auto& [name, value] : a.flags) apply_flag(table, "gradcheck", name, value);
  c.options.seed = c.cfg.seed;
  return c;
}

bool parse_model_command(const std::string& command, const FlagTable& table, int argc,
                         char** argv) {
  const ParsedArgs a = parse_command_line(command, argc, argv, 2, switches_of(table));
  if (!a.help)
    for (const auto& [name, value] : a.flags) apply_flag(table, command, name, value);
  return a.help;
}

FlagTable reproduce_flags(ReproduceOptions& o) {
  const std::string in = "plan";
  return {
      text_flag("plan", "NAME", in,
                "quick, afternoon or paper (required; see docs/reproduction.md)", o.plan),
      text_flag("out", "DIR", in, "results and runs directory (default runs/reproduce-<plan>)",
                o.out),
      text_flag("data", "DIR", in, "corpus directory; else $MOSGRAD_DATA, else data/ptb", o.data),
      int_flag("threads", in, "OpenMP threads (0: all cores)", o.threads, 0, 4096),
      bool_flag("report", in, "only rewrite results.md and valid_curves.svg from results.jsonl",
                o.report),
      Flag{"runs",
           "A,B",
           "only these of the plan's runs, e.g. mos-s1,softmax-s1 (default all)",
           in,
           [&o](const std::string& v) {
             std::string name;
             for (std::istringstream list(v); std::getline(list, name, ',');)
               if (!name.empty()) o.runs.push_back(name);
           },
           {}}};
}

namespace {

// One command's flags as Markdown tables, one per section; the default is what the table's get()
// reads back from freshly made options (switches as true/false).
std::string markdown_table(const std::string& command, const std::string& usage,
                           const FlagTable& table) {
  std::string md = "## " + command + "\n\n`" + usage + "`\n";
  std::vector<std::string> sections;
  for (const Flag& f : table)
    if (std::find(sections.begin(), sections.end(), f.section) == sections.end())
      sections.push_back(f.section);
  for (const std::string& section : sections) {
    md += "\n*" + section + "*\n\n| flag | value | default | what it does |\n|---|---|---|---|\n";
    for (const Flag& f : table) {
      if (f.section != section) continue;
      std::string def = f.get ? f.get() : "";
      if (f.value == "true|false" || f.value.empty())
        def = def == "1" ? "true" : def == "0" ? "false" : def;
      else if (def.find_first_of(".e") != std::string::npos) {  // 0.400000006 -> 0.4
        char* end = nullptr;
        const double v = std::strtod(def.c_str(), &end);
        if (end && *end == '\0') {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.6g", v);
          def = buf;
        }
      }
      std::string help = f.help;
      for (size_t at = 0; (at = help.find('|', at)) != std::string::npos; at += 2)
        help.replace(at, 1, "\\|");
      std::string value = f.value;
      for (size_t at = 0; (at = value.find('|', at)) != std::string::npos; at += 2)
        value.replace(at, 1, "\\|");
      md += "| `--" + f.name + "` | " + (value.empty() ? "" : "`" + value + "`") + " | " +
            (def.empty() ? "" : "`" + def + "`") + " | " + help + " |\n";
    }
  }
  return md + "\n";
}

}  // namespace

std::string cli_markdown() {
  std::string md =
      "# The `mosgrad` command line\n\n"
      "Generated from the flag tables the parser uses (`mosgrad help --markdown > docs/cli.md`; "
      "`tests/test_flags.cpp` checks that this file is that output), so every default and range "
      "here is the program's own. `mosgrad <command> --help` prints the same per command. A flag "
      "is written `--name value`, `--name=value`, and with `-` or `_` alike; a true/false flag "
      "alone means true. Defaults are those of the default preset (small-mos for train and "
      "finetune, tiny for graph and gradcheck), which `--preset` changes before the other flags "
      "apply.\n\n";
  TrainConfig train = preset_config("small-mos");
  md += markdown_table("train", "mosgrad train [--preset NAME] [flags]", train.flag_table());
  md +=
      markdown_table("finetune", "mosgrad finetune [--preset NAME] [flags]  (the same flags)", {});
  for (const std::string& command : model_command_names()) {
    ModelCommandOptions o;
    md +=
        markdown_table(command, "mosgrad " + command + " [flags]", model_command_flags(command, o));
  }
  TrainConfig graph = preset_config("tiny");
  std::string out = "graph.dot";
  md += markdown_table("graph", "mosgrad graph [--preset NAME] [model flags] [--out FILE]",
                       graph_flags(graph, out));
  GradcheckCommand g;
  g.cfg = preset_config("tiny");
  md += markdown_table("gradcheck",
                       "mosgrad gradcheck [--preset NAME] [model flags] [--vocab V] [--entries N]",
                       gradcheck_flags(g));
  ReproduceOptions r;
  md += markdown_table("reproduce", "mosgrad reproduce --plan NAME [flags]", reproduce_flags(r));
  md +=
      "## plot\n\n`mosgrad plot RUN_DIR [--title TEXT]`: draws RUN_DIR/metrics.jsonl as "
      "RUN_DIR/curves.svg.\n\n## presets\n\n`mosgrad presets`: lists the presets and their "
      "settings.\n";
  return md;
}

}  // namespace mg
