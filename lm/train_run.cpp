// The steps around train_lm's loop that act on the run (lm/train_run.h says what each does).
#include "lm/train_run.h"

#include <filesystem>
#include <stdexcept>

#include "cuda/backend.h"
#include "io/strf.h"
#include "lm/column_groups.h"
#include "lm/evaluate.h"
#include "lm/recipe_rules.h"
#include "lm/run_checks.h"
#include "mpi/processes.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"

namespace mg {

namespace {
// A split's first `max_tokens` (all when <= 0) in B columns. Each column needs an input and a
// target, 2 tokens at least; fewer is refused naming the flags that chose the sizes (a validation
// with no targets would score ppl 1 and be "best" forever).
Batched batched_split(const std::vector<int64_t>& ids, int64_t max_tokens, int64_t B,
                      const std::string& split, const std::string& dir,
                      const std::string& batch_flag, const std::string& tokens_flag) {
  const bool cut = max_tokens > 0 && max_tokens < static_cast<int64_t>(ids.size());
  const int64_t n = cut ? max_tokens : static_cast<int64_t>(ids.size());
  if (B < 1 || n < 2 * B)
    throw std::invalid_argument(
        "the " + split + " split of " + dir + " has " + std::to_string(n) + " tokens" +
        (cut ? " (its first " + tokens_flag + " " + std::to_string(max_tokens) + ")" : "") +
        ", too few for " + batch_flag + " " + std::to_string(B) + ": each of the " +
        std::to_string(B) + " columns needs at least 2 tokens (lower " + batch_flag +
        (cut ? " or raise " + tokens_flag : "") + ")");
  return batchify(cut ? std::vector<int64_t>(ids.begin(), ids.begin() + n) : ids, B);
}
}  // namespace

Run::Run(const TrainConfig& c, const Corpus& data, bool fine,
         std::function<void(const std::string&)> display)
    : cfg(c),
      corpus(data),
      finetune(fine),
      files(c, fine),
      writes_files(process_rank() == 0),  // under mpirun only rank 0 writes (and locks)
      train_data(batched_split(data.train, c.max_train_tokens, c.batch_size, "training", data.dir,
                               "--batch_size", "--max_train_tokens")),
      val_data(batched_split(data.valid, c.max_eval_tokens, c.eval_batch_size, "validation",
                             data.dir, "--eval_batch_size", "--max_eval_tokens")),
      say(std::move(display)) {
  bptt_gen = Generator(c.seed * 2654435761u + 17);
}

double validation_loss(const Run& r, RNNModel& model) {
  return evaluate(model, r.val_data, r.cfg.bptt,
                  validation_groups(r.cfg.grad_groups, r.cfg.eval_batch_size))
      .loss;
}

// Validation of the weights reached (ASGD's averaged ones). st.best_val follows this run's best;
// the weights replace best.ckpt only when they beat the file. Returns the loss and whether
// best.ckpt now holds as good a model (saved now, or equal to it: an epoch replayed after a crash
// that came between saving best.ckpt and the state).
std::pair<double, bool> validate_and_keep_best(Run& r) {
  Optimizer& opt = *r.opt;
  TrainState& st = r.st;
  BestModelFile& best = r.best;
  const Vocab& vocab = r.corpus.vocab;
  const std::string& state_path = r.files.state;
  opt.swap_in_average();
  const double val_loss = validation_loss(r, *r.model);
  if (!(val_loss <= diverged_loss(vocab.size())))
    throw std::runtime_error(
        diverged_message("validation loss", val_loss, st.step, vocab.size(), state_path));
  if (val_loss < st.best_val) st.best_val = val_loss;
  const bool keep = val_loss < best.loss;
  if (keep) {
    if (r.writes_files)
      save_model(best.path, *r.model, vocab,
                 {{"val_loss", join_doubles({val_loss})}, {"epoch", std::to_string(st.epoch)}});
    best.loss = val_loss;
  } else if (val_loss <= st.best_val && best.loss < val_loss) {
    r.say("valid ppl " + std::to_string(std::exp(val_loss)) + " is this run's best, but " +
          best.path + " holds a better model (ppl " + std::to_string(std::exp(best.loss)) +
          "): kept that one");
  }
  opt.swap_out_average();
  return {val_loss, val_loss <= best.loss};
}

// A saved model loaded to compute as this run's model does: the same paths (--fused-lstm,
// --fused-head: not saved with a model; the GEMM's are the run's ComputePathsScope's) and device.
namespace {
LoadedModel load_model_for_run(const std::string& path, const Run& r) {
  LoadedModel m = load_model(path);
  m.model->paths = r.model->paths;
  m.model->to(r.cfg.device);
  return m;
}
}  // namespace

BestModelFile best_model_file(const Run& r) {
  const TrainConfig& cfg = r.cfg;
  const RunFiles& files = r.files;
  const TrainState& st = r.st;
  BestModelFile best{files.best, INFINITY};
  if (!std::filesystem::exists(files.best)) return best;
  if (!cfg.resume) return best.loss = st.best_val, best;
  const LoadedModel on_disk = load_model_for_run(files.best, r);
  check_same_vocab(r.corpus.vocab, on_disk.vocab, files.best);
  const double loss = validation_loss(r, *on_disk.model);
  best.loss = std::isnan(loss) ? INFINITY : loss;
  if (best.loss < st.best_val)  // st.best_val is infinite when the state holds no validation
    r.say(files.best + " holds a model of valid ppl " + std::to_string(std::exp(best.loss)) +
          (std::isinf(st.best_val) ? "" : ", better than this run's best") +
          ": only a better one replaces it");
  return best;
}

namespace {

// The flags that shape the model: its head and sizes. The dropouts may differ between training and
// finetuning: they shape the steps, not the weights a checkpoint holds.
void check_same_architecture(const ModelConfig& trained, const ModelConfig& flags,
                             const std::string& file) {
  const std::map<std::string, std::string> have = trained.to_map(), want = flags.to_map();
  for (const char* key : {"head", "emsize", "nhid", "nhidlast", "nlayers", "n_experts", "tied"})
    if (flags.reads(key) && have.at(key) != want.at(key))
      throw std::invalid_argument("finetune: " + file + " holds a model made with --" + key + " " +
                                  have.at(key) + "; the flags say --" + key + " " + want.at(key) +
                                  " (finetune with the flags it was trained with)");
}

// The dropouts may differ (above), but not unseen: the flags that differ from the trained model's,
// one "--key value (trained with V)" each, "" when none does.
std::string changed_dropouts(const ModelConfig& trained, const ModelConfig& flags) {
  const std::map<std::string, std::string> have = trained.to_map(), want = flags.to_map();
  std::string changed;
  for (const char* key : {"dropout", "dropouth", "dropouti", "dropoute", "dropoutl", "wdrop"}) {
    if (!flags.reads(key) || have.at(key) == want.at(key)) continue;
    changed += std::string(changed.empty() ? "" : ", ") + "--" + key + " " +
               strf("%g", std::stod(want.at(key))) + " (trained with " +
               strf("%g", std::stod(have.at(key))) + ")";
  }
  return changed;
}

}  // namespace

void start_state(Run& r, RNNModel& model) {
  const TrainConfig& cfg = r.cfg;
  const RunFiles& files = r.files;
  TrainState& st = r.st;
  r.model = &model;
  r.hidden = model.init_hidden(cfg.batch_size);
  std::string dropouts_changed;
  if (r.finetune) {
    const Checkpoint ck = load_checkpoint(files.best);
    const LoadedModel trained = model_from_checkpoint(ck);
    // The model must be for this corpus's words in this order, and of the architecture the flags
    // build: finetuning another corpus's model would save it over best.ckpt with this vocabulary,
    // and another head's weights (softmax's and sigsoftmax's have the same shapes) would be
    // finetuned as this head and saved over the trained model.
    check_same_vocab(r.corpus.vocab, trained.vocab, files.best);
    check_same_architecture(trained.model->config, model.config, files.best);
    dropouts_changed = changed_dropouts(trained.model->config, model.config);
    load_parameters(model, ck.tensors, "model.", files.best);
    st.optimizer = OptimizerKind::ASGD;
  } else if (cfg.optimizer == "adam") {
    st.optimizer = OptimizerKind::Adam;
  }
  r.opt = std::make_unique<Optimizer>(st.optimizer, model.named_parameters(), cfg.wdecay);
  if (cfg.resume) {
    restore_state(files.state, cfg, r.corpus, model, r);
    r.say("resumed " + files.state + " at epoch " + std::to_string(st.epoch) + ", step " +
          std::to_string(st.step));
  } else if (r.finetune) {
    st.best_val = validation_loss(r, model);
    r.say("finetuning from " + files.best + " (valid ppl " + std::to_string(std::exp(st.best_val)) +
          ")");
    if (!dropouts_changed.empty())
      r.say("finetuning with other dropouts than " + files.best + " was trained with: " +
            dropouts_changed + "; the same flags as its training give the MoS recipe's finetune");
  }
  r.say(model.config.summary() + ", " + std::to_string(model.parameter_count()) + " parameters, " +
        (cfg.device == Device::CUDA
             ? "on " + cuda_device_description() + (cfg.tf32 ? " (TF32)" : "")
             : std::to_string(num_threads()) + " threads" +
                   (cfg.paths.precision != "bf16" ? ""
                    : gemm_bf16_faster_than_fp32()
                        ? ", bf16"
                        : ", bf16 (slower than fp32 on this CPU: its AVX512_BF16 multiplies at "
                          "about half the FP32 rate; see docs/performance.md)")));
}

void switch_to_asgd(Run& r, const std::string& why) {
  r.say("switching to ASGD (" + why + ")");
  r.st.optimizer = OptimizerKind::ASGD;
  r.opt = std::make_unique<Optimizer>(r.st.optimizer, r.model->named_parameters(), r.cfg.wdecay);
}

bool nt_asgd(Run& r, double val_loss) {
  TrainState& st = r.st;
  const bool worse = non_monotone(st.val_history, val_loss, r.cfg.nonmono);
  st.val_history.push_back(val_loss);
  if (worse && st.optimizer == OptimizerKind::SGD) {
    switch_to_asgd(r, "validation has not improved for " + std::to_string(r.cfg.nonmono) +
                          " epochs");
    return false;
  }
  if (worse && r.finetune) r.say("finetuning done: validation stopped improving");
  return worse && r.finetune;
}

double validate_at_stop(Run& r, MetricsWriter& metrics, double elapsed_s) {
  const auto [val_loss, improved] = validate_and_keep_best(r);
  EpochMetrics em = epoch_record(r.st, val_loss, improved, elapsed_s);
  em.at_stop = true;
  metrics.write(em);
  r.say("validation at the stop: loss " + std::to_string(val_loss) + ", ppl " +
        std::to_string(std::exp(val_loss)));
  return val_loss;
}

double test_best_model(const Run& r) {
  const LoadedModel best = load_model_for_run(r.files.best, r);
  const EvalResult test =
      evaluate(*best.model, batchify(r.corpus.test, r.cfg.test_batch_size), r.cfg.bptt);
  r.say("test loss " + std::to_string(test.loss) + ", test ppl " +
        std::to_string(test.perplexity()) + " (" + std::to_string(test.targets) + " targets)");
  return test.loss;
}

}  // namespace mg
