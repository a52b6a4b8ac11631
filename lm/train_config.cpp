#include "lm/train_config.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace mg {

std::map<std::string, std::string> TrainConfig::to_map() const {
  // Every flag of the table, read back through its row: the checkpoint's record of the run (the
  // model's under "model.<flag>", as ModelConfig::to_map writes them), so a new flag is recorded
  // by being in the table. The reference paths are a record only: a run may resume on others.
  TrainConfig copy = *this;  // the table binds to a config it may write; this one stays const
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : model.to_map()) m["model." + k] = v;  // ntoken too, which is no flag
  for (const Flag& f : copy.flag_table())
    if (f.get) m[(f.section == "model" ? "model." : "") + f.name] = f.get();
  return m;
}

GemmPath gemm_path_for(const std::string& gemm, Device device) {
  if (gemm != "fast" && gemm != "reference")
    throw std::invalid_argument("--gemm expects one of fast|reference, got '" + gemm + "'");
  if (gemm == "fast") return GemmPath::kFast;
  if (device == Device::CUDA)
    throw std::invalid_argument(
        "--gemm reference runs on the CPU only: with --device cuda every GEMM is cuBLAS's "
        "(use --device cpu to run or step through the reference GEMM)");
  return GemmPath::kReference;
}

Flag precision_flag(std::string& precision) {
  return choice_flag(
      "precision", "precision",
      "operands of the CPU matrix products: fp32, or bf16 (rounded to "
      "bfloat16, FP32 accumulation; 1.3-1.7x faster training on AMD (Zen 5), slower on Intel's "
      "AVX512_BF16)",
      precision, {"fp32", "bf16"});
}

GemmPrecision gemm_precision_for(const std::string& precision, const std::string& gemm,
                                 Device device) {
  if (precision != "fp32" && precision != "bf16")
    throw std::invalid_argument("--precision expects one of fp32|bf16, got '" + precision + "'");
  if (precision == "fp32") return GemmPrecision::kFp32;
  if (device == Device::CUDA)
    throw std::invalid_argument(
        "--precision bf16 is a CPU path (AVX512_BF16); on --device cuda the GEMMs are cuBLAS's "
        "FP32 ones (use --tf32 there, or --device cpu)");
  if (gemm == "reference")
    throw std::invalid_argument(
        "--precision bf16 needs --gemm fast: the reference GEMM is the plain FP32 triple loop");
  if (!gemm_bf16_kernel_name())
    throw std::invalid_argument(
        "--precision bf16 needs a CPU with AVX512_BF16 (AMD Zen 4 or later, Intel Cooper Lake, "
        "Sapphire Rapids or later); this one has none: use --precision fp32");
  return GemmPrecision::kBf16;
}

ComputePaths compute_paths(const PathFlags& flags, Device device) {
  ComputePaths p;
  p.fused_lstm = flags.fused_lstm, p.fused_head = flags.fused_head;
  p.gemm = gemm_path_for(flags.gemm, device);
  p.precision = gemm_precision_for(flags.precision, flags.gemm, device);
  return p;
}

FlagTable reference_path_flags(PathFlags& flags) {
  const std::string section =
      "reference paths (same numbers to rounding, slower, easier to read and step through)";
  return {
      bool_flag("fused_lstm", section,
                "true: the fused LSTM; false: the step-by-step reference built from ops",
                flags.fused_lstm),
      bool_flag("fused_head", section,
                "true: the fused head loss; false: the plain nll_loss(log_prob(h))",
                flags.fused_head),
      choice_flag(
          "gemm", section,
          "fast: the packed GEMM; reference: the textbook triple loop (CPU only)",
          flags.gemm, {"fast", "reference"}),
  };
}

// Sizes are capped so that no product of them (4H x H weights, T x B rows, V x E tables) can
// overflow int64 before a tensor is made.
constexpr int64_t kMaxSize = int64_t{1} << 20;
constexpr int64_t kMaxCount = int64_t{1} << 40;  // steps, tokens, intervals

