// The `mosgrad` program: one table of commands (kCommands below: train, finetune, eval, dyneval,
// pointer, generate, export, import, plot, rank, graph, gradcheck, bottleneck-demo, presets,
// reproduce), each run by a short function over the library.
//   mosgrad train --preset small-mos --data ../shared/data/ptb
//   mosgrad <command> --help
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/model_graph.h"
#include "cli/commands.h"
#include "cli/reproduce.h"
#include "io/atomic_file.h"
#include "io/same_file.h"
#include "lm/batching.h"
#include "lm/dyneval.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "lm/learning_curves.h"
#include "lm/model_io.h"
#include "lm/train.h"
#include "tensor/parallel.h"

using namespace mg;

namespace {

// Ctrl-C, kill (SIGTERM) and a closed terminal (SIGHUP) all stop training cleanly: the checkpoint
// is saved, and --resume continues exactly. A second signal ends the program at once.
void on_stop_signal(int sig) {
  request_training_stop();
  std::signal(sig, SIG_DFL);
}

int cmd_train(int argc, char** argv, bool finetune) {
  const std::string command = finetune ? "finetune" : "train";
  bool help = false;
  TrainConfig cfg = parse_train_command(command, argc, argv, &help);
  if (help) {
    std::string presets;
    for (const std::string& name : preset_names()) presets += (presets.empty() ? "" : ", ") + name;
    std::printf(
        "mosgrad %s [--preset NAME] [flags]\n\npresets: %s (default small-mos); flags after the "
        "preset "
        "override it\n\n%s",
        command.c_str(), presets.c_str(), flags_help(cfg.flag_table()).c_str());
    return 0;
  }
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  const Corpus corpus = load_corpus(cfg.data, 1000000);
  if (corpus.unk_valid || corpus.unk_test)
    std::fprintf(stderr,
                 "warning: %lld valid and %lld test tokens are not in the training vocabulary "
                 "(read as <unk>)\n",
                 static_cast<long long>(corpus.unk_valid), static_cast<long long>(corpus.unk_test));
  ProgressDisplay display(stdout, isatty(fileno(stdout)));
  display.message("data " + corpus.dir + ": " + std::to_string(corpus.train.size()) +
                  " train tokens, V=" + std::to_string(corpus.vocab.size()) + "; run directory " +
                  cfg.save);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
  std::signal(SIGPIPE,
              SIG_IGN);  // `mosgrad train | head`: output stops, training goes on to its end
  const TrainResult r = train_lm(cfg, corpus, {&display, nullptr}, finetune);
  display.finish();
  const std::string how = r.stopped ? " (" + r.stop_reason + ")" : "";
  if (std::isfinite(r.best_val_loss))
    std::printf("best valid ppl %.2f after %lld steps%s\n", std::exp(r.best_val_loss),
                static_cast<long long>(r.steps), how.c_str());
  else
    std::printf("%lld steps, no epoch finished yet, so no validation%s\n",
                static_cast<long long>(r.steps), how.c_str());
  if (!std::isnan(r.test_loss)) std::printf("test ppl %.2f\n", std::exp(r.test_loss));
  return r.stop_reason.rfind("interrupted", 0) == 0 ? 130 : 0;
}

const std::vector<int64_t>& split_ids(const Corpus& c, const std::string& split) {
  if (split == "test") return c.test;
  if (split == "valid") return c.valid;
  if (split == "train") return c.train;
  throw std::invalid_argument("--split must be valid, test or train, got '" + split + "'");
}

// The model a command runs, loaded and moved to --device (a missing GPU is an error before
// loading), with the paths --fused-lstm, --fused-head, --gemm and --precision chose applied for as
// long as it lives (the GEMM's restored after).
struct CommandModel {
  LoadedModel loaded;
  ComputePathsScope compute;
};

CommandModel load_for(const ModelCommandOptions& o) {
  const Device device = parse_device(o.device);
  const ComputePaths paths = compute_paths(o.paths, device);  // checked before any loading
  if (device == Device::CUDA) require_cuda();
  LoadedModel lm = load_model(o.model_path());
  lm.model->to(device);
  RNNModel* model = lm.model.get();
  return CommandModel{std::move(lm), ComputePathsScope(paths, model)};
}

int cmd_eval(const ModelCommandOptions& o, bool dynamic) {
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const std::string data_dir = resolve_data_dir(o.data);
  CommandModel command = load_for(o);
  LoadedModel& lm = command.loaded;
  const Corpus corpus = load_corpus(data_dir, 1000000);
  check_same_vocab(corpus.vocab, lm.vocab, o.model_path());
  const auto& ids = split_ids(corpus, o.split);
  const int64_t eval_B = dynamic            ? 1
                         : o.batch_size > 0 ? o.batch_size
                                            : (o.split == "test" ? 1 : 10);
  require_eval_targets(static_cast<int64_t>(ids.size()), eval_B,
                       "the " + o.split + " split of " + data_dir);
  EvalResult r;
  if (dynamic) {
    r = dynamic_evaluate(*lm.model, corpus.train, ids, o.dyneval);
  } else {
    const int64_t B = o.batch_size > 0 ? o.batch_size : (o.split == "test" ? 1 : 10);
    r = evaluate(*lm.model, batchify(ids, B), o.bptt);
  }
  std::printf("%s%s loss %.6f ppl %.3f (%lld targets)\n", dynamic ? "dynamic " : "",
              o.split.c_str(), r.loss, r.perplexity(), static_cast<long long>(r.targets));
  return 0;
}

int cmd_generate(const ModelCommandOptions& o) {
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  CommandModel command = load_for(o);
  LoadedModel& lm = command.loaded;
  const GenerateConfig& g = o.generate;
  std::string line = g.prompt.empty() ? "" : g.prompt + " |";
  for (const std::string& w : generate(*lm.model, lm.vocab, g)) {
    if (w == "<eos>") {
      std::printf("%s\n", line.c_str());
      line.clear();
      continue;
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) std::printf("%s\n", line.c_str());
  return 0;
}

// --out DIR for rank and bottleneck-demo: checked before any work (an existing file there is an
// error), created only when there is something to write.
std::string check_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw std::invalid_argument("--out " + dir +
                                " is a file, not a directory; choose another --out");
  return dir + "/";
}

int cmd_rank(const ModelCommandOptions& o) {
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const std::string data_dir = resolve_data_dir(o.data);
  CommandModel command = load_for(o);
  LoadedModel& lm = command.loaded;
  const Corpus corpus = load_corpus(data_dir, 1000000);
  check_same_vocab(corpus.vocab, lm.vocab, o.model_path());
  const std::string dir = check_out_dir(o.out);
  for (const char* f : {"spectrum.csv", "spectrum.svg"})
    require_other_file("rank", "--out", dir + f, o.model_path(), "the model");
  const auto t0 = std::chrono::steady_clock::now();
  require_eval_targets(static_cast<int64_t>(split_ids(corpus, o.split).size()), o.rank.batch_size,
                       "the " + o.split + " split of " + data_dir);
  const RankReport r = model_rank(*lm.model, split_ids(corpus, o.split), o.rank);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string title =
      lm.model->config.summary() + ", " + o.split + ", N=" + std::to_string(r.N);
  std::filesystem::create_directories(o.out);
  write_file_atomically(dir + "spectrum.csv", rank_csv(r));
  write_file_atomically(dir + "spectrum.svg", rank_plot_svg(r, title));
  std::printf("%s\n", title.c_str());
  std::printf(
      "log-prob matrix A [%lld,%lld]: numerical rank %lld of %lld (softmax bound d+2 = %lld)\n",
      static_cast<long long>(r.N), static_cast<long long>(r.V),
      static_cast<long long>(r.model.rank), static_cast<long long>(std::min(r.N, r.V)),
      static_cast<long long>(r.d + 2));
  std::printf("  sigma_max %.6g, threshold %.3g = sigma_max*max(N,V)*eps\n",
              r.model.sigma.empty() ? 0.0 : r.model.sigma[0], r.model.threshold);
  std::printf("decoder weight [%lld,%lld]: rank %lld\n", static_cast<long long>(r.V),
              static_cast<long long>(r.d), static_cast<long long>(r.decoder.rank));
  if (!std::isnan(r.component_kl))
    std::printf("mean pairwise KL between the MoS components: %.4f nats\n", r.component_kl);
  std::printf(
      "time %.1fs (contexts %.1fs, log-probs %.1fs, QR + singular values %.1fs); wrote "
      "%sspectrum.csv, %sspectrum.svg\n",
      seconds, r.seconds_contexts, r.seconds_log_probs, r.seconds_spectrum, dir.c_str(),
      dir.c_str());
  return 0;
}

// The cache pointer: one pass of the model over --split (and over valid for --grid), then the
// cache's mixture scored from it (lm/pointer.h).
int cmd_pointer(const ModelCommandOptions& o) {
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const std::string data_dir = resolve_data_dir(o.data);
  CommandModel command = load_for(o);
  LoadedModel& lm = command.loaded;
  const Corpus corpus = load_corpus(data_dir, 1000000);
  check_same_vocab(corpus.vocab, lm.vocab, o.model_path());
  PointerOptions p = o.pointer;
  if (p.grid) {
    const PointerStream valid = pointer_stream(*lm.model, corpus.valid, p.bptt);
    const PointerGrid g = pointer_grid(valid, p.window, pointer_thetas(), pointer_lambdas());
    std::printf("grid on valid (window %lld): model alone ppl %.3f\n",
                static_cast<long long>(p.window), std::exp(model_only_loss(valid)));
    for (const PointerScore& sc : g.scores)
      std::printf("  theta %.2f lambda %.2f: valid ppl %.3f\n", sc.theta, sc.lambda,
                  std::exp(sc.loss));
    std::printf("best on valid: theta %.2f lambda %.2f (valid ppl %.3f)\n", g.best.theta,
                g.best.lambda, std::exp(g.best.loss));
    p.theta = g.best.theta, p.lambda = g.best.lambda;
  }
  const PointerStream s = pointer_stream(*lm.model, split_ids(corpus, o.split), p.bptt);
  const double with_cache = pointer_grid(s, p.window, {p.theta}, {p.lambda}).best.loss;
  std::printf(
      "%s (batch size 1, %lld targets): model alone ppl %.3f; with the cache (window %lld, "
      "theta %.2f, lambda %.2f) ppl %.3f\n",
      o.split.c_str(), static_cast<long long>(s.size()), std::exp(model_only_loss(s)),
      static_cast<long long>(p.window), p.theta, p.lambda, std::exp(with_cache));
  return 0;
}

// reproduce: a comparison plan of every head, resumable (cli/reproduce.h).
int cmd_reproduce(int argc, char** argv) {
  ReproduceOptions o;
  const FlagTable table = reproduce_flags(o);
  if (parse_model_command("reproduce", table, argc, argv)) {
    std::printf("mosgrad reproduce --plan NAME [flags]\n\n%s", flags_help(table).c_str());
    return 0;
  }
  if (o.plan.empty())
    throw std::invalid_argument("reproduce needs --plan NAME: one of quick, afternoon, paper");
  reproduce_plan(o.plan);  // an unknown plan is an error before anything else
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
  ProgressDisplay display(stdout, isatty(fileno(stdout)));
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);
  const ReproduceSummary r =
      run_reproduce(o, &display, [&](const std::string& line) { display.message(line); });
  display.finish();
  std::printf("%d stages run, %d already done%s\n", r.stages_run, r.stages_skipped,
              r.interrupted ? " (stopped: run the same command to continue)" : "");
  return r.interrupted ? 130 : 0;
}

