// The `mosgrad` command: train, finetune, eval, dyneval, generate, export, import, plot.
//   mosgrad train --preset small-mos --data ../shared/data/ptb
//   mosgrad <command> --help
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

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

const char* kUsage = R"(mosgrad — train and evaluate AWD-LSTM / Mixture-of-Softmaxes language models

usage: mosgrad <command> [--flag value ...]

commands:
  train      train a model (start from --preset NAME; any flag below overrides it)
  finetune   the MoS paper's second stage: ASGD from <save>/best.ckpt until validation stops improving
  eval       perplexity of a saved model on the valid or test split
  dyneval    dynamic evaluation (Krause et al. 2018) of a saved model
  generate   sample words from a saved model
  export     write a saved model as .safetensors (PyTorch parameter names, flags in __metadata__)
  import     turn a .safetensors file back into a mosgrad model checkpoint
  plot       draw RUN_DIR/metrics.jsonl as RUN_DIR/curves.svg
  presets    list the presets and their settings

'mosgrad <command> --help' lists that command's flags.
)";

const char* kTrainHelp = R"(mosgrad train|finetune [--preset NAME] [flags]

presets: tiny, small-softmax, small-mos, small-sigsoftmax, small-mosig, mos-paper (default small-mos)

data and run:
  --data DIR            corpus directory (ptb.*.txt or wiki.*.tokens); else $MOSGRAD_DATA, else data/ptb
  --save DIR            run directory (default runs/<preset>): checkpoint.ckpt, best.ckpt, metrics.jsonl, curves.svg
  --resume              continue from <save>/checkpoint.ckpt exactly where it stopped
  --epochs N --max-minutes M --max-steps N     stop cleanly (a checkpoint is saved) after whichever comes first
  --threads N           OpenMP threads (default: all cores)
  --device cpu|cuda     where to train (cuda needs a `make CUDA=1` build and a GPU); --tf32 true lets cuBLAS use TF32
  --log-interval N      steps between progress lines / metrics records
  --max-train-tokens N --max-eval-tokens N      use only the first N tokens (quick runs)
model:
  --emsize --nhid --nhidlast --nlayers --n_experts --head softmax|mos|sigsoftmax|mosig|moc --tied true|false
  --dropout --dropouth --dropouti --dropoute --dropoutl --wdrop    (AWD-LSTM / MoS regularisation)
  --fused-lstm true|false   the fused LSTM (default) or the step-by-step reference built from ops
optimisation:
  --lr --clip --batch_size --bptt --seed --alpha (AR) --beta (TAR) --wdecay --nonmono (NT-ASGD)
  --optimizer sgd|adam  --eval_batch_size (10) --test_batch_size (1) --variable-bptt true|false
)";

const char* kEvalHelp = R"(mosgrad eval|dyneval|generate|export --model FILE [flags]

  --model FILE          a model checkpoint (default <save>/best.ckpt, --save defaults to runs/small-mos)
  --device cpu|cuda     where to run the model (default cpu); checkpoints load on either device
eval:      --data DIR --split valid|test (default test) --batch_size N (default 1 for test, 10 for valid) --bptt N
dyneval:   --data DIR --split valid|test --lamb 0.075 --lr 0.002 --epsilon 0.001 --bptt 5
           --stat_batch_size 100 --max_stat_batches N (gradient statistics on at most N training segments)
generate:  --words 100 --temperature 1.0 --seed 1 --prompt "the company said"
export:    --out FILE.safetensors
import:    --in FILE.safetensors --out FILE.ckpt
)";

struct Args {
  std::string command;
  std::map<std::string, std::string> flags;  // normalised names: '-' -> '_'
  std::vector<std::string> positional;
  bool help = false;
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
};

Args parse_args(int argc, char** argv) {
  Args a;
  if (argc > 1) a.command = argv[1];
  static const std::set<std::string> switches = {"resume", "help", "ms"};
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-h" || s == "--help") { a.help = true; continue; }
    if (s.rfind("--", 0) != 0) { a.positional.push_back(s); continue; }
    s = s.substr(2);
    std::string value;
    const size_t eq = s.find('=');
    if (eq != std::string::npos) value = s.substr(eq + 1), s = s.substr(0, eq);
    for (char& c : s) if (c == '-') c = '_';
    if (eq == std::string::npos) {
      if (switches.count(s)) value = "true";
      else if (i + 1 < argc) value = argv[++i];
      else throw std::invalid_argument("--" + s + " needs a value");
    }
    a.flags[s] = value;
  }
  return a;
}