FlagTable TrainConfig::flag_table() {
  const std::string run = "data and run", model_s = "model", opt = "optimisation";
  auto custom = [](const std::string& name, const std::string& value, const std::string& section,
                   const std::string& help, std::function<void(const std::string&)> set,
                   std::function<std::string()> get) {
    return Flag{name, value, help, section, std::move(set), std::move(get)};
  };
  FlagTable table = {
      custom(
          "preset", "NAME", run, "start from a preset (see `mosgrad presets`)",
          [this](const std::string& v) {
            const auto names = preset_names();
            if (std::find(names.begin(), names.end(), v) == names.end())
              preset_config(v);  // throws, listing them
            preset = v;
          },
          [this] { return preset; }),
      text_flag("data", "DIR", run,
                "corpus directory (ptb.*.txt or wiki.*.tokens); else $MOSGRAD_DATA, else data/ptb",
                data),
      text_flag("save", "DIR", run,
                "run directory (runs/<preset> unless given): checkpoint.ckpt, best.ckpt, "
                "metrics.jsonl, curves.svg",
                save),
      custom(
          "resume", "", run, "continue from <save>/checkpoint.ckpt exactly where it stopped",
          [this](const std::string& v) {
            bool b = false;
            bool_flag("resume", "", "", b).set(v);
            resume = b;
          },
          [this] { return std::string(resume ? "1" : "0"); }),
      int_flag("epochs", run, "stop cleanly (a checkpoint is saved) after this many epochs", epochs,
               1, kMaxCount),
      double_flag("max_minutes", run, "... or after this many minutes (0: no limit)", max_minutes,
                  0, 1e9),
      int_flag("max_steps", run, "... or after this many optimizer steps (0: no limit)", max_steps,
               0, kMaxCount),
      custom(
          "threads", "N", run, "OpenMP threads (0: all cores)",
          [this](const std::string& v) {
            int64_t n = 0;
            int_flag("threads", "", "", n, 0, 4096).set(v);
            threads = static_cast<int>(n);
          },
          [this] { return std::to_string(threads); }),
      custom(
          "device", "cpu|cuda", run, "where to train (cuda needs a `make CUDA=1` build and a GPU)",
          [this](const std::string& v) {
            if (v != "cpu" && v != "cuda")
              throw std::invalid_argument("--device expects cpu or cuda, got '" + v + "'");
            device = parse_device(v);
          },
          [this] { return std::string(device == Device::CUDA ? "cuda" : "cpu"); }),
      bool_flag("tf32", run,
                "let cuBLAS use TF32 tensor cores on the GPU (faster, ~1e-3 relative GEMMs)", tf32),
      int_flag("log_interval", run, "steps between progress lines / metrics records", log_interval,
               1, kMaxCount),
      int_flag("max_train_tokens", run, "train on the first N tokens only (0: all)",
               max_train_tokens, 0, kMaxCount),
      int_flag("max_eval_tokens", run, "validate on the first N tokens only (0: all)",
               max_eval_tokens, 0, kMaxCount),
      bool_flag("test_at_end", run, "evaluate the best model on test (batch size 1) at the end",
                test_at_end),
      bool_flag("detect_anomaly", run,
                "stop at the first op whose forward or backward makes a NaN or Inf, naming it "
                "(several times slower)",
                detect_anomaly),
      bool_flag("log_stats", run,
                "at each log interval, record per parameter the gradient norm and update/weight "
                "ratio, per LSTM layer the output spread and saturated gates (mosgrad plot draws "
                "them)",
                log_stats),
      int_flag("emsize", model_s, "embedding size E", model.emsize, 1, kMaxSize),
      int_flag("nhid", model_s, "hidden size of the LSTM layers but the last", model.nhid, 1,
               kMaxSize),
      int_flag("nhidlast", model_s, "hidden size of the last LSTM layer (mixture heads)",
               model.nhidlast, 1, kMaxSize),
      int_flag("nlayers", model_s, "LSTM layers", model.nlayers, 1, 64),
      int_flag("n_experts", model_s, "mixture components K (mos, mosig, moc)", model.n_experts, 1,
               4096),
      custom(
          "head", "softmax|mos|sigsoftmax|mosig|moc", model_s, "output head",
          [this](const std::string& v) { model.head = parse_head_kind(v); },
          [this] { return head_kind_name(model.head); }),
      bool_flag("tied", model_s, "tie the decoder to the encoder's weight", model.tied),
      float_flag("dropout", model_s, "locked dropout on the last LSTM layer's output",
                 model.dropout, 0, 1, true),
      float_flag("dropouth", model_s, "locked dropout between LSTM layers", model.dropouth, 0, 1,
                 true),
      float_flag("dropouti", model_s, "locked dropout on the embedded input", model.dropouti, 0, 1,
                 true),
      float_flag("dropoute", model_s, "embedding dropout (whole word types)", model.dropoute, 0, 1,
                 true),
      float_flag("dropoutl", model_s, "locked dropout on the MoS latent", model.dropoutl, 0, 1,
                 true),
      float_flag("wdrop", model_s, "DropConnect on the recurrent weights", model.wdrop, 0, 1, true),
      float_flag("lr", opt, "learning rate (scaled by seq_len / bptt)", lr, 1e-12, 1e6),
      float_flag("clip", opt, "gradient-norm clip (0: none)", clip, 0, 1e9),
      float_flag("alpha", opt, "AR: weight of mean(dropped last-layer output^2)", alpha, 0, 1e9),
      float_flag("beta", opt, "TAR: weight of mean((h_t - h_{t-1})^2)", beta, 0, 1e9),
      float_flag("wdecay", opt, "L2 weight decay", wdecay, 0, 1e9),
      int_flag("batch_size", opt, "training batch size B", batch_size, 1, kMaxSize),
      int_flag("eval_batch_size", opt, "validation batch size", eval_batch_size, 1, kMaxSize),
      int_flag("test_batch_size", opt, "test batch size (the papers: 1)", test_batch_size, 1,
               kMaxSize),
      int_flag("bptt", opt, "BPTT length T", bptt, 1, kMaxSize),
      int_flag("max_seq_len_delta", opt, "cap of the variable BPTT length: bptt + delta",
               max_seq_len_delta, 0, kMaxSize),
      bool_flag("variable_bptt", opt, "AWD-LSTM's random segment lengths", variable_bptt),
      int_flag("grad_groups", opt,
               "column groups per step (gradient accumulation; under mpirun each process runs "
               "G/N of them, the same bits for any N dividing G)",
               grad_groups, 1, kMaxSize),
      int_flag("nonmono", opt, "NT-ASGD: epochs of non-improvement before switching to ASGD",
               nonmono, 0, kMaxCount),
      int_flag("asgd_epoch", opt,
               "switch SGD -> ASGD at the start of this epoch whatever validation says (a fixed "
               "budget's schedule; 0: NT-ASGD's test alone)",
               asgd_epoch, 0, kMaxCount),
      custom(
          "seed", "N", opt, "random seed (weights, dropout, BPTT lengths)",
          [this](const std::string& v) {
            int64_t n = 0;
            int_flag("seed", "", "", n, 0, INT64_MAX).set(v);
            seed = static_cast<uint64_t>(n);
          },
          [this] { return std::to_string(seed); }),
      choice_flag("optimizer", opt, "sgd (NT-ASGD switches it to asgd) or adam", optimizer,
                  {"sgd", "adam"}),
  };
  const FlagTable path_rows = reference_path_flags(paths);
  table.insert(table.end(), path_rows.begin(), path_rows.end());
  table.push_back(precision_flag(paths.precision));
  return table;
}

