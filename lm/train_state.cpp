// The training state in a checkpoint: save_state writes everything that changes while training,
// restore_state reads it back, so a resumed run continues bit for bit (lm/train_state.h).
#include "lm/train_state.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "io/checkpoint.h"
#include "lm/model_io.h"

namespace mg {

namespace {

// ---- The fields of a state file, each checked: a crafted or damaged file (with a valid CRC) must
// give an error that names the file and the field, never a bare "stoll" or a wrong culprit ----

[[noreturn]] void bad_field(const std::string& file, const std::string& field,
                            const std::string& value, const std::string& expected) {
  throw std::runtime_error("state file " + file + ": field '" + field + "' is '" +
                           value.substr(0, 40) + (value.size() > 40 ? "..." : "") + "', expected " +
                           expected);
}

// An integer in [lo, hi], the whole string (no sign games, no trailing text).
// The field's text without the spaces around it (numbers are written with a separator after them).
std::string trimmed(const Checkpoint& ck, const std::string& field) {
  const std::string& v = ck.string(field);
  const size_t a = v.find_first_not_of(" \t\n"), b = v.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}

int64_t int_field(const Checkpoint& ck, const std::string& field, int64_t lo, int64_t hi) {
  const std::string v = trimmed(ck, field);
  const std::string expected =
      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    bad_field(ck.path, field, v, expected);
  }
  if (used != v.size() || x < lo || x > hi) bad_field(ck.path, field, v, expected);
  return x;
}

// A number: finite, or also +inf where `inf_ok` (best_val before the first validation).
double double_field(const Checkpoint& ck, const std::string& field, bool inf_ok = false) {
  const std::string v = trimmed(ck, field);
  const std::string expected = inf_ok ? "a number (or inf)" : "a finite number";
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    bad_field(ck.path, field, v, expected);
  }
  if (used != v.size() || std::isnan(x) || (std::isinf(x) && !(inf_ok && x > 0)))
    bad_field(ck.path, field, v, expected);
  return x;
}

std::vector<double> doubles_field(const Checkpoint& ck, const std::string& field) {
  const std::string& v = ck.string(field);
  std::istringstream in(v);
  std::vector<double> out;
  for (std::string word; in >> word;) {
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(word, &used);
    } catch (const std::exception&) {
      bad_field(ck.path, field, v, "finite numbers separated by spaces");
    }
    if (used != word.size() || !std::isfinite(x))
      bad_field(ck.path, field, v, "finite numbers separated by spaces");
    out.push_back(x);
  }
  return out;
}

// "<seed> <offset>", both unsigned 64-bit.
void restore_generator(Generator& gen, const Checkpoint& ck, const std::string& field) {
  const std::string& v = ck.string(field);
  std::istringstream in(v);
  std::string a, b, extra;
  in >> a >> b;
  const auto parse = [&](const std::string& w) {
    if (w.empty() || w.find_first_not_of("0123456789") != std::string::npos)
      bad_field(ck.path, field, v, "two unsigned integers, the seed and the offset");
    try {
      return static_cast<uint64_t>(std::stoull(w));
    } catch (const std::exception&) {
      bad_field(ck.path, field, v, "two unsigned integers, the seed and the offset");
    }
  };
  if (in >> extra) bad_field(ck.path, field, v, "two unsigned integers, the seed and the offset");
  gen.seed = parse(a), gen.offset = parse(b);
}

// A resumed run continues the run in the checkpoint, so the flags that define that run must not
// change on the way: the model, the optimizer (a changed --optimizer used to be silently ignored),
// the batch size (the carried hidden state is [B,H]) and the training data. Others (--lr, --clip,
// --epochs, the limits) may change.
void check_resume_flags(const Checkpoint& ck, const TrainConfig& cfg,
                        const std::string& state_path) {
  for (const auto& [key, value] : cfg.to_map()) {
    const bool model_key = key.rfind("model.", 0) == 0;
    if (model_key && !cfg.model.reads(key.substr(6))) continue;  // e.g. K of a softmax head
    const bool defines_run = (model_key && key != "model.ntoken") || key == "optimizer" ||
                             key == "batch_size" || key == "max_train_tokens";
    if (!defines_run || !ck.has_string(key) || ck.string(key) == value) continue;
    const std::string flag = "--" + (key.rfind("model.", 0) == 0 ? key.substr(6) : key);
    throw std::invalid_argument("--resume: the run in " + state_path + " was made with " + flag +
                                " " + ck.string(key) + "; it cannot continue with " + flag + " " +
                                value + " (give " + flag + " " + ck.string(key) +
                                ", as the run was made, or start a new run with another --save)");
  }
}

}  // namespace

