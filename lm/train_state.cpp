// The training state in a checkpoint: save_state writes everything that changes while training,
// restore_state reads it back, so a resumed run continues bit for bit (lm/train_state.h).
#include "lm/train_state.h"

#include <sstream>

#include "io/checkpoint.h"
#include "lm/model_io.h"

namespace mg {

namespace {

std::vector<double> split_doubles(const std::string& s) {
  std::istringstream in(s);
  std::vector<double> v;
  double x;
  while (in >> x) v.push_back(x);
  return v;
}

void restore_generator(Generator& gen, const std::string& text) {
  std::istringstream in(text);
  in >> gen.seed >> gen.offset;
}

// A resumed run continues the run in the checkpoint, so the flags that define that run must not
// change on the way: the model, the optimizer (a changed --optimizer used to be silently ignored),
// the batch size (the carried hidden state is [B,H]) and the training data. Others (--lr, --clip,
// --epochs, the limits) may change.
void check_resume_flags(const Checkpoint& ck, const TrainConfig& cfg,
                        const std::string& state_path) {
  for (const auto& [key, value] : cfg.to_map()) {
    const bool defines_run = (key.rfind("model.", 0) == 0 && key != "model.ntoken") ||
                             key == "optimizer" || key == "batch_size" || key == "max_train_tokens";
    if (!defines_run || !ck.has_string(key) || ck.string(key) == value) continue;
    const std::string flag = "--" + (key.rfind("model.", 0) == 0 ? key.substr(6) : key);
    throw std::invalid_argument("--resume: the run in " + state_path + " was made with " + flag +
                                " " + ck.string(key) + "; it cannot continue with " + flag + " " +
                                value + " (drop the flag, or start a new run with another --save)");
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
                const Optimizer& opt, const TrainState& st, const Hidden& hidden,
                const Generator& bptt_gen, const Vocab& vocab) {
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
  s["best_val"] = join_doubles({st.best_val}), s["val_history"] = join_doubles(st.val_history);
  s["optimizer_kind"] = optimizer_kind_name(st.optimizer),
  s["optimizer_steps"] = std::to_string(opt.steps());
  s["dropout_gen"] =
      std::to_string(model.dropout_gen.seed) + " " + std::to_string(model.dropout_gen.offset);
  s["bptt_gen"] = std::to_string(bptt_gen.seed) + " " + std::to_string(bptt_gen.offset);
  std::string words;
  for (const std::string& w : vocab.words()) words += w + "\n";
  s["vocab"] = words;
  save_checkpoint(path, tensors, s);
}

// The mirror of save_state: every piece of state back from state_path, so the losses continue
// exactly. The optimizer is rebuilt as the checkpoint's kind (SGD may have become ASGD).
void restore_state(const std::string& state_path, const TrainConfig& cfg, const Corpus& corpus,
                   RNNModel& model, std::unique_ptr<Optimizer>& opt, TrainState& st, Hidden& hidden,
                   Generator& bptt_gen) {
  const Checkpoint ck = load_checkpoint(state_path);
  check_resume_flags(ck, cfg, state_path);
  Vocab trained;
  std::istringstream words(ck.string("vocab"));
  for (std::string w; std::getline(words, w);) trained.add(w);
  check_same_vocab(corpus.vocab, trained, state_path);
  load_parameters(model, ck.tensors, "model.", state_path);
  st.epoch = std::stoll(ck.string("epoch")), st.batch_pos = std::stoll(ck.string("batch_pos"));
  st.step = std::stoll(ck.string("step")), st.tokens = std::stoll(ck.string("tokens"));
  st.elapsed_s = std::stod(ck.string("elapsed_s")),
  st.epoch_loss_sum = std::stod(ck.string("epoch_loss_sum"));
  st.epoch_loss_count = std::stoll(ck.string("epoch_loss_count"));
  st.best_val = std::stod(ck.string("best_val")),
  st.val_history = split_doubles(ck.string("val_history"));
  st.optimizer = parse_optimizer_kind(ck.string("optimizer_kind"));
  opt = std::make_unique<Optimizer>(st.optimizer, model.named_parameters(), cfg.wdecay);
  NamedTensors optim_state;
  for (const auto& [name, t] : ck.tensors)
    if (name.rfind("optim.", 0) == 0) optim_state.emplace_back(name.substr(6), t);
  opt->load_state(optim_state, std::stoll(ck.string("optimizer_steps")));
  restore_generator(model.dropout_gen, ck.string("dropout_gen"));
  restore_generator(bptt_gen, ck.string("bptt_gen"));
  for (size_t l = 0; l < hidden.size(); ++l) {
    hidden[l].h = copy_contiguous(ck.tensor("hidden." + std::to_string(l) + ".h")).to(cfg.device);
    hidden[l].c = copy_contiguous(ck.tensor("hidden." + std::to_string(l) + ".c")).to(cfg.device);
  }
}

}  // namespace mg
