// The training loop, top to bottom: data -> model -> for each epoch, for each variable-length BPTT
// segment: forward, loss + AR + TAR, backward, clip, step -> validate -> NT-ASGD switch -> save.
// Follows AWD-LSTM's main.py (Merity et al. 2017) and MoS's main.py / finetune.py (Yang et al.
// 2017). The run it advances and the steps around the loop (start, validation and the best model,
// NT-ASGD's switch, the test): lm/train_run.h.
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
#include "io/checkpoint.h"
#include "io/own_output.h"
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
#include "lm/recipe_rules.h"
#include "lm/run_checks.h"
#include "lm/run_record.h"
#include "lm/train_run.h"
#include "lm/train_state.h"
#include "lm/training_stop.h"
#include "mpi/processes.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"

namespace mg {

TrainResult train_lm(const TrainConfig& cfg, const Corpus& corpus, const TrainHooks& hooks,
                     bool finetune) {
  // --detect-anomaly: every op of this run (training, validation, test) is checked for NaN/Inf.
  std::optional<AnomalyGuard> anomaly;
  if (cfg.detect_anomaly) anomaly.emplace();

  // ---- data: B columns for training, eval_batch_size for validation; the run directory, locked
  // ----
  Run run(cfg, corpus, finetune, [&](const std::string& line) {
    if (hooks.display) hooks.display->message(line);
  });
  // The names the rest of train_lm reads.
  const Batched& train_data = run.train_data;
  const RunFiles& files = run.files;
  const bool writes_files = run.writes_files;
  const auto& say = run.say;
  const std::string corpus_id =
      corpus_fingerprint(corpus);  // saved with the state; --resume checks it
  // A folder another run holds is named as busy before its files are judged (they change under
  // it); decided by all processes together, so none of an MPI job goes on to judge them.
  const std::string holder = writes_files ? RunLock::holder(cfg.save) : "";
  if (any_process(!holder.empty()))
    throw RunLock::in_use(cfg.save,
                          holder.empty() ? "another run (the first process names it)" : holder);
  // A FIFO at best.ckpt is named as one, not taken for a model ("already holds a model").
  check_run_files({files.metrics, files.best, files.state, RunLock::file_in(cfg.save)});
  check_run_inputs(cfg, finetune, files.state, corpus);
  // A model the machine cannot hold is refused now, not killed by the kernel once allocated.
  if (cfg.device == Device::CPU) fit_training_memory(cfg, corpus.vocab.size());
  // --fused-lstm, --fused-head, --gemm, --precision, checked before any work (applied below),
  // and --device cuda in a build without CUDA: before the run directory is made.
  const ComputePaths paths = compute_paths(cfg.paths, cfg.device);
  if (cfg.device == Device::CUDA) require_cuda();
  // Under mpirun only rank 0 writes (and locks) the run directory; the others compute beside it.
  std::optional<RunLock> lock;
  if (writes_files) {
    require_writable_dir("--save", cfg.save);  // now, not at the first save an epoch later
    std::filesystem::create_directories(cfg.save);
    lock.emplace(cfg.save, std::string(finetune ? "mosgrad finetune" : "mosgrad train") +
                               " --save " + cfg.save);
  }

  // ---- model (initialised on the CPU, the same weights on either device, then moved), optimizer
  // ----
  ModelConfig model_cfg = cfg.model;
  model_cfg.ntoken = corpus.vocab.size();
  if (cfg.device == Device::CUDA) cuda_set_tf32(cfg.tf32);
  RNNModel model(model_cfg, cfg.seed);
  // The model's paths and the GEMM's, for this run only (the GEMM's are process-wide and restored
  // when the run ends).
  const ComputePathsScope compute(paths, &model);
  model.to(cfg.device);
  start_state(run, model);
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
      // A finetune's state, before its first epoch may replace best.ckpt: killed between a new
      // best.ckpt and its finetune.ckpt, it resumes from here, instead of a fresh finetune taking
      // that finetuned best.ckpt for the trained model it started from.
      if (finetune) save_state(files.state, cfg, model, run, corpus.vocab, corpus_id);
    }
  }
  MetricsWriter metrics(writes_files ? files.metrics : "");
  TrainResult result;
  const Stopwatch elapsed(st.elapsed_s);  // seconds of the run, resumed runs continuing the count
  const std::vector<Tensor> params = model.parameters();
  HealthProbe health(model.named_parameters());  // --log-stats, on the logged steps only

  // The learning curves, redrawn at each epoch's end, and by a resume that trains no epoch (a kill
  // after the last checkpoint but before its plot would otherwise leave that plot an epoch short).
  const auto redraw_curves = [&] {
    if (!writes_files) return;
    draw_curves(
        files,
        (cfg.preset.empty() ? model_cfg.summary() : cfg.preset) + (finetune ? " (finetune)" : ""),
        say);
  };

  // A resumed run may already be at its budget (--max-steps, --max-minutes): it takes no step
  // past it. Only the validation of that stop is made up, when a kill came before it was written.
  if (const std::string reason = agreed_stop_reason(cfg, st, elapsed());
      cfg.resume && !reason.empty() && reason != kInterruptedReason) {
    say("nothing to do: the run in " + files.state + " is at step " + std::to_string(st.step) +
        ", already at its budget (" + reason + "; raise it to train on)");
    if (any_process(writes_files && !stop_validated(files.metrics, st.step)))
      result.final_val_loss = validate_at_stop(run, metrics, elapsed());
    result.stopped = true, result.stop_reason = reason, result.steps = st.step;
    result.best_val_loss = run.best.loss, result.epochs_done = st.epoch - 1;
    redraw_curves();
    return result;
  }

  // A finetune ends when validation stops improving (nt_asgd), an end no flag records: a resume
  // of a finished finetune reads it from the validation history and trains no further epoch.
  const std::vector<double>& vh = st.val_history;
  const bool finished = finetune && cfg.resume && st.batch_pos == 0 && !vh.empty() &&
                        non_monotone({vh.begin(), vh.end() - 1}, vh.back(), cfg.nonmono);
  if (finished)
    say("nothing to do: the finetune in " + files.state + " finished after epoch " +
        std::to_string(st.epoch - 1) + " (validation stopped improving)");
  const int64_t first_epoch = st.epoch;
  result.epochs_done = st.epoch - 1;
  while (!finished && st.epoch <= cfg.epochs) {
    model.train();
    const auto epoch_start = TrainClock::now();
    LogInterval interval;
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
      interval.add(st, nll, norm, n);
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
      if (writes_files) save_state(files.state, cfg, model, run, corpus.vocab, corpus_id);
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

    // On to the next epoch, which starts from a zero LSTM state (as AWD-LSTM's main.py does); the
    // state saved is that start, so a run resumed from it continues exactly.
    result.epochs_done = st.epoch;
    st = next_epoch(st), st.elapsed_s = elapsed();
    hidden = model.init_hidden(cfg.batch_size);
    if (writes_files) save_state(files.state, cfg, model, run, corpus.vocab, corpus_id);
    redraw_curves();
    if (done) break;
  }
  if (st.epoch == first_epoch) redraw_curves();  // a resume of a finished run

  result.steps = st.step, result.best_val_loss = run.best.loss;  // what best.ckpt holds
  if (cfg.test_at_end && writes_files && std::filesystem::exists(files.best)) {
    const StopAtOnce at_once;  // from now a stop signal ends the program: every file is saved
    if (training_stop_requested()) {  // asked during the last epoch's validation or saves
      result.stop_reason = kInterruptedReason;
      say("stopped before the test: mosgrad eval --split test --model " + files.best +
          " scores it");
    } else {
      result.tested = true, result.test_loss = test_best_model(run);  // batch size 1: rank 0 alone
    }
  }
  return result;
}

}  // namespace mg