std::string join_doubles(const std::vector<double>& v) {
  std::ostringstream os;
  os.precision(17);
  for (double x : v) os << x << ' ';
  return os.str();
}

void save_state(const std::string& path, const TrainConfig& cfg, const RNNModel& model,
                const Progress& progress, const Vocab& vocab, const std::string& corpus_id) {
  const Optimizer& opt = *progress.opt;
  const TrainState& st = progress.st;
  const Hidden& hidden = progress.hidden;
  const Generator& bptt_gen = progress.bptt_gen;
  NamedTensors tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : opt.state()) tensors.emplace_back("optim." + name, t);
  for (size_t l = 0; l < hidden.size(); ++l) {
    tensors.emplace_back("hidden." + std::to_string(l) + ".h", hidden[l].h);
    tensors.emplace_back("hidden." + std::to_string(l) + ".c", hidden[l].c);
  }
  std::map<std::string, std::string> s = cfg.to_map();
  for (const auto& [k, v] : model.config.to_map())
    s["model." + k] = v;  // the model's, e.g. the corpus's ntoken
  s["kind"] = "train-state";
  s["epoch"] = std::to_string(st.epoch), s["batch_pos"] = std::to_string(st.batch_pos);
  s["step"] = std::to_string(st.step), s["tokens"] = std::to_string(st.tokens);
  s["elapsed_s"] = join_doubles({st.elapsed_s}),
  s["epoch_loss_sum"] = join_doubles({st.epoch_loss_sum});
  s["epoch_loss_count"] = std::to_string(st.epoch_loss_count);
  s["interval_loss_sum"] = join_doubles({st.interval.loss}),
  s["interval_grad_norm_sum"] = join_doubles({st.interval.grad_norm});
  s["interval_steps"] = std::to_string(st.interval.steps);
  s["best_val"] = join_doubles({st.best_val}), s["val_history"] = join_doubles(st.val_history);
  s["optimizer_kind"] = optimizer_kind_name(st.optimizer),
  s["optimizer_steps"] = std::to_string(opt.steps());
  s["dropout_gen"] =
      std::to_string(model.dropout_gen.seed) + " " + std::to_string(model.dropout_gen.offset);
  s["bptt_gen"] = std::to_string(bptt_gen.seed) + " " + std::to_string(bptt_gen.offset);
  std::string words;
  for (const std::string& w : vocab.words()) words += w + "\n";
  s["vocab"] = words;
  if (!corpus_id.empty()) s["corpus"] = corpus_id;
  save_checkpoint(path, tensors, s);
}

// The mirror of save_state: every piece of state back from state_path, so the losses continue
// exactly. The optimizer is rebuilt as the checkpoint's kind (SGD may have become ASGD).
void restore_state(const std::string& state_path, const TrainConfig& cfg, const Corpus& corpus,
                   RNNModel& model, Progress& progress) {
  Checkpoint ck;
  try {
    ck = load_checkpoint(state_path);
  } catch (const std::runtime_error& e) {
    // Damaged, truncated, not a checkpoint: --resume cannot go on, and a run without it refuses a
    // folder that holds a state, so say what does work.
    const bool finetune_state =
        state_path.size() >= 13 &&
        state_path.compare(state_path.size() - 13, 13, "finetune.ckpt") == 0;
    throw std::runtime_error(
        std::string(e.what()) + ". The run cannot continue from it: " +
        (finetune_state ? "move it away to finetune " + cfg.save + "/best.ckpt again"
                        : "start again with another --save (" + cfg.save +
                              "/best.ckpt still holds the best model saved), or move it and "
                              "best.ckpt away to start over in " +
                              cfg.save));
  }
  restore_state(ck, cfg, corpus, model, progress);
}