void TrainConfig::set(const std::string& name, const std::string& value) {
  apply_flag(flag_table(), "train", name, value);
}

std::vector<std::string> preset_names() {
  return {"tiny",        "small-softmax", "small-mos", "small-sigsoftmax",
          "small-mosig", "mos-paper",     "ptb-1h",    "ptb-3h"};
}

TrainConfig preset_config(const std::string& name) {
  TrainConfig c;
  c.preset = name;
  c.save = "runs/" + name;
  ModelConfig& m = c.model;
  // The small presets share AWD-LSTM's regularisation (Merity et al. 2017), scaled to a 2-layer
  // model.
  auto small = [&]() {
    m.emsize = 200, m.nhid = 400, m.nlayers = 2, m.tied = true;
    m.dropout = 0.4f, m.dropouth = 0.25f, m.dropouti = 0.0f, m.dropoute = 0.1f, m.wdrop = 0.5f;
    c.batch_size = 20, c.bptt = 35, c.lr = 20, c.clip = 0.25f, c.alpha = 2, c.beta = 1,
    c.wdecay = 1.2e-6f;
  };
  if (name == "tiny") {
    m.emsize = 64, m.nhid = 64, m.nhidlast = 64, m.nlayers = 1, m.tied = true,
    m.head = HeadKind::Softmax;
    m.dropout = m.dropouth = m.dropouti = m.dropoute = m.dropoutl = m.wdrop = 0.0f;
    c.batch_size = 16, c.bptt = 32, c.lr = 20, c.clip = 0.25f, c.alpha = 0, c.beta = 0,
    c.wdecay = 0;
  } else if (name == "small-softmax" || name == "small-sigsoftmax") {
    small();
    m.nhidlast = 200;  // last layer = E (tied)
    m.head = name == "small-softmax" ? HeadKind::Softmax : HeadKind::Sigsoftmax;
  } else if (name == "small-mos" || name == "small-mosig") {
    small();
    m.nhidlast = 400, m.n_experts = 5, m.dropoutl = 0.4f;
    m.head = name == "small-mos" ? HeadKind::MoS : HeadKind::MoSig;
  } else if (name == "mos-paper") {
    // Yang et al. 2017, PTB: E=280, LSTM [960, 960, 620], K=15, B=12, T=70.
    m.emsize = 280, m.nhid = 960, m.nhidlast = 620, m.nlayers = 3, m.n_experts = 15, m.tied = true;
    m.head = HeadKind::MoS;
    m.dropouti = 0.4f, m.dropouth = 0.225f, m.dropoutl = 0.29f, m.dropout = 0.4f, m.dropoute = 0.1f,
    m.wdrop = 0.5f;
    c.batch_size = 12, c.bptt = 70, c.lr = 20, c.clip = 0.25f, c.alpha = 2, c.beta = 1,
    c.wdecay = 1.2e-6f;
    c.epochs = 1000;
  } else if (name == "ptb-1h" || name == "ptb-3h") {
    // The speedrun presets (docs/speedrun.md): the best PTB model a budget of 2 threads buys on the
    // reference CPU (AMD Zen 5, AVX512_BF16), budgeted in epochs so that one command gives one
    // model. SGD, then ASGD from --asgd_epoch on (the averaging a finetune would add, inside the
    // budget), with a lighter regularisation than AWD-LSTM's for a model trained tens of epochs.
    small();
    m.head = HeadKind::MoS, m.n_experts = 5, m.emsize = 96, m.nhid = 384, m.nhidlast = 384;
    m.dropout = 0.3f, m.dropouth = 0.2f, m.dropouti = 0.1f, m.dropoute = 0.05f, m.wdrop = 0.3f,
    m.dropoutl = 0.2f;
    c.epochs = 34, c.asgd_epoch = 21;
    if (name == "ptb-3h") c.epochs = 100, c.asgd_epoch = 60;
    // bf16 GEMM operands where they are faster (Zen 4/5: 1.3-1.7x, perplexity within the seed
    // spread, bench/RESULTS.md); fp32 elsewhere, the same recipe with other rounding.
    c.paths.precision = gemm_bf16_faster_than_fp32() ? "bf16" : "fp32";
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown preset '" + name + "': choose one of " + known);
  }
  return c;
}

}  // namespace mg
