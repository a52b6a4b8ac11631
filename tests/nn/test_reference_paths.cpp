// The run-time switches between the fast paths and the readable references: --fused-lstm false,
// --fused-head false and --gemm reference. Each flag reaches the code it names, the reference GEMM
// is refused where it cannot run, and training and validation through each reference give the fast
// paths' numbers within the whole-model fixture tolerance (1e-4 relative, as the PyTorch comparison
// in tests/nn/test_layers_fixtures.cpp, which runs every path too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "autograd/node.h"
#include "cli/commands.h"
#include "lm/train.h"
#include "tensor/gemm.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

constexpr double kModelRtol = 1e-4;  // tests/nn/test_layers_fixtures.cpp: whole models against PyTorch

std::string invalid_of(const std::function<void()>& fn) {
  return mgtest::error_of<std::invalid_argument>(fn);
}

}  // namespace

TEST(ReferencePaths, FlagsReachTheCodeTheyName) {
  TrainConfig c = preset_config("tiny");
  EXPECT_TRUE(c.paths.fused_lstm && c.paths.fused_head && c.paths.gemm == "fast")
      << "the fast paths must be the default";
  c.set("fused-lstm", "false"), c.set("fused-head", "false"), c.set("gemm", "reference");
  const ComputePaths p = compute_paths(c.paths, Device::CPU);
  EXPECT_FALSE(p.fused_lstm);
  EXPECT_FALSE(p.fused_head);
  EXPECT_EQ(p.gemm, GemmPath::kReference);
  EXPECT_EQ(p.precision, GemmPrecision::kFp32);
  {  // applied: the model's paths, and the GEMM's only while the scope lives
    RNNModel m(mgtest::small_config("", "").model, 1);
    {
      const ComputePathsScope scope(p, &m);
      EXPECT_FALSE(m.paths.fused_lstm);
      EXPECT_FALSE(m.paths.fused_head);
      EXPECT_EQ(gemm_path(), GemmPath::kReference);
    }
    EXPECT_EQ(gemm_path(), GemmPath::kFast);
    EXPECT_FALSE(m.paths.fused_lstm);  // the model's stay with it
  }
  EXPECT_EQ(c.to_map().at("gemm"),
            "reference");  // the checkpoint records which paths computed the run

  // The head's loss: the fused node, or the plain nll_loss over log_softmax.
  ModelConfig mc = mgtest::small_config("", "").model;
  mc.ntoken = 11;
  RNNModel model(mc, 3);
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6}, targets = {2, 3, 4, 5, 6, 7};
  EXPECT_EQ(model.forward(ids, 3, 2, model.init_hidden(2), &targets).loss.grad_fn()->op,
            "fused_mixture_nll");
  model.paths.fused_head = false;
  EXPECT_EQ(model.forward(ids, 3, 2, model.init_hidden(2), &targets).loss.grad_fn()->op,
            "nll_loss");

  // eval and dyneval take all three; generate scores no targets, so it has no --fused-head.
  for (const std::string command : {"eval", "dyneval", "generate"}) {
    CommandLine c;
    const FlagTable table = command_flags(command, c);
    const ModelCommandOptions& o = c.model;
    apply_flag(table, command, "gemm", "reference");
    apply_flag(table, command, "fused-lstm", "false");
    EXPECT_EQ(o.paths.gemm, "reference") << command;
    EXPECT_FALSE(o.paths.fused_lstm) << command;
    const std::string head_error =
        invalid_of([&] { apply_flag(table, command, "fused-head", "false"); });
    EXPECT_EQ(head_error.empty(), command != "generate") << command << ": " << head_error;
  }
}

TEST(ReferencePaths, BadChoicesAreClearErrors) {
  EXPECT_HAS(invalid_of([] { preset_config("tiny").set("gemm", "blas"); }),
             "--gemm expects one of fast|reference, got 'blas'");
  EXPECT_HAS(invalid_of([] { preset_config("tiny").set("fused_head", "maybe"); }),
             "--fused_head expects true or false, got 'maybe'");
  EXPECT_EQ(gemm_path_for("reference", Device::CPU), GemmPath::kReference);
  EXPECT_EQ(gemm_path_for("fast", Device::CUDA), GemmPath::kFast);
  // On the GPU every GEMM is cuBLAS's: the reference cannot run there, so it is refused, not
  // ignored, before the model is built (in a build without CUDA too, ahead of "rebuild with make
  // CUDA=1").
  const std::string cuda =
      "--gemm reference runs on the CPU only: with --device cuda every GEMM is cuBLAS's";
  EXPECT_HAS(invalid_of([] { gemm_path_for("reference", Device::CUDA); }), cuda);
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("gemm_cuda"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("gemm_cuda"));
  cfg.paths.gemm = "reference", cfg.device = Device::CUDA;
  EXPECT_HAS(invalid_of([&] { train_lm(cfg, corpus); }), cuda);
  EXPECT_EQ(gemm_path(), GemmPath::kFast);
}

TEST(ReferencePaths, TrainingAndValidationMatchTheFastPaths) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("reference_paths"));
  // Every dropout on (small_config): the reference paths must draw the same masks as the fast ones.
  // Each step's loss; and the GEMM in force while training, which must be the one --gemm chose.
  auto run = [&](const std::vector<std::pair<std::string, std::string>>& flags,
                 TrainResult* result) {
    TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("reference_paths"));
    cfg.max_steps = 8;
    for (const auto& [name, value] : flags) cfg.set(name, value);
    std::vector<double> losses;
    TrainHooks hooks;
    hooks.on_step = [&](int64_t, double loss) {
      losses.push_back(loss);
      EXPECT_EQ(gemm_path(),
                cfg.paths.gemm == "reference" ? GemmPath::kReference : GemmPath::kFast);
    };
    *result = train_lm(cfg, corpus, hooks);
    return losses;
  };
  TrainResult fast_result;
  const std::vector<double> fast = run({}, &fast_result);
  ASSERT_EQ(fast.size(), 8u);
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>
      paths = {
          {"--fused-lstm false", {{"fused_lstm", "false"}}},
          {"--fused-head false", {{"fused_head", "false"}}},
          {"--gemm reference", {{"gemm", "reference"}}},
          {"all three", {{"fused_lstm", "false"}, {"fused_head", "false"}, {"gemm", "reference"}}}};
  for (const auto& [name, flags] : paths) {
    TrainResult result;
    const std::vector<double> losses = run(flags, &result);
    EXPECT_EQ(gemm_path(), GemmPath::kFast) << name << ": the run must restore the fast GEMM";
    ASSERT_EQ(losses.size(), fast.size()) << name;
    double worst = 0;
    for (size_t i = 0; i < fast.size(); ++i) {
      const double rel = std::fabs(losses[i] - fast[i]) / std::fabs(fast[i]);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, kModelRtol) << name << ": step " << i + 1 << " loss " << losses[i] << ", fast "
                                 << fast[i];
    }
    const double val_rel =
        std::fabs(result.final_val_loss - fast_result.final_val_loss) / fast_result.final_val_loss;
    EXPECT_LE(val_rel, kModelRtol) << name << ": validation " << result.final_val_loss << ", fast "
                                   << fast_result.final_val_loss;
    std::printf("%-19s 8 training losses within %.1e of the fast paths', validation within %.1e\n",
                name.c_str(), worst, val_rel);
  }
}
