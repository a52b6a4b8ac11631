// What a training run refuses (lm/run_checks.h).
#include "lm/run_checks.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "io/regular_file.h"
#include "mpi/processes.h"

namespace mg {

double diverged_loss(int64_t V) {
  return std::max(20.0, 4.0 * std::log(static_cast<double>(V)));
}

std::string diverged_message(const std::string& what, double value, int64_t step, int64_t V,
                             const std::string& state_path) {
  const bool norm = what == "gradient norm";  // checked before the update; a loss after it
  return "training diverged: the " + what + " is " + std::to_string(value) +
         (norm ? "" : " nats per word") + " at step " + std::to_string(step) +
         (norm ? "; the weights were not updated"
               : " (guessing uniformly scores ln V = " +
                     std::to_string(std::log(static_cast<double>(V))) + ")") +
         "; nothing was saved, and " + state_path +
         " (if any) holds the last good state (lower --lr" + (norm ? " or --clip?)" : "?)");
}

void check_run_inputs(const TrainConfig& cfg, bool finetune, const std::string& state_path,
                      const Corpus& corpus) {
  if (std::filesystem::exists(cfg.save) && !std::filesystem::is_directory(cfg.save))
    throw std::invalid_argument("--save " + cfg.save +
                                " is a file, not a directory; choose another --save");
  // A training run stopped between its first best.ckpt and its first checkpoint has a model but
  // nothing to resume: a new run there is refused too (below), so say what works.
  if (cfg.resume && !std::filesystem::exists(state_path))
    throw std::invalid_argument(
        "--resume: there is no " + state_path + " to continue from" +
        (finetune ? " (start finetuning without --resume)"
         : std::filesystem::exists(cfg.save + "/best.ckpt")
             ? " (a run stopped before its first checkpoint left " + cfg.save +
                   "/best.ckpt: move it away and start a new run without --resume, or choose "
                   "another --save)"
             : std::string(" (start a new run without --resume)")));
  // Checked here, before the run directory is made: a failed finetune leaves no folder behind.
  if (finetune && !std::filesystem::exists(cfg.save + "/best.ckpt"))
    throw std::invalid_argument("finetune: there is no " + cfg.save +
                                "/best.ckpt to finetune; finetune continues a trained run: train "
                                "it first (mosgrad train --save " +
                                cfg.save + ")");
  if (!cfg.resume && std::filesystem::exists(state_path))
    throw std::invalid_argument(
        "--save " + cfg.save + " already holds a " + (finetune ? "finetune" : "run") + " (" +
        state_path + (finetune ? ", under way or finished; best.ckpt holds its best model" : "") +
        "): continue it with --resume, or " +
        (finetune ? "move " + state_path + " away to finetune " + cfg.save + "/best.ckpt again"
                  : std::string("choose another --save")));
  if (!cfg.resume && !finetune &&
      std::filesystem::exists(cfg.save + "/best.ckpt"))  // a run stopped before
    throw std::invalid_argument(
        "--save " + cfg.save + " already holds a model (" + cfg.save + "/best.ckpt) but no " +
        state_path +
        " to resume: choose another --save, or move that best.ckpt away to start over");
  // --grad-groups: whole groups of columns per step, whole groups per process
  // (lm/column_groups.h). Validation needs none: it runs in the same groups when G divides its
  // batch, else whole (validation_groups).
  const int64_t G = cfg.grad_groups, N = process_count();
  if (cfg.batch_size % G != 0)
    throw std::invalid_argument("--batch_size " + std::to_string(cfg.batch_size) +
                                " is not divisible into --grad-groups " + std::to_string(G) +
                                " column groups (G must divide the batch size)");
  if (G % N != 0)
    throw std::invalid_argument("--grad-groups " + std::to_string(G) + " cannot be shared by " +
                                std::to_string(N) +
                                " processes (mpirun -np): the number of processes must divide G");
  if (N > 1 && cfg.device == Device::CUDA)
    throw std::invalid_argument("--device cuda cannot train under mpirun -np " + std::to_string(N) +
                                " yet (no NCCL exchange): use --device cpu, or one process");
  if (cfg.test_at_end)  // the test score at the end, refused now rather than after the training
    require_eval_targets(static_cast<int64_t>(corpus.test.size()), cfg.test_batch_size,
                         "the test split of " + corpus.dir + " (--test-at-end false skips it)");
}

void check_run_files(const std::vector<std::string>& paths) {
  for (const std::string& f : paths) {
    if (std::filesystem::is_symlink(f))
      throw std::invalid_argument(f + " is a symlink; mosgrad never writes through one: remove it");
    refuse_special_file(f, "run file", true);
  }
}

}  // namespace mg
