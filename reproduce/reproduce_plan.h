// The comparison plans of `mosgrad reproduce` (reproduce/reproduce.h): which heads, which seeds, which
// model and recipe, which stages. Every head of a plan trains with the same flags (same d, same
// LSTM, same regularisation, same epochs); only the head (head_flags below) and --seed differ
// between its runs.
//
//   quick      a tiny model on a PTB slice, < 2 minutes: checks the pipeline and the files (a test
//              in `make test`), not the science
//   afternoon  the headline table in about 3 hours of 2 cores: E = d = 32 against V = 10,000,
//              where the bottleneck binds hard and a mixture head stays cheap; 3 seeds of softmax
//              and MoS, 1 of the others
//   day        the same recipe at d = 64, K = 5, 12 epochs (the afternoon plan's former size):
//              6-10 hours of 2 cores
//   paper      the `mos-paper` preset and the MoS paper's recipe: for a GPU or a long CPU run
//   ptb-1h,    the speedrun records (docs/speedrun.md): the budget preset of that name, trained,
//   ptb-3h     then dynamic evaluation and the cache pointer on its best model
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lm/dyneval.h"

namespace mg {

struct PlanRun {
  std::string head;  // softmax | sigsoftmax | moc | mos | mosig | mos-k1 (head_flags)
  uint64_t seed = 1;
  std::string name() const;  // "<head>-s<seed>": its directory under <out>/runs/
};

// The stages, in the order every run goes through them.
//   train     NT-ASGD training to the epoch cap; the best model (valid, B=10) tested at B=1
//   finetune  the MoS paper's second stage: ASGD from the best model until validation stops
//             improving (or finetune_epochs); tested again
//   dyneval   dynamic evaluation (Krause et al. 2018) of the final model on valid and test
//   pointer   the neural cache pointer: θ, λ chosen on valid, then test
//   rank      the numerical rank of the final model's log-probabilities over valid contexts
const std::vector<std::string>& reproduce_stage_names();

struct ReproducePlan {
  std::string name, description;
  std::vector<std::string> train_flags;  // after `mosgrad train`: --preset and overrides
  std::vector<PlanRun> runs;             // in the order they run, each through every stage
  std::vector<std::string> stages;       // a subsequence of reproduce_stage_names()
  int64_t finetune_epochs = 0;
  int64_t valid_tokens = 0, test_tokens = 0;  // evaluation slices (0: the whole split)
  DynevalConfig dyneval;
  int64_t pointer_window = 500;
  std::vector<double> pointer_thetas, pointer_lambdas;
  int64_t rank_contexts = 0;  // 0: every valid target
  // "auto": bf16 where it is faster (rounded GEMM operands; AVX512_BF16 on AMD, 1.3-1.7x on
  // Zen 5), else fp32 (mg::gemm_bf16_faster_than_fp32).
  std::string precision = "auto";
};

// The `mosgrad train` flags that make a plan's head, after the plan's own: --head <head>, except
// for mos-k1, MoS with one component (--head mos --n_experts 1): a single softmax over the
// mixtures' wide last layer projected to d by MoS's latent layer (h_1 = tanh(W_h h + b_h), Yang et
// al. 2017, eq. 3 with K = 1, where π = 1). It has the mixtures' width and the latent layer but one
// softmax of a d-dimensional context, so its log-probabilities stay within rank d + 2: with softmax
// (narrow, rank-bound), MoC (wide, mixed in context space, rank-bound) and MoS (wide, rank unbound)
// it splits MoS's gain into width, the mixture in context space, and the rank bound.
std::vector<std::string> head_flags(const std::string& head);

const std::vector<std::string>& reproduce_plan_names();  // quick, afternoon, day, paper, ptb-*
// Throws std::invalid_argument naming the plan and listing the known ones.
ReproducePlan reproduce_plan(const std::string& name);

// Further seeds of a plan's heads: each name "<head>-s<seed>" that is not one of the plan's runs
// but names one of its heads with a seed >= 1 is added to plan.runs, after the plan's own (the
// same flags as that head's runs; only --seed differs). Returns the names that are
// neither, for the caller to refuse.
std::vector<std::string> add_further_seeds(ReproducePlan& plan,
                                           const std::vector<std::string>& names);

// "auto" resolved for this CPU; "fp32" and "bf16" as they are.
std::string resolve_precision(const std::string& precision);

}  // namespace mg