TrainConfig train_config(const Args& a) {
  TrainConfig cfg = preset_config(a.get("preset", "small-mos"));
  static const std::set<std::string> not_config = {"preset", "resume", "model"};
  for (const auto& [k, v] : a.flags)
    if (!not_config.count(k)) cfg.set(k, v);
  cfg.resume = a.get("resume") == "true";
  cfg.data = resolve_data_dir(cfg.data);
  return cfg;
}

void on_sigint(int) {
  request_training_stop();
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the program at once
}

std::string model_path(const Args& a) {
  if (!a.get("model").empty()) return a.get("model");
  return a.get("save", "runs/" + a.get("preset", "small-mos")) + "/best.ckpt";
}

int cmd_train(const Args& a, bool finetune) {
  const TrainConfig cfg = train_config(a);
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  const Corpus corpus = load_corpus(cfg.data, 1000000);
  if (corpus.unk_valid || corpus.unk_test)
    std::fprintf(stderr, "warning: %lld valid and %lld test tokens are not in the training vocabulary (read as <unk>)\n",
                 static_cast<long long>(corpus.unk_valid), static_cast<long long>(corpus.unk_test));
  ProgressDisplay display(stdout, isatty(fileno(stdout)));
  display.message("data " + corpus.dir + ": " + std::to_string(corpus.train.size()) + " train tokens, V=" +
                  std::to_string(corpus.vocab.size()) + "; run directory " + cfg.save);
  std::signal(SIGINT, on_sigint);
  const TrainResult r = train_lm(cfg, corpus, {&display, nullptr}, finetune);
  display.finish();
  const std::string how = r.stopped ? " (" + r.stop_reason + ")" : "";
  if (std::isfinite(r.best_val_loss))
    std::printf("best valid ppl %.2f after %lld steps%s\n", std::exp(r.best_val_loss), static_cast<long long>(r.steps), how.c_str());
  else
    std::printf("%lld steps, no epoch finished yet, so no validation%s\n", static_cast<long long>(r.steps), how.c_str());
  if (!std::isnan(r.test_loss)) std::printf("test ppl %.2f\n", std::exp(r.test_loss));
  return r.stop_reason.rfind("interrupted", 0) == 0 ? 130 : 0;
}

const std::vector<int64_t>& split_ids(const Corpus& c, const std::string& split) {
  if (split == "test") return c.test;
  if (split == "valid") return c.valid;
  if (split == "train") return c.train;
  throw std::invalid_argument("--split must be valid, test or train, got '" + split + "'");
}

// --device for the commands that run a saved model: checked first, then the model moved there.
Device device_flag(const Args& a) {
  const std::string name = a.get("device", "cpu");
  if (name != "cpu" && name != "cuda") throw std::invalid_argument("--device expects cpu or cuda, got '" + name + "'");
  const Device device = parse_device(name);
  if (device == Device::CUDA) require_cuda();
  return device;
}

int cmd_eval(const Args& a, bool dynamic) {
  const Device device = device_flag(a);
  LoadedModel lm = load_model(model_path(a));
  lm.model->to(device);
  if (!a.get("threads").empty()) set_num_threads(std::stoi(a.get("threads")));
  const Corpus corpus = load_corpus(resolve_data_dir(a.get("data")), 1000000);
  if (corpus.vocab.size() != lm.model->config.ntoken)
    throw std::runtime_error("the corpus has V=" + std::to_string(corpus.vocab.size()) + " but the model was trained with V=" +
                             std::to_string(lm.model->config.ntoken) + " (another data set?)");
  const std::string split = a.get("split", "test");
  const auto& ids = split_ids(corpus, split);
  EvalResult r;
  if (dynamic) {
    DynevalConfig d;
    if (!a.get("lamb").empty()) d.lamb = std::stof(a.get("lamb"));
    if (!a.get("lr").empty()) d.lr = std::stof(a.get("lr"));
    if (!a.get("epsilon").empty()) d.epsilon = std::stof(a.get("epsilon"));
    if (!a.get("bptt").empty()) d.bptt = std::stoll(a.get("bptt"));
    if (!a.get("stat_batch_size").empty()) d.stat_batch_size = std::stoll(a.get("stat_batch_size"));
    if (!a.get("max_stat_batches").empty()) d.max_stat_batches = std::stoll(a.get("max_stat_batches"));
    d.mean_squares = a.get("ms") == "true";
    r = dynamic_evaluate(*lm.model, corpus.train, ids, d);
  } else {
    const int64_t B = std::stoll(a.get("batch_size", split == "test" ? "1" : "10"));
    r = evaluate(*lm.model, batchify(ids, B), std::stoll(a.get("bptt", "70")));
  }
  std::printf("%s%s loss %.6f ppl %.3f (%lld targets)\n", dynamic ? "dynamic " : "", split.c_str(), r.loss,
              r.perplexity(), static_cast<long long>(r.targets));
  return 0;
}

