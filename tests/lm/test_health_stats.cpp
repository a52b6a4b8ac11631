// --log-stats (lm/health_stats.h): the training-health statistics change no number of the run,
// land in metrics.jsonl with every parameter and layer, count saturated gates as stated, and
// `mosgrad plot` draws them beside the learning curves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/read_file.h"
#include "lm/learning_curves.h"
#include "lm/model_io.h"
#include "nn/gate_stats.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

TEST(HealthStats, GateSaturationCountsWhereTheDerivativeVanishes) {
  // Two rows, H = 2: i, f, o saturate below 0.01 or above 0.99, g beyond ±0.99.
  const std::vector<float> acts = {
      0.005f, 0.5f, /*i*/ 0.995f, 0.99f,  /*f*/ -0.995f, 0.98f, /*g*/ 0.5f,  0.5f,  // o
      0.5f,   0.5f, /*i*/ 0.5f,   0.001f, /*f*/ 0.999f,  -0.2f, /*g*/ 0.01f, 1.0f};
  std::vector<GateSaturation> out;
  report_gate_saturation(acts.data(), 2, 2);  // no scope: nothing recorded, nothing crashes
  {
    const GateStatsScope scope(&out);
    EXPECT_TRUE(gate_stats_wanted());
    report_gate_saturation(acts.data(), 2, 2);
  }
  EXPECT_FALSE(gate_stats_wanted());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].values, 4);
  EXPECT_EQ(out[0].saturated[0], 1);  // i: 0.005
  EXPECT_EQ(out[0].saturated[1], 2);  // f: 0.995, 0.001 (0.99 is not above 0.99)
  EXPECT_EQ(out[0].saturated[2], 2);  // g: -0.995, 0.999
  EXPECT_EQ(out[0].saturated[3], 1);  // o: 1.0 (0.01 is not below 0.01)
  EXPECT_DOUBLE_EQ(out[0].fraction(1), 0.5);
}

TEST(HealthStats, ChangeNoNumberOfTheRunAndRecordEveryParameterAndLayer) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("health"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("health_off"));
  cfg.epochs = 1, cfg.max_steps = 12, cfg.log_interval = 5;
  const std::vector<double> plain = mgtest::run_collecting(cfg, corpus);
  const std::string off = cfg.save;
  cfg.save = mgtest::temp_dir("health_on"), cfg.log_stats = true;
  EXPECT_EQ(mgtest::run_collecting(cfg, corpus), plain);  // every step's loss, bit for bit
  const auto a = load_model(off + "/checkpoint.ckpt").model->named_parameters();
  const auto b = load_model(cfg.save + "/checkpoint.ckpt").model->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first;

  // Steps 5 and 10 are logged (and the stop's partial interval is not an epoch end here).
  const std::string text = read_file(cfg.save + "/metrics.jsonl", "metrics");
  std::istringstream lines(text);
  int stats = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"kind\":\"stats\"") == std::string::npos) continue;
    ++stats;
    for (const auto& [name, p] : a) {
      EXPECT_HAS(line, "\"grad_norm." + name + "\":");
      EXPECT_HAS(line, "\"update_ratio." + name + "\":");
    }
    for (int l = 0; l < static_cast<int>(cfg.model.nlayers); ++l)
      for (const char* key : {"act_mean.", "act_std.", "sat_i.", "sat_f.", "sat_g.", "sat_o."})
        EXPECT_HAS(line, "\"" + std::string(key) + std::to_string(l) + "\":");
  }
  EXPECT_EQ(stats, 2) << text;
  const LearningCurves c = parse_metrics(text, "metrics.jsonl");
  ASSERT_EQ(c.stats.count("grad_norm.decoder.bias"), 1u);
  EXPECT_EQ(c.stats.at("grad_norm.decoder.bias").size(), 2u);
  for (const PlotPoint& p : c.stats.at("update_ratio.rnns.0.weight_hh"))
    EXPECT_TRUE(p.y > 0 && p.y < 1) << p.y;  // an SGD step moves a weight by a small fraction
  for (const PlotPoint& p : c.stats.at("act_std.0")) EXPECT_TRUE(p.y > 0 && p.y < 1) << p.y;

  const std::vector<std::string> files =
      plot_learning_curves(cfg.save + "/metrics.jsonl", cfg.save + "/curves.svg", "t");
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[1], cfg.save + "/health_grad_norm.svg");
  EXPECT_HAS(read_file(files[1], "svg"), "grad_norm.rnns.0.weight_hh");
  EXPECT_HAS(read_file(files[3], "svg"), "act_std.0");
  // The finetune's curves get their own health plots.
  EXPECT_EQ(plot_learning_curves(cfg.save + "/metrics.jsonl", cfg.save + "/finetune_curves.svg")[1],
            cfg.save + "/finetune_health_grad_norm.svg");
  EXPECT_EQ(plot_learning_curves(cfg.save + "/metrics.jsonl", cfg.save + "/mycurves.svg")[1],
            cfg.save + "/mycurves_health_grad_norm.svg");
}

TEST(HealthStats, TheLstmBuiltFromOpsReportsNoGates) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("health_ref"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("health_ref"));
  cfg.epochs = 1, cfg.max_steps = 5, cfg.log_interval = 5, cfg.log_stats = true;
  cfg.paths.fused_lstm = false;
  mgtest::run_collecting(cfg, corpus);
  const std::string text = read_file(cfg.save + "/metrics.jsonl", "metrics");
  EXPECT_HAS(text, "\"act_std.0\":");
  EXPECT_EQ(text.find("\"sat_i.0\""), std::string::npos);
}
