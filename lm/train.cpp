// The training loop, top to bottom: data -> model -> for each epoch, for each variable-length BPTT
// segment: forward, loss + AR + TAR, backward, clip, step -> validate -> NT-ASGD switch -> save.
// Follows AWD-LSTM's main.py (Merity et al. 2017) and MoS's main.py / finetune.py (Yang et al. 2017).
#include "lm/train.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "autograd/ops.h"
#include "cuda/backend.h"
#include "io/checkpoint.h"
#include "lm/batching.h"
#include "lm/evaluate.h"
#include "lm/learning_curves.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/optim.h"
#include "tensor/parallel.h"

namespace mg {

namespace {
volatile std::sig_atomic_t g_stop = 0;

std::vector<int64_t> head_of(const std::vector<int64_t>& ids, int64_t max_tokens) {
  if (max_tokens <= 0 || max_tokens >= static_cast<int64_t>(ids.size())) return ids;
  return std::vector<int64_t>(ids.begin(), ids.begin() + max_tokens);
}

std::string join(const std::vector<double>& v) {
  std::ostringstream os;
  os.precision(17);
  for (double x : v) os << x << ' ';
  return os.str();
}

std::vector<double> split_doubles(const std::string& s) {
  std::istringstream in(s);
  std::vector<double> v;
  double x;
  while (in >> x) v.push_back(x);
  return v;
}

// Everything that changes while training, so a resumed run continues exactly where it stopped.
struct TrainState {
  int64_t epoch = 1, batch_pos = 0, step = 0, tokens = 0;
  double elapsed_s = 0, epoch_loss_sum = 0;
  int64_t epoch_loss_count = 0;
  double best_val = std::numeric_limits<double>::infinity();
  std::vector<double> val_history;  // NT-ASGD looks back `nonmono` epochs
  OptimizerKind optimizer = OptimizerKind::SGD;
};

void save_state(const std::string& path, const TrainConfig& cfg, const RNNModel& model, const Optimizer& opt,
                const TrainState& st, const Hidden& hidden, const Generator& bptt_gen, const Vocab& vocab) {
  NamedTensors tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : opt.state()) tensors.emplace_back("optim." + name, t);
  for (size_t l = 0; l < hidden.size(); ++l) {
    tensors.emplace_back("hidden." + std::to_string(l) + ".h", hidden[l].h);
    tensors.emplace_back("hidden." + std::to_string(l) + ".c", hidden[l].c);
  }
  std::map<std::string, std::string> s = cfg.to_map();
  for (const auto& [k, v] : model.config.to_map()) s["model." + k] = v;  // the model's, e.g. the corpus's ntoken
  s["kind"] = "train-state";
  s["epoch"] = std::to_string(st.epoch), s["batch_pos"] = std::to_string(st.batch_pos);
  s["step"] = std::to_string(st.step), s["tokens"] = std::to_string(st.tokens);
  s["elapsed_s"] = join({st.elapsed_s}), s["epoch_loss_sum"] = join({st.epoch_loss_sum});
  s["epoch_loss_count"] = std::to_string(st.epoch_loss_count);
  s["best_val"] = join({st.best_val}), s["val_history"] = join(st.val_history);
  s["optimizer_kind"] = optimizer_kind_name(st.optimizer), s["optimizer_steps"] = std::to_string(opt.steps());
  s["dropout_gen"] = std::to_string(model.dropout_gen.seed) + " " + std::to_string(model.dropout_gen.offset);
  s["bptt_gen"] = std::to_string(bptt_gen.seed) + " " + std::to_string(bptt_gen.offset);
  std::string words;
  for (const std::string& w : vocab.words()) words += w + "\n";
  s["vocab"] = words;
  save_checkpoint(path, tensors, s);
}

void restore_generator(Generator& gen, const std::string& text) {
  std::istringstream in(text);
  in >> gen.seed >> gen.offset;
}

// The mirror of save_state: every piece of state back from state_path, so the losses continue
// exactly. The optimizer is rebuilt as the checkpoint's kind (SGD may have become ASGD).
void restore_state(const std::string& state_path, const TrainConfig& cfg, const Corpus& corpus, RNNModel& model,
                   std::unique_ptr<Optimizer>& opt, TrainState& st, Hidden& hidden, Generator& bptt_gen) {
  const Checkpoint ck = load_checkpoint(state_path);
  Vocab trained;
  std::istringstream words(ck.string("vocab"));
  for (std::string w; std::getline(words, w);) trained.add(w);
  check_same_vocab(corpus.vocab, trained, state_path);
  load_parameters(model, ck.tensors, "model.", state_path);
  st.epoch = std::stoll(ck.string("epoch")), st.batch_pos = std::stoll(ck.string("batch_pos"));
  st.step = std::stoll(ck.string("step")), st.tokens = std::stoll(ck.string("tokens"));
  st.elapsed_s = std::stod(ck.string("elapsed_s")), st.epoch_loss_sum = std::stod(ck.string("epoch_loss_sum"));
  st.epoch_loss_count = std::stoll(ck.string("epoch_loss_count"));
  st.best_val = std::stod(ck.string("best_val")), st.val_history = split_doubles(ck.string("val_history"));
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

// Never replace a user's run with a worse or half-made one: without --resume a directory that holds
// a run is refused; with it, there must be something to resume. And both splits must have targets
// (a validation with none would score ppl 1 and be "best" forever).
void check_run_inputs(const TrainConfig& cfg, bool finetune, const std::string& state_path, const Corpus& corpus,
                      const Batched& train_data, const Batched& val_data) {
  if (cfg.resume && !std::filesystem::exists(state_path))
    throw std::invalid_argument("--resume: there is no " + state_path + " to continue from" +
                                (finetune ? " (start finetuning without --resume)" : " (start a new run without --resume)"));
  if (!cfg.resume && !finetune && std::filesystem::exists(state_path))
    throw std::invalid_argument("--save " + cfg.save + " already holds a run (" + state_path +
                                "): continue it with --resume, or choose another --save");
  if (!cfg.resume && !finetune && std::filesystem::exists(cfg.save + "/best.ckpt"))  // a run stopped before
    throw std::invalid_argument("--save " + cfg.save + " already holds a model (" + cfg.save + "/best.ckpt) but no " +
                                state_path + " to resume: choose another --save, or move that best.ckpt away to start over");
  if (val_data.rows < 2)
    throw std::invalid_argument("the validation split of " + corpus.dir + " has no targets at --eval_batch_size " +
                                std::to_string(cfg.eval_batch_size) + " (" + std::to_string(corpus.valid.size()) +
                                " tokens); it needs at least 2 tokens per column");
  if (train_data.rows < 2)
    throw std::invalid_argument("the training split of " + corpus.dir + " is too short for --batch_size " +
                                std::to_string(cfg.batch_size));
}

// Validation of the weights reached (ASGD's averaged ones), kept as best_path when they beat
// st.best_val. Returns the loss and whether it improved.
std::pair<double, bool> validate_and_keep_best(RNNModel& model, Optimizer& opt, const Batched& val_data, int64_t bptt,
                                               TrainState& st, const std::string& best_path, const Vocab& vocab) {
  opt.swap_in_average();
  const double val_loss = evaluate(model, val_data, bptt).loss;
  const bool improved = val_loss < st.best_val;
  if (improved) {
    st.best_val = val_loss;
    save_model(best_path, model, vocab, {{"val_loss", join({val_loss})}, {"epoch", std::to_string(st.epoch)}});
  }
  opt.swap_out_average();
  return {val_loss, improved};
}

}  // namespace

Tensor regularised_loss(const ModelOutput& out, float alpha, float beta) {
  Tensor loss = out.loss;  // mean NLL
  if (alpha != 0) loss = add(loss, mul_scalar(mean(square(out.dropped_outputs.back())), alpha));
  const Tensor& raw = out.raw_outputs.back();  // [T,B,H]
  const int64_t T = raw.size(0);
  if (beta != 0 && T > 1) loss = add(loss, mul_scalar(mean(square(sub(narrow(raw, 0, 1, T - 1), narrow(raw, 0, 0, T - 1)))), beta));
  return loss;
}

void request_training_stop() { g_stop = 1; }
bool training_stop_requested() { return g_stop != 0; }
void clear_training_stop() { g_stop = 0; }

TrainResult train_lm(const TrainConfig& cfg, const Corpus& corpus, const TrainHooks& hooks, bool finetune) {
  using Clock = std::chrono::steady_clock;
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  const std::string state_path = cfg.save + (finetune ? "/finetune.ckpt" : "/checkpoint.ckpt");
  const std::string best_path = cfg.save + "/best.ckpt";
  auto say = [&](const std::string& line) { if (hooks.display) hooks.display->message(line); };

  // ---- data: B columns for training, eval_batch_size for validation, test_batch_size for test ----
  const Batched train_data = batchify(head_of(corpus.train, cfg.max_train_tokens), cfg.batch_size);
  const Batched val_data = batchify(head_of(corpus.valid, cfg.max_eval_tokens), cfg.eval_batch_size);
  check_run_inputs(cfg, finetune, state_path, corpus, train_data, val_data);
  const GemmPathScope gemm_path(gemm_path_for(cfg.gemm, cfg.device));  // --gemm, for this run only
  std::filesystem::create_directories(cfg.save);

  // ---- model and optimizer ----
  ModelConfig model_cfg = cfg.model;
  model_cfg.ntoken = corpus.vocab.size();
  if (cfg.device == Device::CUDA) require_cuda(), cuda_set_tf32(cfg.tf32);
  RNNModel model(model_cfg, cfg.seed);  // initialised on the CPU (the same weights on either device)...
  model.to(cfg.device);                 // ...then moved; everything below runs where the weights are
  Generator bptt_gen(cfg.seed * 2654435761u + 17);
  TrainState st;
  if (finetune) {
    // Second stage: start from the best model, averaged SGD from the first step.
    load_parameters(model, load_checkpoint(best_path).tensors, "model.", best_path);
    st.optimizer = OptimizerKind::ASGD;
  } else if (cfg.optimizer == "adam") {
    st.optimizer = OptimizerKind::Adam;
  }
  auto opt = std::make_unique<Optimizer>(st.optimizer, model.named_parameters(), cfg.wdecay);
  Hidden hidden = model.init_hidden(cfg.batch_size);

  // ---- resume: every piece of state back, so the losses continue exactly ----
  if (cfg.resume) {
    restore_state(state_path, cfg, corpus, model, opt, st, hidden, bptt_gen);
    say("resumed " + state_path + " at epoch " + std::to_string(st.epoch) + ", step " + std::to_string(st.step));
  } else if (finetune) {
    st.best_val = evaluate(model, val_data, cfg.bptt).loss;  // finetuning must beat the loaded model
    say("finetuning from " + best_path + " (valid ppl " + std::to_string(std::exp(st.best_val)) + ")");
  }
  say(model_cfg.summary() + ", " + std::to_string(model.parameter_count()) + " parameters, " +
      (cfg.device == Device::CUDA ? "on " + cuda_device_description() + (cfg.tf32 ? " (TF32)" : "")
                                  : std::to_string(num_threads()) + " threads"));

  // Finetuning keeps its own record: its step and token counts start again at zero.
  const std::string metrics_path = cfg.save + (finetune ? "/finetune_metrics.jsonl" : "/metrics.jsonl");
  const std::string curves_path = cfg.save + (finetune ? "/finetune_curves.svg" : "/curves.svg");
  if (cfg.resume) drop_records_after(metrics_path, st.step);  // records written after the checkpoint
  MetricsWriter metrics(metrics_path);
  TrainResult result;
  const auto run_start = Clock::now();
  const double elapsed_before = st.elapsed_s;
  auto elapsed = [&]() { return elapsed_before + std::chrono::duration<double>(Clock::now() - run_start).count(); };
  const std::vector<Tensor> params = model.parameters();

  for (; st.epoch <= cfg.epochs; ++st.epoch) {
    model.train();
    const auto epoch_start = Clock::now();
    double interval_loss = 0, interval_norm = 0;
    int64_t interval_steps = 0, interval_tokens = 0, batch_index = 0;
    auto interval_start = Clock::now();
    if (st.batch_pos == 0) hidden = model.init_hidden(cfg.batch_size);

    while (st.batch_pos < train_data.rows - 1) {
      // Variable-length BPTT; the learning rate follows the segment length (AWD-LSTM).
      const int64_t seq_len = cfg.variable_bptt ? bptt_length(cfg.bptt, bptt_gen, cfg.max_seq_len_delta) : cfg.bptt;
      const Batch batch = get_batch(train_data, st.batch_pos, seq_len);
      const float lr = cfg.lr * static_cast<float>(batch.seq_len) / static_cast<float>(cfg.bptt);

      // Truncated BPTT: gradients stop at the state carried in from the previous segment.
      hidden = detach_hidden(hidden);
      ModelOutput out = model.forward(batch.input, batch.seq_len, batch.batch, hidden, &batch.target);
      regularised_loss(out, cfg.alpha, cfg.beta).backward();
      const double norm = clip_grad_norm(params, cfg.clip);
      if (!std::isfinite(norm))  // the update would make the weights NaN: stop while they are still good
        throw std::runtime_error("training diverged: the gradient norm is " + std::to_string(norm) + " at step " +
                                 std::to_string(st.step + 1) + "; the weights were not updated, and " + state_path +
                                 " (if any) holds the last good state (lower --lr or --clip?)");
      opt->step(lr);
      opt->zero_grad();
      hidden = out.hidden;

      const double nll = out.loss.item();
      const int64_t n = batch.seq_len * batch.batch;
      st.batch_pos += batch.seq_len;
      ++st.step, ++batch_index;
      st.tokens += n;
      st.epoch_loss_sum += nll * n, st.epoch_loss_count += n;
      interval_loss += nll, interval_norm += norm, ++interval_steps, interval_tokens += n;
      if (hooks.on_step) hooks.on_step(st.step, nll);
      if (!std::isfinite(nll)) throw std::runtime_error("training diverged: loss is " + std::to_string(nll) +
                                                        " at step " + std::to_string(st.step) + " (lower --lr?)");

      if (st.step % cfg.log_interval == 0 || st.batch_pos >= train_data.rows - 1) {
        const double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
        IntervalMetrics m;
        m.epoch = st.epoch, m.step = st.step, m.batch = st.batch_pos / cfg.bptt;
        m.batches = (train_data.rows - 1) / cfg.bptt, m.tokens = st.tokens, m.loss = interval_loss / interval_steps;
        m.lr = cfg.lr, m.tokens_per_s = interval_tokens / std::max(secs, 1e-9), m.elapsed_s = elapsed();
        m.grad_norm = interval_norm / interval_steps;
        metrics.write(m);
        if (hooks.display) hooks.display->interval(m);
        interval_loss = interval_norm = 0, interval_steps = interval_tokens = 0, interval_start = Clock::now();
      }

      // Clean stops: save everything needed to continue, then return.
      std::string reason;
      if (training_stop_requested()) reason = "interrupted (Ctrl-C, SIGTERM or SIGHUP)";
      else if (cfg.max_steps > 0 && st.step >= cfg.max_steps) reason = "reached --max-steps " + std::to_string(cfg.max_steps);
      else if (cfg.max_minutes > 0 && elapsed() >= cfg.max_minutes * 60) reason = "reached --max-minutes";
      if (!reason.empty()) {
        st.elapsed_s = elapsed();
        save_state(state_path, cfg, model, *opt, st, hidden, bptt_gen, corpus.vocab);
        result.stopped = true, result.stop_reason = reason;
        if (!training_stop_requested()) {
          // A budget stop ("validation perplexity after 15 minutes"): score the weights reached so far.
          bool improved = false;
          std::tie(result.final_val_loss, improved) =
              validate_and_keep_best(model, *opt, val_data, cfg.bptt, st, best_path, corpus.vocab);
          EpochMetrics em;  // the record of this validation, so a short run's file is not empty
          em.epoch = st.epoch, em.step = st.step, em.tokens = st.tokens, em.val_loss = result.final_val_loss;
          em.train_loss = st.epoch_loss_count ? st.epoch_loss_sum / st.epoch_loss_count : 0;
          em.elapsed_s = elapsed(), em.optimizer = optimizer_kind_name(st.optimizer), em.best = improved;
          em.at_stop = true;
          metrics.write(em);
          say("validation at the stop: loss " + std::to_string(result.final_val_loss) + ", ppl " +
              std::to_string(std::exp(result.final_val_loss)));
        }
        result.steps = st.step, result.epochs_done = st.epoch - 1, result.best_val_loss = st.best_val;
        if (hooks.display) hooks.display->finish();
        say("stopped: " + reason + "; checkpoint saved to " + state_path + " (continue with --resume)");
        return result;
      }
    }

    // ---- end of epoch: validate (ASGD evaluates its averaged weights), keep the best model ----
    const auto [val_loss, improved] = validate_and_keep_best(model, *opt, val_data, cfg.bptt, st, best_path, corpus.vocab);

    EpochMetrics em;
    em.epoch = st.epoch, em.step = st.step, em.tokens = st.tokens;
    em.train_loss = st.epoch_loss_count ? st.epoch_loss_sum / st.epoch_loss_count : 0;
    em.val_loss = val_loss, em.elapsed_s = elapsed();
    em.epoch_s = std::chrono::duration<double>(Clock::now() - epoch_start).count();
    em.optimizer = optimizer_kind_name(st.optimizer), em.best = improved;
    metrics.write(em);
    if (hooks.display) hooks.display->epoch(em);

    // NT-ASGD (AWD-LSTM §3): switch SGD -> ASGD once validation is worse than the best of all epochs
    // but the last `nonmono`. When finetuning the same test ends the run.
    const size_t k = static_cast<size_t>(cfg.nonmono);
    const bool non_monotone = st.val_history.size() > k &&
        val_loss > *std::min_element(st.val_history.begin(), st.val_history.end() - k);
    st.val_history.push_back(val_loss);
    bool done = false;
    if (non_monotone && st.optimizer == OptimizerKind::SGD) {
      say("switching to ASGD (validation has not improved for " + std::to_string(cfg.nonmono) + " epochs)");
      st.optimizer = OptimizerKind::ASGD;
      opt = std::make_unique<Optimizer>(st.optimizer, model.named_parameters(), cfg.wdecay);
    } else if (non_monotone && finetune) {
      say("finetuning done: validation stopped improving");
      done = true;
    }
    st.batch_pos = 0, st.epoch_loss_sum = 0, st.epoch_loss_count = 0;
    st.elapsed_s = elapsed();
    Hidden fresh = model.init_hidden(cfg.batch_size);
    {  // the state to resume from starts the next epoch
      TrainState next = st;
      ++next.epoch;
      save_state(state_path, cfg, model, *opt, next, fresh, bptt_gen, corpus.vocab);
    }
    try {
      plot_learning_curves(metrics_path, curves_path, (cfg.preset.empty() ? model_cfg.summary() : cfg.preset) +
                                                          (finetune ? " (finetune)" : ""));
    } catch (const std::exception& e) {
      say(std::string("warning: could not draw the learning curves: ") + e.what());
    }
    result.epochs_done = st.epoch;
    if (done) break;
  }

  result.steps = st.step, result.best_val_loss = st.best_val;
  // ---- test: the best model, batch size 1 (the papers' convention) ----
  if (cfg.test_at_end && std::filesystem::exists(best_path)) {
    LoadedModel best = load_model(best_path);
    best.model->config.fused_lstm = cfg.model.fused_lstm, best.model->config.fused_head = cfg.model.fused_head;
    best.model->to(cfg.device);
    const EvalResult test = evaluate(*best.model, batchify(corpus.test, cfg.test_batch_size), cfg.bptt);
    result.test_loss = test.loss;
    say("test loss " + std::to_string(test.loss) + ", test ppl " + std::to_string(test.perplexity()) + " (" +
        std::to_string(test.targets) + " targets)");
  }
  return result;
}

}  // namespace mg