int cmd_generate(const Args& a) {
  const Device device = device_flag(a);
  LoadedModel lm = load_model(model_path(a));
  lm.model->to(device);
  GenerateConfig g;
  g.words = std::stoll(a.get("words", "100"));
  g.temperature = std::stof(a.get("temperature", "1.0"));
  g.seed = std::stoull(a.get("seed", "1"));
  g.prompt = a.get("prompt");
  std::string line = g.prompt.empty() ? "" : g.prompt + " |";
  for (const std::string& w : generate(*lm.model, lm.vocab, g)) {
    if (w == "<eos>") { std::printf("%s\n", line.c_str()); line.clear(); continue; }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) std::printf("%s\n", line.c_str());
  return 0;
}

int run(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (a.command.empty() || a.command == "--help" || a.command == "-h" || a.command == "help") {
    std::fputs(kUsage, stdout);
    return a.command.empty() ? 2 : 0;
  }
  if (a.command == "train" || a.command == "finetune") {
    if (a.help) return std::fputs(kTrainHelp, stdout), 0;
    return cmd_train(a, a.command == "finetune");
  }
  if (a.command == "eval" || a.command == "dyneval" || a.command == "generate" || a.command == "export" ||
      a.command == "import") {
    if (a.help) return std::fputs(kEvalHelp, stdout), 0;
    if (a.command == "eval" || a.command == "dyneval") return cmd_eval(a, a.command == "dyneval");
    if (a.command == "generate") return cmd_generate(a);
    if (a.command == "export") {
      const LoadedModel lm = load_model(model_path(a));
      const std::string out = a.get("out", "model.safetensors");
      export_safetensors(out, *lm.model, lm.vocab);
      std::printf("wrote %s (%lld parameters, %s)\n", out.c_str(), static_cast<long long>(lm.model->parameter_count()),
                  lm.model->config.summary().c_str());
      return 0;
    }
    const std::string in = a.get("in"), out = a.get("out", "imported.ckpt");
    if (in.empty()) throw std::invalid_argument("import needs --in FILE.safetensors");
    const LoadedModel lm = import_safetensors(in);
    save_model(out, *lm.model, lm.vocab);
    std::printf("wrote %s (%s)\n", out.c_str(), lm.model->config.summary().c_str());
    return 0;
  }
  if (a.command == "plot") {
    if (a.help || a.positional.empty()) return std::puts("mosgrad plot RUN_DIR   (writes RUN_DIR/curves.svg)"), a.help ? 0 : 2;
    const std::string dir = a.positional[0];
    plot_learning_curves(dir + "/metrics.jsonl", dir + "/curves.svg", a.get("title", dir));
    std::printf("wrote %s/curves.svg\n", dir.c_str());
    return 0;
  }
  if (a.command == "presets") {
    for (const std::string& name : preset_names()) {
      const TrainConfig c = preset_config(name);
      std::printf("%-17s %s  B=%lld T=%lld lr=%g dropout=%g/%g/%g/%g/%g wdrop=%g\n", name.c_str(),
                  c.model.summary().c_str(), static_cast<long long>(c.batch_size), static_cast<long long>(c.bptt), c.lr,
                  c.model.dropout, c.model.dropouth, c.model.dropouti, c.model.dropoute, c.model.dropoutl, c.model.wdrop);
    }
    return 0;
  }
  std::fprintf(stderr, "mosgrad: unknown command '%s'\n\n%s", a.command.c_str(), kUsage);
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
