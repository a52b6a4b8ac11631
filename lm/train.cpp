// The training loop, top to bottom: data -> model -> for each epoch, for each variable-length BPTT
// segment: forward, loss + AR + TAR, backward, clip, step -> validate -> NT-ASGD switch -> save.
// Follows AWD-LSTM's main.py (Merity et al. 2017) and MoS's main.py / finetune.py (Yang et al.
// 2017).
#include "lm/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>
#include <tuple>

#include "autograd/anomaly.h"
#include "autograd/ops.h"
#include "cuda/backend.h"
#include "dist/processes.h"
#include "io/checkpoint.h"
#include "io/run_lock.h"
#include "lm/batching.h"
#include "lm/column_groups.h"
#include "lm/evaluate.h"
#include "lm/health_stats.h"
#include "lm/learning_curves.h"
#include "lm/memory_estimate.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/optim.h"
#include "lm/run_checks.h"
#include "lm/run_record.h"
#include "lm/train_state.h"
#include "lm/training_stop.h"
#include "tensor/gemm.h"
#include "tensor/not_implemented.h"
#include "tensor/parallel.h"

namespace mg {

namespace {
std::vector<int64_t> head_of(const std::vector<int64_t>& ids, int64_t max_tokens) {
  if (max_tokens <= 0 || max_tokens >= static_cast<int64_t>(ids.size())) return ids;
  return std::vector<int64_t>(ids.begin(), ids.begin() + max_tokens);
}

// best.ckpt and the validation loss of the model in it, measured as this run measures. The file is
// only ever replaced by a model better than the one it holds: when resuming, it may hold another
// run's model (a finetune's, better than this run's own record of its best), so it is scored once.
struct BestModelFile {
  std::string path;
  double loss = INFINITY;  // INFINITY: no file yet
};

// Everything one training run works on, so that the helpers below take the run instead of a dozen
// parameters each; train_lm's loop reads top to bottom over the same names. The inputs and the
// model are train_lm's; the state that the loop advances is the run's own.
struct Run {
  const TrainConfig& cfg;
  const Corpus& corpus;
  const bool finetune;
  const RunFiles& files;
  const bool writes_files;    // rank 0 (of mpirun's N; the only one without MPI) writes every file
  const Batched& train_data;  // B columns
  const Batched& val_data;    // eval_batch_size columns
  RNNModel& model;
  std::function<void(const std::string&)> say;  // a line for the display (none without one)
  std::unique_ptr<Optimizer> opt;  // SGD, ASGD after NT-ASGD's switch (or from a finetune's start)
  TrainState st;                   // where the run is: epoch, step, position, best validation
  Hidden hidden;                   // the LSTM state carried from one segment to the next
  Generator bptt_gen;              // variable BPTT's segment lengths
  BestModelFile best;              // best.ckpt and the loss of the model it holds

