#include "reproduce/reproduce_plan.h"

#include <algorithm>
#include <stdexcept>

#include "lm/pointer.h"
#include "tensor/gemm.h"

namespace mg {

std::string PlanRun::name() const {
  return head + "-s" + std::to_string(seed);
}

const std::vector<std::string>& reproduce_stage_names() {
  static const std::vector<std::string> names = {"train", "finetune", "dyneval", "pointer", "rank"};
  return names;
}

std::vector<std::string> head_flags(const std::string& head) {
  if (head == "mos-k1") return {"--head", "mos", "--n_experts", "1"};
  return {"--head", head};
}

const std::vector<std::string>& reproduce_plan_names() {
  static const std::vector<std::string> names = {"quick", "afternoon", "day",
                                                 "paper", "ptb-1h",    "ptb-3h"};
  return names;
}

namespace {

ReproducePlan quick_plan() {
  ReproducePlan p;
  p.name = "quick";
  p.description =
      "every head on a 2,000-token slice of the corpus, a tiny model; checks the pipeline";
  p.train_flags = {"--preset",           "tiny", "--emsize",          "16",  "--nhid",   "24",
                   "--nhidlast",         "24",   "--n_experts",       "2",   "--epochs", "2",
                   "--max_train_tokens", "2000", "--max_eval_tokens", "300", "--bptt",   "10",
                   "--batch_size",       "10",   "--log_interval",    "1000"};
  p.runs = {{"softmax", 1}, {"mos", 1}, {"mos", 2},   {"sigsoftmax", 1},
            {"mosig", 1},   {"moc", 1}, {"mos-k1", 1}};
  p.stages = reproduce_stage_names();
  p.finetune_epochs = 2;
  p.valid_tokens = 300, p.test_tokens = 300;
  p.dyneval.max_stat_batches = 2, p.dyneval.stat_batch_size = 10;
  p.pointer_window = 50;
  p.pointer_thetas = {0.5, 1.0}, p.pointer_lambdas = {0.1, 0.2};
  p.rank_contexts = 100;
  p.precision = "fp32";  // the same numbers on every CPU
  return p;
}

// The afternoon and day plans: one recipe for AWD-LSTM's regularisation (lighter than AWD-LSTM's
// own, for models of 0.4-1.6M parameters) at two sizes; only the sizes, the epoch caps and the
// order of the runs differ.
ReproducePlan small_plan(const std::string& name, const std::string& description,
                         const std::string& emsize, const std::string& nhid,
                         const std::string& n_experts, const std::string& epochs,
                         int64_t finetune_epochs) {
  ReproducePlan p;
  p.name = name, p.description = description;
  p.train_flags = {"--preset",   "small-mos", "--emsize",    emsize,    "--nhid",     nhid,
                   "--nhidlast", nhid,        "--n_experts", n_experts, "--dropout",  "0.3",
                   "--dropouth", "0.2",       "--dropouti",  "0.1",     "--dropoute", "0.05",
                   "--wdrop",    "0.3",       "--dropoutl",  "0.2",     "--epochs",   epochs,
                   "--nonmono",  "3"};
  p.stages = reproduce_stage_names();
  p.finetune_epochs = finetune_epochs;
  p.pointer_thetas = pointer_thetas(), p.pointer_lambdas = pointer_lambdas();
  p.rank_contexts = 5000;
  // Pinned: the day plan's first runs (softmax-s1, mos-s1, moc-s1) trained in fp32 on an AVX2
  // CPU, and heads differ by ~2 perplexity (MoS - MoC), so bf16 on an AVX512_BF16 CPU would mix a
  // precision change into the comparison; fp32 also gives the same numbers on every CPU.
  p.precision = "fp32";
  return p;
}

// The headline plan, sized by measurement to fit 3 hours of 2 cores of an AVX2 AMD EPYC (Zen 3),
// the slowest CPU kind mosgrad is measured on (docs/reproduction.md "Sizing the afternoon plan"):
// the day plan's d = 64, K = 5 takes about 10 hours there. Halving d also halves
// the softmax bound (rank <= d + 2 = 34 against V = 10,000), so the bottleneck binds harder; K = 3
// keeps a mixture's head (K·d·V multiply-adds a token, plus K·V exponentials) within ~2.5 times a
// softmax run's cost.
ReproducePlan afternoon_plan() {
  ReproducePlan p = small_plan(
      "afternoon",
      "E = d = 32, LSTM [128, 128], K = 3, 10 epochs + finetune; 3 seeds of softmax and MoS, 1 of "
      "the others; about 3 hours of 2 cores",
      "32", "128", "3", "10", 5);
  // The pair the table is about first, then one run of every other head, then the further seeds:
  // a plan stopped part-way has then compared the most heads.
  p.runs = {{"softmax", 1}, {"mos", 1},     {"moc", 1}, {"sigsoftmax", 1}, {"mos-k1", 1},
            {"mosig", 1},   {"softmax", 2}, {"mos", 2}, {"softmax", 3},    {"mos", 3}};
  return p;
}

// The afternoon plan at d = 64 (its table in docs/reproduction/day.md), where MoS shows its lead
// from the first epoch, but about 5.7 hours of an AVX-512 Intel Xeon's 2 cores and ~10 of an AVX2
// AMD's: a day, not an afternoon.
ReproducePlan day_plan() {
  ReproducePlan p = small_plan(
      "day",
      "E = d = 64, LSTM [256, 256], K = 5, 12 epochs + finetune; 3 seeds of softmax and MoS, 1 of "
      "the others; 6-10 hours of 2 cores",
      "64", "256", "5", "12", 8);
  // mos-k1 last (the control for width and the latent layer: head_flags), so the first nine keep
  // their order.
  p.runs = {{"mos", 1}, {"softmax", 1}, {"moc", 1}, {"mosig", 1},   {"sigsoftmax", 1},
            {"mos", 2}, {"softmax", 2}, {"mos", 3}, {"softmax", 3}, {"mos-k1", 1}};
  return p;
}

// Yang et al. 2017's PTB model and recipe (the mos-paper preset: 1000 epochs, finetuning until
// validation stops improving, dynamic evaluation with the MoS README's settings).
ReproducePlan paper_plan() {
  ReproducePlan p;
  p.name = "paper";
  p.description = "the mos-paper preset (E=280, LSTM [960,960,620], K=15) and the paper's recipe";
  p.train_flags = {"--preset", "mos-paper"};
  p.runs = {{"mos", 1}, {"softmax", 1}};
  p.stages = reproduce_stage_names();
  p.finetune_epochs = 1000;
  p.pointer_thetas = pointer_thetas(), p.pointer_lambdas = pointer_lambdas();
  p.rank_contexts = 0;
  return p;
}

// A speedrun record (docs/speedrun.md): the budget preset trained as `mosgrad train --preset
// <name>` would train it, its best model tested at batch size 1, then dynamic evaluation and the
// cache pointer on it (evaluations outside the budget). Each row of its report is a record.
ReproducePlan speedrun_plan(const std::string& name) {
  ReproducePlan p;
  p.name = name;
  p.description = "the " + name + " preset's speedrun record: train (SGD, then ASGD inside the " +
                  "budget), dynamic evaluation, the cache pointer";
  p.train_flags = {"--preset", name};
  p.runs = {{"mos", 1}};
  p.stages = {"train", "dyneval", "pointer"};
  p.pointer_thetas = pointer_thetas(), p.pointer_lambdas = pointer_lambdas();
  return p;
}

}  // namespace

ReproducePlan reproduce_plan(const std::string& name) {
  if (name == "quick") return quick_plan();
  if (name == "afternoon") return afternoon_plan();
  if (name == "day") return day_plan();
  if (name == "paper") return paper_plan();
  if (name == "ptb-1h" || name == "ptb-3h") return speedrun_plan(name);
  std::string known;
  for (const auto& n : reproduce_plan_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("--plan: unknown plan '" + name + "'; choose one of " + known);
}

std::vector<std::string> add_further_seeds(ReproducePlan& plan,
                                           const std::vector<std::string>& names) {
  std::vector<std::string> unknown;
  for (const std::string& name : names) {
    const auto is_name = [&](const PlanRun& r) { return r.name() == name; };
    if (std::any_of(plan.runs.begin(), plan.runs.end(), is_name)) continue;
    const size_t at = name.rfind("-s");
    const std::string head = at == std::string::npos ? "" : name.substr(0, at),
                      digits = at == std::string::npos ? "" : name.substr(at + 2);
    const bool is_seed =
        !digits.empty() && digits.size() <= 9 && digits[0] != '0' &&
        std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    const bool is_head = std::any_of(plan.runs.begin(), plan.runs.end(),
                                     [&](const PlanRun& r) { return r.head == head; });
    if (is_seed && is_head)
      plan.runs.push_back({head, static_cast<uint64_t>(std::stoul(digits))});
    else
      unknown.push_back(name);
  }
  return unknown;
}

std::string resolve_precision(const std::string& precision) {
  if (precision != "auto") return precision;
  return gemm_bf16_faster_than_fp32() ? "bf16" : "fp32";
}

}  // namespace mg