void restore_state(const Checkpoint& ck, const TrainConfig& cfg, const Corpus& corpus,
                   RNNModel& model, Progress& progress) {
  std::unique_ptr<Optimizer>& opt = progress.opt;
  TrainState& st = progress.st;
  Hidden& hidden = progress.hidden;
  const std::string& state_path = ck.path;
  check_resume_flags(ck, cfg, state_path);
  Vocab trained;
  std::istringstream words(ck.string("vocab"));
  for (std::string w; std::getline(words, w);) trained.add(w);
  check_same_vocab(corpus.vocab, trained, state_path);
  // The same words in another text (another $MOSGRAD_DATA, an edited train file): every batch
  // would differ from the stopped run's, and the resume would not continue it.
  if (ck.has_string("corpus") && ck.string("corpus") != corpus_fingerprint(corpus))
    throw std::invalid_argument("--resume: the run in " + state_path + " trains on " +
                                ck.string("corpus") + ", and the corpus in " + corpus.dir + " is " +
                                corpus_fingerprint(corpus) +
                                ": resume it with the corpus it was made with, or start a new run "
                                "with another --save");
  load_parameters(model, ck.tensors, "model.", state_path);
  constexpr int64_t kBig = int64_t{1} << 62;
  st.epoch = int_field(ck, "epoch", 1, kBig), st.batch_pos = int_field(ck, "batch_pos", 0, kBig);
  st.step = int_field(ck, "step", 0, kBig), st.tokens = int_field(ck, "tokens", 0, kBig);
  st.elapsed_s = double_field(ck, "elapsed_s");
  st.epoch_loss_sum = double_field(ck, "epoch_loss_sum");
  st.epoch_loss_count = int_field(ck, "epoch_loss_count", 0, kBig);
  if (ck.has_string("interval_steps"))  // a checkpoint written before these fields: none under way
    st.interval = {double_field(ck, "interval_loss_sum"),
                   double_field(ck, "interval_grad_norm_sum"),
                   int_field(ck, "interval_steps", 0, kBig)};
  st.best_val = double_field(ck, "best_val", true);
  st.val_history = doubles_field(ck, "val_history");
  try {
    st.optimizer = parse_optimizer_kind(ck.string("optimizer_kind"));
  } catch (const std::invalid_argument&) {
    bad_field(ck.path, "optimizer_kind", ck.string("optimizer_kind"), "sgd, asgd or adam");
  }
  opt = std::make_unique<Optimizer>(st.optimizer, model.named_parameters(), cfg.wdecay);
  NamedTensors optim_state;
  for (const auto& [name, t] : ck.tensors)
    if (name.rfind("optim.", 0) == 0) optim_state.emplace_back(name.substr(6), t);
  opt->load_state(optim_state, int_field(ck, "optimizer_steps", 0, kBig));
  restore_generator(model.dropout_gen, ck, "dropout_gen");
  restore_generator(progress.bptt_gen, ck, "bptt_gen");
  // The carried hidden state must be this model's at this batch size: a wrong shape is the file's
  // fault, said here, not an LSTM error at the first step.
  for (size_t l = 0; l < hidden.size(); ++l)
    for (const char* part : {"h", "c"}) {
      const std::string name = "hidden." + std::to_string(l) + "." + part;
      const Tensor& saved = ck.tensor(name);
      const Tensor& want = part[0] == 'h' ? hidden[l].h : hidden[l].c;
      if (saved.shape() != want.shape())
        bad_field(ck.path, name, "a tensor of shape " + shape_str(saved.shape()),
                  shape_str(want.shape()) + " (this model's layer " + std::to_string(l) +
                      " at --batch_size " + std::to_string(cfg.batch_size) + ")");
      const Tensor values = copy_contiguous(saved);
      const float* d = values.data();
      for (int64_t i = 0; i < values.numel(); ++i)
        if (!std::isfinite(d[i]))
          bad_field(ck.path, name, "a tensor with NaN or infinite entries", "finite values");
      (part[0] == 'h' ? hidden[l].h : hidden[l].c) = values.to(cfg.device);
    }
}

}  // namespace mg
