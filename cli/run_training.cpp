// The commands that build a model from the train flags (train, finetune, graph, gradcheck,
// reproduce), and plot and presets: each runs once parse_command (cli/commands.h) has applied and
// checked every flag.
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/model_graph.h"
#include "autograd/engine.h"
#include "cli/run_commands.h"
#include "io/atomic_file.h"
#include "io/own_output.h"
#include "io/read_file.h"
#include "io/same_file.h"
#include "lm/corpus.h"
#include "lm/learning_curves.h"
#include "lm/train.h"
#include "lm/train_summary.h"
#include "mpi/processes.h"
#include "reproduce/reproduce.h"
#include "tensor/parallel.h"

namespace mg {

// Ctrl-C, kill (SIGTERM) and a closed terminal (SIGHUP) all stop training cleanly: the checkpoint
// is saved, and --resume continues exactly. A second signal, or one during the final test (when
// every file is saved and no step will come to notice it), ends the program at once.
void on_stop_signal(int sig) {
  request_training_stop();
  std::signal(sig, SIG_DFL);
  if (stop_at_once()) {  // write(2) and raise(3) are async-signal safe; printf is not
    static const char said[] =
        "\nmosgrad: stopped during the final test; every file was saved (mosgrad eval --split "
        "test scores best.ckpt)\n";
    if (::write(STDERR_FILENO, said, sizeof(said) - 1) < 0) {
    }
    std::raise(sig);
  }
}

void stop_cleanly_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);  // `mosgrad train | head`: output stops, training goes on
}

namespace {

int train_or_finetune(const TrainConfig& cfg, bool finetune) {
  const Corpus corpus = load_corpus(cfg.data, 1000000);
  // Under mpirun the processes compute together and rank 0 alone speaks (and writes, lm/train.cpp).
  const bool speaks = process_rank() == 0;
  if (speaks && (corpus.unk_valid || corpus.unk_test))
    std::fprintf(stderr,
                 "warning: %lld valid and %lld test tokens are not in the training vocabulary "
                 "(read as <unk>)\n",
                 static_cast<long long>(corpus.unk_valid), static_cast<long long>(corpus.unk_test));
  ProgressDisplay display(stdout, isatty(fileno(stdout)));
  const int N = process_count();
  if (speaks)
    display.message("data " + corpus.dir + ": " + std::to_string(corpus.train.size()) +
                    " train tokens, V=" + std::to_string(corpus.vocab.size()) + "; run directory " +
                    cfg.save +
                    (N > 1 ? "; " + std::to_string(N) + " processes, --grad-groups " +
                                 std::to_string(cfg.grad_groups)
                           : ""));
  stop_cleanly_on_signals();
  const TrainResult r = train_lm(cfg, corpus, {speaks ? &display : nullptr, nullptr}, finetune);
  if (!speaks) return r.stop_reason.rfind("interrupted", 0) == 0 ? 130 : 0;
  display.finish();
  // What best.ckpt holds, and its test score; a value that is not finite throws (exit 1).
  for (const std::string& line : train_summary(r, cfg.save + "/best.ckpt"))
    std::printf("%s\n", line.c_str());
  return r.stop_reason.rfind("interrupted", 0) == 0 ? 130 : 0;
}

}  // namespace

int run_train(CommandLine& c) {
  return train_or_finetune(c.train, false);
}

int run_finetune(CommandLine& c) {
  return train_or_finetune(c.train, true);
}

// reproduce: a comparison plan of every head, resumable (reproduce/reproduce.h).
int run_reproduce_command(CommandLine& c) {
  // Under mpirun it is refused once, by rank 0 (run_reproduce's first check), whose error ends
  // the whole job (cli/mosgrad.cpp: abort_processes). The other ranks say nothing and touch
  // nothing: they wait in an exchange that rank 0 never joins, until that end.
  if (process_count() > 1 && process_rank() != 0) {
    any_process(false);
    return 1;
  }
  ProgressDisplay display(stdout, isatty(fileno(stdout)));
  stop_cleanly_on_signals();
  const ReproduceSummary r =
      run_reproduce(c.reproduce, &display, [&](const std::string& line) { display.message(line); });
  display.finish();
  if (!c.reproduce.report)  // --report ran no stage: its own line said what it wrote
    std::printf("%d stages run, %d already done%s\n", r.stages_run, r.stages_skipped,
                r.interrupted ? " (stopped: run the same command to continue)" : "");
  return r.interrupted ? 130 : 0;
}

int run_graph(CommandLine& c) {
  const TrainConfig& cfg = c.train;
  const std::string& out = c.out;
  require_writable_folder_of("--out", out);
  require_own_output("graph", "--out", out, "a graph written by mosgrad graph",
                     [](const std::string& p) { return first_line_is(p, kGraphDotFirstLine); });
  // Graphviz's drawing of that graph names it in a comment near the top.
  require_own_output("graph", "--out", out + ".svg", "Graphviz's drawing of a mosgrad graph",
                     [](const std::string& p) {
                       return read_file(p, "graph drawing").find("<!-- Title: autograd ") !=
                              std::string::npos;
                     });
  const std::string dot = model_graph_dot(cfg, c.values);
  write_file_atomically(out, dot);
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
int run_gradcheck(CommandLine& c) {
  const ModelGradcheckReport r = gradcheck_model(c.train, c.gradcheck);
  std::fputs(gradcheck_table(r, c.gradcheck.tolerance).c_str(), stdout);
  return r.ok ? 0 : 1;
}

int run_plot(CommandLine& c) {
  const std::string& dir = c.run_dir;
  const std::string title = c.title.empty() ? dir : c.title;
  // The training's curves, and the finetune's when the run was finetuned: the plots train and
  // finetune draw at each epoch's end.
  std::vector<std::array<std::string, 3>> plots = {{"metrics.jsonl", "curves.svg", title}};
  // (A finetune stopped before its first record left its file empty: nothing to draw.)
  std::error_code ec;
  if (std::filesystem::file_size(dir + "/finetune_metrics.jsonl", ec) > 0 && !ec)
    plots.push_back({"finetune_metrics.jsonl", "finetune_curves.svg", title + " (finetune)"});
  for (const auto& [metrics, curves, heading] : plots)
    require_other_file("plot", "RUN_DIR", dir + "/" + curves, dir + "/" + metrics,
                       "a link to the metrics it plots");
  for (const auto& [metrics, curves, heading] : plots)
    for (const std::string& file :
         plot_learning_curves(dir + "/" + metrics, dir + "/" + curves, heading))
      std::printf("wrote %s\n", file.c_str());
  return 0;
}

int run_presets(CommandLine&) {
  for (const std::string& name : preset_names()) {
    const TrainConfig c = preset_config(name);
    std::printf("%-17s %s  B=%lld T=%lld lr=%g dropout=%g/%g/%g/%g/%g wdrop=%g epochs=%lld%s%s\n",
                name.c_str(), c.model.summary().c_str(), static_cast<long long>(c.batch_size),
                static_cast<long long>(c.bptt), c.lr, c.model.dropout, c.model.dropouth,
                c.model.dropouti, c.model.dropoute, c.model.dropoutl, c.model.wdrop,
                static_cast<long long>(c.epochs),
                c.asgd_epoch > 0 ? (" asgd_epoch=" + std::to_string(c.asgd_epoch)).c_str() : "",
                c.paths.precision != "fp32" ? (" precision=" + c.paths.precision).c_str() : "");
  }
  return 0;
}

}  // namespace mg