int cmd_bottleneck_demo(const ModelCommandOptions& o) {
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const DemoConfig& c = o.demo;
  const std::string dir = check_out_dir(o.out);
  std::printf(
      "true P*: N=%lld contexts, V=%lld words, %lld likely words per context; every head has "
      "d=%lld (K=%lld)\n",
      static_cast<long long>(c.contexts), static_cast<long long>(c.vocab),
      static_cast<long long>(c.support), static_cast<long long>(c.d),
      static_cast<long long>(c.experts));
  const DemoResult r =
      run_bottleneck_demo(c, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
  std::printf("rank of log P*: %lld; its mean entropy %.3f nats; the softmax bound d+2 = %lld\n",
              static_cast<long long>(r.true_rank), r.true_entropy, static_cast<long long>(c.d + 2));
  for (const DemoCurve& curve : r.curves)
    std::printf("final %-10s KL %.4f  rank %lld\n", head_kind_name(curve.head).c_str(),
                curve.points.back().kl, static_cast<long long>(curve.points.back().rank));
  std::filesystem::create_directories(o.out);
  write_file_atomically(dir + "demo.csv", demo_csv(r));
  write_file_atomically(dir + "demo.svg", demo_plot_svg(r, c));
  std::printf("wrote %sdemo.csv, %sdemo.svg\n", dir.c_str(), dir.c_str());
  return 0;
}

int cmd_graph(int argc, char** argv) {
  std::string out;
  bool help = false;
  TrainConfig cfg = parse_graph_command(argc, argv, &out, &help);
  if (help) {
    std::printf("mosgrad graph [--preset NAME] [model flags] [--out FILE]\n\n%s",
                flags_help(graph_flags(cfg, out)).c_str());
    return 0;
  }
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  write_file_atomically(out, model_graph_dot(cfg));
  std::printf("wrote %s (%s, T=%lld B=%lld)\n", out.c_str(), cfg.model.summary().c_str(),
              static_cast<long long>(cfg.bptt), static_cast<long long>(cfg.batch_size));
  if (std::system("command -v dot > /dev/null 2>&1") == 0) {
    std::string quoted = "'";  // the path inside single quotes for the shell
    for (char ch : out) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    quoted += "'";
    // dot writes to a pipe and the SVG goes through write_file_atomically, like every file
    // mosgrad writes (dot -o would write FILE.svg in place, through a symlink and half-made).
    std::string svg;
    if (std::FILE* p = ::popen(("dot -Tsvg " + quoted).c_str(), "r")) {
      char buf[65536];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) svg.append(buf, n);
      if (::pclose(p) == 0 && !svg.empty()) {
        write_file_atomically(out + ".svg", svg);
        std::printf("wrote %s.svg\n", out.c_str());
      }
    }
  } else {
    std::printf("(Graphviz's dot is not installed: dot -Tsvg %s -o %s.svg draws it)\n", out.c_str(),
                out.c_str());
  }
  return 0;
}