  Run(const TrainConfig& c, const Corpus& data, bool fine, const RunFiles& f, bool writes,
      const Batched& train, const Batched& val, RNNModel& m,
      std::function<void(const std::string&)> display)
      : cfg(c),
        corpus(data),
        finetune(fine),
        files(f),
        writes_files(writes),
        train_data(train),
        val_data(val),
        model(m),
        say(std::move(display)),
        hidden(m.init_hidden(c.batch_size)),
        bptt_gen(c.seed * 2654435761u + 17) {}
};

// A model's mean loss on the run's validation data, in the groups training runs in where they
// divide the validation batch (lm/column_groups.h): the same bits under mpirun as without.
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
  const double val_loss = validation_loss(r, r.model);
  if (!(val_loss <= diverged_loss(vocab.size())))
    throw std::runtime_error(
        diverged_message("validation loss", val_loss, st.step, vocab.size(), state_path));
  if (val_loss < st.best_val) st.best_val = val_loss;
  const bool keep = val_loss < best.loss;
  if (keep) {
    if (r.writes_files)
      save_model(best.path, r.model, vocab,
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
LoadedModel load_model_for_run(const std::string& path, const Run& r) {
  LoadedModel m = load_model(path);
  m.model->paths = r.model.paths;
  m.model->to(r.cfg.device);
  return m;
}

// The bar a run must beat to replace best.ckpt: none without the file; a fresh finetune's is the
// file's model scored at the start (st.best_val); a resumed run scores the file's model on its own
// validation data (vocabulary checked), which may differ from its record of its best: the file may
// hold a finetune's model, and --max_eval_tokens / --eval_batch_size may have changed.
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

// The optimizer and state the run starts from: fresh; the best model with ASGD from the first step
// (finetuning, which must then beat that model's validation); or everything from the checkpoint.
void start_state(Run& r) {
  const TrainConfig& cfg = r.cfg;
  const RunFiles& files = r.files;
  RNNModel& model = r.model;
  TrainState& st = r.st;
  if (r.finetune) {
    const Checkpoint ck = load_checkpoint(files.best);
    // The model must be for this corpus's words in this order: finetuning another corpus's model
    // would save it over best.ckpt with this vocabulary, scoring nonsense.
    check_same_vocab(r.corpus.vocab, model_from_checkpoint(ck).vocab, files.best);
    load_parameters(model, ck.tensors, "model.", files.best);
    st.optimizer = OptimizerKind::ASGD;
  } else if (cfg.optimizer == "adam") {
    st.optimizer = OptimizerKind::Adam;
  }
  r.opt = std::make_unique<Optimizer>(st.optimizer, model.named_parameters(), cfg.wdecay);
  if (cfg.resume) {
    restore_state(files.state, cfg, r.corpus, model, r.opt, st, r.hidden, r.bptt_gen);
    r.say("resumed " + files.state + " at epoch " + std::to_string(st.epoch) + ", step " +
          std::to_string(st.step));
  } else if (r.finetune) {
    st.best_val = validation_loss(r, model);
    r.say("finetuning from " + files.best + " (valid ppl " + std::to_string(std::exp(st.best_val)) +
          ")");
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
  r.opt = std::make_unique<Optimizer>(r.st.optimizer, r.model.named_parameters(), r.cfg.wdecay);
}

// NT-ASGD: switch SGD -> ASGD once the validation is non-monotone. When finetuning the same test
// ends the run: returns true then.
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

// A budget stop scores the weights reached ("validation perplexity after 15 minutes"), keeps them
// when best, and records that validation, so a short run's metrics file is not empty.
double validate_at_stop(Run& r, MetricsWriter& metrics, double elapsed_s) {
  const auto [val_loss, improved] = validate_and_keep_best(r);
  EpochMetrics em = epoch_record(r.st, val_loss, improved, elapsed_s);
  em.at_stop = true;
  metrics.write(em);
  r.say("validation at the stop: loss " + std::to_string(val_loss) + ", ppl " +
        std::to_string(std::exp(val_loss)));
  return val_loss;
}

// The papers' test figure: the best model on the test split with batch size 1.
double test_best_model(const Run& r) {
  const LoadedModel best = load_model_for_run(r.files.best, r);
  const EvalResult test =
      evaluate(*best.model, batchify(r.corpus.test, r.cfg.test_batch_size), r.cfg.bptt);
  r.say("test loss " + std::to_string(test.loss) + ", test ppl " +
        std::to_string(test.perplexity()) + " (" + std::to_string(test.targets) + " targets)");
  return test.loss;
}

}  // namespace

// NT-ASGD's test (AWD-LSTM §3): is val_loss worse than the best validation loss of all epochs
// before (`history`, oldest first) but the last `nonmono`? Never while there are at most nonmono.
bool non_monotone(const std::vector<double>& history, double val_loss, int64_t nonmono) {
  // TASK 7.2: worse than the best validation of all epochs but the last `nonmono` ones
  const size_t k = static_cast<size_t>(nonmono);
  return history.size() > k && val_loss > *std::min_element(history.begin(), history.end() - k);
  // END TASK 7.2
}

Tensor regularised_loss(const ModelOutput& out, float alpha, float beta) {
  // TASK 7.1: + alpha mean(dropped output²) (AR) + beta mean((raw h_t - raw h_{t-1})²) (TAR)
  Tensor loss = out.loss;  // mean NLL
  if (alpha != 0) loss = add(loss, mul_scalar(mean(square(out.dropped_outputs.back())), alpha));
  const Tensor& raw = out.raw_outputs.back();  // [T,B,H]
  const int64_t T = raw.size(0);
  if (beta != 0 && T > 1)
    loss = add(
        loss,
        mul_scalar(mean(square(sub(narrow(raw, 0, 1, T - 1), narrow(raw, 0, 0, T - 1)))), beta));
  return loss;
  // END TASK 7.1
}

TrainResult train_lm(const TrainConfig& cfg, const Corpus& corpus, const TrainHooks& hooks,
                     bool finetune) {
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  // --detect-anomaly: every op of this run (training, validation, test) is checked for NaN/Inf.
  std::optional<AnomalyGuard> anomaly;
  if (cfg.detect_anomaly) anomaly.emplace();
  const RunFiles files(cfg, finetune);
  const auto say = [&](const std::string& line) {
    if (hooks.display) hooks.display->message(line);
  };

  // ---- data: B columns for training, eval_batch_size for validation; the run directory, locked
  // ----
  const Batched train_data = batchify(head_of(corpus.train, cfg.max_train_tokens), cfg.batch_size);
  const Batched val_data =
      batchify(head_of(corpus.valid, cfg.max_eval_tokens), cfg.eval_batch_size);
  check_run_inputs(cfg, finetune, files.state, corpus, train_data, val_data);
  // A model the machine cannot hold is refused now, not killed by the kernel once allocated.
  if (cfg.device == Device::CPU) fit_training_memory(cfg, corpus.vocab.size());
  for (const std::string& f : {files.metrics, files.best, files.state})  // before any work
    if (std::filesystem::is_symlink(f))
      throw std::invalid_argument(f + " is a symlink; mosgrad never writes through one: remove it");
  // --fused-lstm, --fused-head, --gemm, --precision, checked before any work (applied below).
  const ComputePaths paths = compute_paths(cfg.paths, cfg.device);
  // Under mpirun only rank 0 writes (and locks) the run directory; the others compute beside it.
  const bool writes_files = process_rank() == 0;
  std::optional<RunLock> lock;
  if (writes_files) {
    std::filesystem::create_directories(cfg.save);
    lock.emplace(cfg.save, std::string(finetune ? "mosgrad finetune" : "mosgrad train") +
                               " --save " + cfg.save);
  }

  // ---- model (initialised on the CPU, the same weights on either device, then moved), optimizer
  // ----
  ModelConfig model_cfg = cfg.model;
  model_cfg.ntoken = corpus.vocab.size();
  if (cfg.device == Device::CUDA) require_cuda(), cuda_set_tf32(cfg.tf32);
  RNNModel model(model_cfg, cfg.seed);
  // The model's paths and the GEMM's, for this run only (the GEMM's are process-wide and restored
  // when the run ends).
  const ComputePathsScope compute(paths, &model);
  model.to(cfg.device);
  Run run(cfg, corpus, finetune, files, writes_files, train_data, val_data, model, say);
  start_state(run);
  run.best = best_model_file(run);
  // The names the loop below reads and advances.
  TrainState& st = run.st;
  Hidden& hidden = run.hidden;
  std::unique_ptr<Optimizer>& opt = run.opt;
  Generator& bptt_gen = run.bptt_gen;

  if (writes_files) {
    if (cfg.resume) {
      drop_records_after(files.metrics, st.step);  // records written after the checkpoint
    } else {  // one history per file: an earlier run's records (stopped before any checkpoint) go
      const std::string aside = set_aside_old_metrics(files.metrics);
      if (!aside.empty()) say(files.metrics + " held an earlier run's records: moved to " + aside);
    }
  }
  MetricsWriter metrics(writes_files ? files.metrics : "");
  TrainResult result;
  const Stopwatch elapsed(st.elapsed_s);  // seconds of the run, resumed runs continuing the count
  const std::vector<Tensor> params = model.parameters();
  HealthProbe health(model.named_parameters());  // --log-stats, on the logged steps only

  for (; st.epoch <= cfg.epochs; ++st.epoch) {
    model.train();
    const auto epoch_start = TrainClock::now();
    IntervalSums interval;
    if (st.batch_pos == 0) hidden = model.init_hidden(cfg.batch_size);
    // A budget's schedule (--asgd_epoch): average from this epoch on, as a finetune would.
    if (st.batch_pos == 0 && cfg.asgd_epoch > 0 && st.epoch >= cfg.asgd_epoch &&
        st.optimizer == OptimizerKind::SGD)
      switch_to_asgd(run, "--asgd_epoch " + std::to_string(cfg.asgd_epoch));

    while (st.batch_pos < train_data.rows - 1) {
      // Variable-length BPTT; the learning rate follows the length drawn, as in AWD-LSTM's main.py
      // (which scales before get_batch cuts the epoch's last segment short).
      const int64_t seq_len =
          cfg.variable_bptt ? bptt_length(cfg.bptt, bptt_gen, cfg.max_seq_len_delta) : cfg.bptt;
      const Batch batch = get_batch(train_data, st.batch_pos, seq_len);
      const float lr = cfg.lr * static_cast<float>(seq_len) / static_cast<float>(cfg.bptt);

      // Truncated BPTT: gradients stop at the state carried in from the previous segment.
      hidden = detach_hidden(hidden);
      const bool stats = cfg.log_stats && ((st.step + 1) % cfg.log_interval == 0 ||
                                           st.batch_pos + batch.seq_len >= train_data.rows - 1);
      // Forward, loss + AR + TAR, backward: of the whole batch, or of --grad-groups column groups
      // with their gradients summed in order (shared among the processes under mpirun).
      GroupedStep out = grouped_forward_backward(model, batch, hidden, cfg.grad_groups, cfg.alpha,
                                                 cfg.beta, stats);
      if (stats) health.before_step();
      const double norm = clip_grad_norm(params, cfg.clip);
      // An update by a non-finite gradient would make the weights NaN: stop while they are good.
      if (!std::isfinite(norm))
        throw std::runtime_error(
            diverged_message("gradient norm", norm, st.step + 1, model_cfg.ntoken, files.state));
      opt->step(lr);
      opt->zero_grad();
      hidden = out.hidden;

      const double nll = out.nll;
      const int64_t n = batch.seq_len * batch.batch;
      st.batch_pos += batch.seq_len, ++st.step, st.tokens += n;
      st.epoch_loss_sum += nll * n, st.epoch_loss_count += n;
      interval.add(nll, norm, n);
      if (hooks.on_step) hooks.on_step(st.step, nll);
      if (!(nll <= diverged_loss(model_cfg.ntoken)))
        throw std::runtime_error(
            diverged_message("training loss", nll, st.step, model_cfg.ntoken, files.state));
      if (st.step % cfg.log_interval == 0 || st.batch_pos >= train_data.rows - 1) {
        const IntervalMetrics m = interval.take(st, cfg, train_data.rows, elapsed());
        metrics.write(m);
        if (stats)
          metrics.write(
              health.after_step(out.first.raw_outputs, out.gates, st.epoch, st.step, st.tokens));
        if (hooks.display) hooks.display->interval(m);
      }

      // Clean stops: save everything needed to continue (then a budget stop validates), and return.
      const std::string reason = agreed_stop_reason(cfg, st, elapsed());
      if (reason.empty()) continue;
      st.elapsed_s = elapsed();
      if (writes_files)
        save_state(files.state, cfg, model, *opt, st, hidden, bptt_gen, corpus.vocab);
      result.stopped = true, result.stop_reason = reason, result.steps = st.step;
      if (reason != kInterruptedReason)  // a budget stop validates; an interrupted run ends now
        result.final_val_loss = validate_at_stop(run, metrics, elapsed());
      result.epochs_done = st.epoch - 1, result.best_val_loss = run.best.loss;
      if (hooks.display) hooks.display->finish();
      say("stopped: " + reason + "; checkpoint saved to " + files.state +
          " (continue with --resume)");
      return result;
    }

    // ---- end of epoch: validate (ASGD evaluates its averaged weights), keep the best model ----
    const auto [val_loss, improved] = validate_and_keep_best(run);
    EpochMetrics em = epoch_record(st, val_loss, improved, elapsed());
    em.epoch_s = std::chrono::duration<double>(TrainClock::now() - epoch_start).count();
    metrics.write(em);
    if (hooks.display) hooks.display->epoch(em);
    const bool done = nt_asgd(run, val_loss);

    // The state to resume from starts the next epoch.
    st.batch_pos = 0, st.epoch_loss_sum = 0, st.epoch_loss_count = 0, st.elapsed_s = elapsed();
    if (writes_files) {
      save_state(files.state, cfg, model, *opt, next_epoch(st), model.init_hidden(cfg.batch_size),
                 bptt_gen, corpus.vocab);
      draw_curves(
          files,
          (cfg.preset.empty() ? model_cfg.summary() : cfg.preset) + (finetune ? " (finetune)" : ""),
          say);
    }
    result.epochs_done = st.epoch;
    if (done) break;
  }

  result.steps = st.step, result.best_val_loss = run.best.loss;  // what best.ckpt holds
  if (cfg.test_at_end && writes_files && std::filesystem::exists(files.best))
    result.tested = true, result.test_loss = test_best_model(run);  // batch size 1: rank 0 alone
  return result;
}

}  // namespace mg
