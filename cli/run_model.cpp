// The commands that run a saved model (eval, dyneval, pointer, generate, export, import, rank) and
// bottleneck-demo: each runs once parse_command (cli/commands.h) has applied and checked every
// flag.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/run_commands.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/own_output.h"
#include "io/read_file.h"
#include "io/same_file.h"
#include "io/strf.h"
#include "io/svg_plot.h"
#include "lm/batching.h"
#include "lm/corpus.h"
#include "lm/dyneval.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "lm/model_io.h"
#include "mpi/processes.h"
#include "tensor/parallel.h"

namespace mg {

namespace {

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

// The model a command reads: --model, else <save>/best.ckpt, else runs/<preset>/best.ckpt. A
// missing default is named with the flag that chose it and the flags that name another: a user
// who gave no --model does not know where the path came from.
LoadedModel load_command_model(const ModelCommandOptions& o) {
  const std::string path = o.model_path();
  std::error_code ec;
  if (o.model.empty() && !std::filesystem::exists(path, ec))
    throw std::invalid_argument(
        "there is no model at " + path + ", the default of " +
        (o.save.empty() ? "--preset " + o.preset + " (runs/<preset>/best.ckpt)"
                        : "--save " + o.save + " (<save>/best.ckpt)") +
        ": name the model with --model FILE, or its run directory with --save DIR");
  return load_model(path);
}

CommandModel load_for(const ModelCommandOptions& o) {
  const Device device = parse_device(o.device);
  const ComputePaths paths = compute_paths(o.paths, device);  // checked before any loading
  if (device == Device::CUDA) require_cuda();
  LoadedModel lm = load_command_model(o);
  lm.model->to(device);
  RNNModel* model = lm.model.get();
  return CommandModel{std::move(lm), ComputePathsScope(paths, model)};
}

// The likely cause of a non-finite result that no flag of the command explains: the model. Its
// weights are finite (load_model refuses NaN and Inf), so its outputs overflow: the weights of a
// run that diverged, or a file made by hand.
std::string model_cause(const ModelCommandOptions& o) {
  return "likely cause --model " + o.model_path() +
         ": its weights are finite but its outputs overflow (a model whose training diverged?)";
}

// What eval, dyneval, rank and pointer start from: the data directory resolved, the model loaded
// (load_for), the corpus read and its vocabulary checked against the model's — in that order, so a
// bad --data is named before the model is read.
struct ModelAndCorpus {
  explicit ModelAndCorpus(const ModelCommandOptions& o)
      : data_dir(resolve_data_dir(o.data)),
        command(load_for(o)),
        lm(command.loaded),
        corpus(load_corpus(data_dir, 1000000)) {
    check_same_vocab(corpus.vocab, lm.vocab, o.model_path());
  }
  std::string data_dir;
  CommandModel command;
  LoadedModel& lm;
  Corpus corpus;
};

int evaluate_command(const ModelCommandOptions& o, bool dynamic) {
  const ModelAndCorpus m(o);
  const LoadedModel& lm = m.lm;
  const Corpus& corpus = m.corpus;
  const std::string& data_dir = m.data_dir;
  const auto& ids = split_ids(corpus, o.split);
  const int64_t eval_B = dynamic            ? 1
                         : o.batch_size > 0 ? o.batch_size
                                            : (o.split == "test" ? 1 : 10);
  require_eval_targets(static_cast<int64_t>(ids.size()), eval_B,
                       "the " + o.split + " split of " + data_dir);
  const int64_t G = dynamic ? 1 : o.grad_groups, N = process_count();
  if (dynamic && N > 1)
    throw std::invalid_argument("dyneval runs in one process: start it without mpirun (got -np " +
                                std::to_string(N) + ")");
  if (eval_B % G != 0)
    throw std::invalid_argument("--batch_size " + std::to_string(eval_B) +
                                " is not divisible into --grad-groups " + std::to_string(G) +
                                " column groups");
  if (N > 1 && (G % N != 0 || o.device == "cuda"))
    throw std::invalid_argument("under mpirun -np " + std::to_string(N) + ", eval needs " +
                                "--grad-groups divisible by " + std::to_string(N) + " (got " +
                                std::to_string(G) + ") and --device cpu");
  EvalResult r;
  if (dynamic)
    r = dynamic_evaluate(*lm.model, corpus.train, ids, o.dyneval);
  else
    r = evaluate(*lm.model, batchify(ids, eval_B), o.bptt, G);
  // Checked by every process, so all fail alike (dynamic_evaluate has already checked its own
  // result, naming the steps' flags).
  require_finite_perplexity(
      r.loss, (dynamic ? "dyneval: the " : "eval: the ") + o.split + " perplexity", model_cause(o));
  if (process_rank() != 0) return 0;  // under mpirun rank 0 speaks
  std::printf("%s%s loss %.6f ppl %.3f (%lld targets)\n", dynamic ? "dynamic " : "",
              o.split.c_str(), r.loss, r.perplexity(), static_cast<long long>(r.targets));
  return 0;
}

// The first line of a table a command writes: its header, as the writer itself prints it.
std::string csv_header(const std::string& csv) {
  return csv.substr(0, csv.find('\n'));
}

bool drew_plot(const std::string& path) {
  return drawn_by_mosgrad(read_file(path, "plot"));
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

}  // namespace

int run_eval(CommandLine& c) {
  return evaluate_command(c.model, false);
}

int run_dyneval(CommandLine& c) {
  return evaluate_command(c.model, true);
}

int run_generate(CommandLine& c) {
  const ModelCommandOptions& o = c.model;
  CommandModel command = load_for(o);
  LoadedModel& lm = command.loaded;
  const GenerateConfig& g = o.generate;
  std::string line = g.prompt.empty() ? "" : g.prompt + " |";
  // Each sentence printed as it ends: a long text shows as it comes, and a stop keeps what came.
  generate(*lm.model, lm.vocab, g, [&](const std::string& w) {
    if (w != "<eos>") {
      line += (line.empty() ? "" : " ") + w;
      return;
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    line.clear();
  });
  if (!line.empty()) std::printf("%s\n", line.c_str());
  return 0;
}

int run_rank(CommandLine& c) {
  const ModelCommandOptions& o = c.model;
  const ModelAndCorpus m(o);
  const LoadedModel& lm = m.lm;
  const Corpus& corpus = m.corpus;
  const std::string& data_dir = m.data_dir;
  const std::string dir = check_out_dir(o.out);
  require_writable_dir("--out", o.out);
  for (const char* f : {"spectrum.csv", "spectrum.svg"})
    require_other_file("rank", "--out", dir + f, o.model_path(), "the model");
  require_own_output(
      "rank", "--out", dir + "spectrum.csv", "a spectrum written by mosgrad rank",
      [](const std::string& p) { return first_line_is(p, csv_header(rank_csv({}))); });
  require_own_output("rank", "--out", dir + "spectrum.svg", "a plot mosgrad drew", drew_plot);
  const auto t0 = std::chrono::steady_clock::now();
  require_eval_targets(static_cast<int64_t>(split_ids(corpus, o.split).size()), o.rank.batch_size,
                       "the " + o.split + " split of " + data_dir);
  // The whole of PTB valid takes minutes: say what is under way before the silence.
  std::printf(
      "computing the log-probabilities of %s of the %s split's contexts and their "
      "singular values...\n",
      o.rank.contexts > 0 ? std::to_string(o.rank.contexts).c_str() : "all", o.split.c_str());
  std::fflush(stdout);
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
int run_pointer(CommandLine& c) {
  const ModelCommandOptions& o = c.model;
  const ModelAndCorpus m(o);
  const LoadedModel& lm = m.lm;
  const Corpus& corpus = m.corpus;
  PointerOptions p = o.pointer;
  // The model alone must score each text; then the cache's mixture, whose probability of a word
  // is at least (1 - λ) times the model's, can only fail at λ = 1.
  const auto model_alone = [&](const PointerStream& s, const std::string& split) {
    const double loss = model_only_loss(s);
    require_finite_perplexity(loss, "pointer: the model's own " + split + " perplexity",
                              model_cause(o));
    return loss;
  };
  if (p.grid) {
    const PointerStream valid = pointer_stream(*lm.model, corpus.valid, p.bptt);
    const double alone = model_alone(valid, "valid");
    const PointerGrid g = pointer_grid(valid, p.window, pointer_thetas(), pointer_lambdas());
    std::printf("grid on valid (window %lld): model alone ppl %.3f\n",
                static_cast<long long>(p.window), std::exp(alone));
    for (const PointerScore& sc : g.scores)
      std::printf("  theta %.3g lambda %.3g: valid ppl %.3f\n", sc.theta, sc.lambda,
                  std::exp(sc.loss));
    std::printf("best on valid: theta %.3g lambda %.3g (valid ppl %.3f)\n", g.best.theta,
                g.best.lambda, std::exp(g.best.loss));
    if (!g.edge.empty())
      std::printf("note: %s: the best setting may lie outside the grid\n", g.edge.c_str());
    p.theta = g.best.theta, p.lambda = g.best.lambda;
  }
  const PointerStream s = pointer_stream(*lm.model, split_ids(corpus, o.split), p.bptt);
  const double alone = model_alone(s, o.split);
  const double with_cache = pointer_grid(s, p.window, {p.theta}, {p.lambda}).best.loss;
  require_finite_perplexity(with_cache, "pointer: the " + o.split + " perplexity with the cache",
                            model_cause(o));
  std::printf(
      "%s (batch size 1, %lld targets): model alone ppl %.3f; with the cache (window %lld, "
      "theta %.6g, lambda %.6g) ppl %.3f\n",  // as given: --lambdasm 0.999999 is not 1
      o.split.c_str(), static_cast<long long>(s.size()), std::exp(alone),
      static_cast<long long>(p.window), p.theta, p.lambda, std::exp(with_cache));
  return 0;
}

int run_bottleneck_demo_command(CommandLine& c) {
  const ModelCommandOptions& o = c.model;
  const DemoConfig& demo = o.demo;
  const std::string dir = check_out_dir(o.out);
  require_writable_dir("--out", o.out);
  require_own_output(
      "bottleneck-demo", "--out", dir + "demo.csv", "a table written by mosgrad bottleneck-demo",
      [](const std::string& p) { return first_line_is(p, csv_header(demo_csv({}))); });
  require_own_output("bottleneck-demo", "--out", dir + "demo.svg", "a plot mosgrad drew",
                     drew_plot);
  std::printf(
      "true P*: N=%lld contexts, V=%lld words, %lld likely words per context; every head has "
      "d=%lld (K=%lld)\n",
      static_cast<long long>(demo.contexts), static_cast<long long>(demo.vocab),
      static_cast<long long>(demo.support), static_cast<long long>(demo.d),
      static_cast<long long>(demo.experts));
  const DemoResult r =
      run_bottleneck_demo(demo, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
  std::printf("rank of log P*: %lld; its mean entropy %.3f nats; the softmax bound d+2 = %lld\n",
              static_cast<long long>(r.true_rank), r.true_entropy,
              static_cast<long long>(demo.d + 2));
  for (const DemoCurve& curve : r.curves)
    std::printf("final %-10s KL %.4f  rank %lld\n", head_kind_name(curve.head).c_str(),
                curve.points.back().kl, static_cast<long long>(curve.points.back().rank));
  std::filesystem::create_directories(o.out);
  write_file_atomically(dir + "demo.csv", demo_csv(r));
  write_file_atomically(dir + "demo.svg", demo_plot_svg(r, demo));
  std::printf("wrote %sdemo.csv, %sdemo.svg\n", dir.c_str(), dir.c_str());
  return 0;
}

int run_export(CommandLine& c) {
  const ModelCommandOptions& o = c.model;
  require_other_file("export", "--out", o.out, o.model_path(), "the model being exported");
  require_writable_folder_of("--out", o.out);
  require_own_output("export", "--out", o.out, "a safetensors file written by mosgrad export",
                     [](const std::string& p) {
                       const SafetensorsFile f = load_safetensors(p);
                       const auto it = f.metadata.find("format");
                       return it != f.metadata.end() && it->second == "mosgrad";
                     });
  const LoadedModel lm = load_command_model(o);
  export_safetensors(o.out, *lm.model, lm.vocab);
  std::printf("wrote %s (%lld parameters, %s)\n", o.out.c_str(),
              static_cast<long long>(lm.model->parameter_count()),
              lm.model->config.summary().c_str());
  return 0;
}

int run_import(CommandLine& c) {
  const ModelCommandOptions& o = c.model;
  if (o.in.empty()) throw std::invalid_argument("import needs --in FILE.safetensors");
  require_other_file("import", "--out", o.out, o.in, "the input file");
  require_writable_folder_of("--out", o.out);
  // Marked as import's, so that importing again may replace it, and nothing else (a run's
  // best.ckpt holds a model too, but one that training chose and import must not overwrite).
  const std::pair<std::string, std::string> mark{"written_by", "mosgrad import"};
  require_own_output("import", "--out", o.out, "a checkpoint written by mosgrad import",
                     [&](const std::string& p) {
                       const Checkpoint ck = load_checkpoint(p);
                       return ck.has_string(mark.first) && ck.string(mark.first) == mark.second;
                     });
  const LoadedModel lm = import_safetensors(o.in);
  // Without its words a model cannot score text: every command would refuse the checkpoint.
  if (lm.vocab.size() == 0)
    throw std::invalid_argument(
        "import: " + o.in +
        " has no vocabulary (__metadata__ \"vocab\": the words, one per line, in the order of the "
        "embedding's rows, as mosgrad export writes it); nothing was written");
  save_model(o.out, *lm.model, lm.vocab, {mark});
  std::printf("wrote %s (%s)\n", o.out.c_str(), lm.model->config.summary().c_str());
  return 0;
}

}  // namespace mg