// Exits 1 when a parameter's gradient is off by more than --tolerance: scripts and CI can use it.
int cmd_gradcheck(int argc, char** argv) {
  bool help = false;
  GradcheckCommand c = parse_gradcheck_command(argc, argv, &help);
  if (help) {
    std::printf(
        "mosgrad gradcheck [--preset NAME] [model flags] [--batch_size B --bptt T] [--vocab V]\n"
        "                  [--entries N] [--tolerance X] [--params all|NAME,...]\n\n%s",
        flags_help(gradcheck_flags(c)).c_str());
    return 0;
  }
  if (c.cfg.threads > 0) set_num_threads(c.cfg.threads);
  const ModelGradcheckReport r = gradcheck_model(c.cfg, c.options);
  std::fputs(gradcheck_table(r, c.options.tolerance).c_str(), stdout);
  return r.ok ? 0 : 1;
}

int cmd_model(const std::string& command, int argc, char** argv) {
  ModelCommandOptions o;
  const FlagTable table = model_command_flags(command, o);
  if (parse_model_command(command, table, argc, argv)) {
    std::printf("mosgrad %s [flags]\n\n%s", command.c_str(), flags_help(table).c_str());
    return 0;
  }
  if (command == "eval" || command == "dyneval") return cmd_eval(o, command == "dyneval");
  if (command == "generate") return cmd_generate(o);
  if (command == "rank") return cmd_rank(o);
  if (command == "bottleneck-demo") return cmd_bottleneck_demo(o);
  if (command == "pointer") return cmd_pointer(o);
  if (command == "export") {
    require_other_file("export", "--out", o.out, o.model_path(), "the model being exported");
    const LoadedModel lm = load_model(o.model_path());
    export_safetensors(o.out, *lm.model, lm.vocab);
    std::printf("wrote %s (%lld parameters, %s)\n", o.out.c_str(),
                static_cast<long long>(lm.model->parameter_count()),
                lm.model->config.summary().c_str());
    return 0;
  }
  // import
  if (o.in.empty()) throw std::invalid_argument("import needs --in FILE.safetensors");
  require_other_file("import", "--out", o.out, o.in, "the input file");
  const LoadedModel lm = import_safetensors(o.in);
  save_model(o.out, *lm.model, lm.vocab);
  std::printf("wrote %s (%s)\n", o.out.c_str(), lm.model->config.summary().c_str());
  return 0;
}

// plot takes the run directory as its one positional argument (and --title).
int cmd_plot(int argc, char** argv) {
  std::string dir, title;
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "-h" || s == "--help")
      return std::puts("mosgrad plot RUN_DIR [--title TEXT]   (writes RUN_DIR/curves.svg)"), 0;
    if (s == "--title" && i + 1 < argc)
      title = argv[++i];
    else if (s.rfind("--", 0) == 0)
      throw std::invalid_argument("unknown flag " + s + " for plot (it takes RUN_DIR and --title)");
    else if (dir.empty())
      dir = s;
    else
      throw std::invalid_argument("plot takes one run directory, got '" + dir + "' and '" + s +
                                  "'");
  }
  if (dir.empty())
    return std::puts("mosgrad plot RUN_DIR [--title TEXT]   (writes RUN_DIR/curves.svg)"), 2;
  require_other_file("plot", "RUN_DIR", dir + "/curves.svg", dir + "/metrics.jsonl",
                     "a link to the metrics it plots");
  plot_learning_curves(dir + "/metrics.jsonl", dir + "/curves.svg", title.empty() ? dir : title);
  std::printf("wrote %s/curves.svg\n", dir.c_str());
  return 0;
}

int cmd_presets(int, char**) {
  for (const std::string& name : preset_names()) {
    const TrainConfig c = preset_config(name);
    std::printf("%-17s %s  B=%lld T=%lld lr=%g dropout=%g/%g/%g/%g/%g wdrop=%g\n", name.c_str(),
                c.model.summary().c_str(), static_cast<long long>(c.batch_size),
                static_cast<long long>(c.bptt), c.lr, c.model.dropout, c.model.dropouth,
                c.model.dropouti, c.model.dropoute, c.model.dropoutl, c.model.wdrop);
  }
  return 0;
}

// Every command, one row: its name, what it does in one line (the usage text below is made from
// these), and the function that runs it with the whole command line. Each command's flags are its
// table in cli/commands.cpp (`mosgrad <command> --help`, docs/cli.md).
struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

int run_train(int argc, char** argv) {
  return cmd_train(argc, argv, false);
}
int run_finetune(int argc, char** argv) {
  return cmd_train(argc, argv, true);
}
int run_model_command(int argc, char** argv) {
  return cmd_model(argv[1], argc, argv);
}

const Command kCommands[] = {
    {"train", "train a model (start from --preset NAME; any flag below overrides it)", run_train},
    {"finetune",
     "the MoS paper's second stage: ASGD from <save>/best.ckpt until validation stops improving",
     run_finetune},
    {"eval", "perplexity of a saved model on the valid or test split", run_model_command},
    {"dyneval", "dynamic evaluation (Krause et al. 2018) of a saved model", run_model_command},
    {"pointer",
     "the neural cache pointer (Grave et al. 2017) on a saved model, with --grid on valid",
     run_model_command},
    {"generate", "sample words from a saved model", run_model_command},
    {"export",
     "write a saved model as .safetensors (PyTorch parameter names, flags in __metadata__)",
     run_model_command},
    {"import", "turn a .safetensors file back into a mosgrad model checkpoint", run_model_command},
    {"plot", "draw RUN_DIR/metrics.jsonl as RUN_DIR/curves.svg", cmd_plot},
    {"rank",
     "the softmax bottleneck on a saved model: numerical rank of its log-probability matrix",
     run_model_command},
    {"graph",
     "the autograd graph of one forward pass of a model built from the train flags, as DOT",
     cmd_graph},
    {"gradcheck",
     "autograd's gradients of a small model against central differences, per parameter",
     cmd_gradcheck},
    {"bottleneck-demo",
     "Softmax, MoC, Sigsoftmax and MoS fitted to a high-rank distribution (synthetic, < 1 min)",
     run_model_command},
    {"presets", "list the presets and their settings", cmd_presets},
    {"reproduce",
     "a comparison plan of every head (train, finetune, dyneval, pointer, rank), resumable",
     cmd_reproduce},
};

std::string usage() {
  std::string text =
      "mosgrad — train and evaluate AWD-LSTM / Mixture-of-Softmaxes language models\n\n"
      "usage: mosgrad <command> [--flag value ...]\n\ncommands:\n";
  for (const Command& c : kCommands) {
    const std::string name = c.name;
    text +=
        "  " + name + std::string(name.size() < 10 ? 11 - name.size() : 2, ' ') + c.summary + "\n";
  }
  return text +
         "\n'mosgrad <command> --help' lists that command's flags; 'mosgrad help --markdown' all "
         "of them\n(docs/cli.md).\n";
}

int run(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "help" && argc > 2 && std::string(argv[2]) == "--markdown") {
    std::fputs(cli_markdown().c_str(), stdout);  // docs/cli.md
    return 0;
  }
  if (command.empty() || command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage().c_str(), stdout);
    return command.empty() ? 2 : 0;
  }
  for (const Command& c : kCommands)
    if (command == c.name) return c.run(argc, argv);
  std::fprintf(stderr, "mosgrad: unknown command '%s'\n\n%s", command.c_str(), usage().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mosgrad: error: %s\n", e.what());
    return 1;
  }
}
