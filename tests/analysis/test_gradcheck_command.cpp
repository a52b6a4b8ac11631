// `mosgrad gradcheck` (analysis/model_gradcheck.h): every head, on the fused and the reference
// paths, passes against central differences; a corrupted gradient fails, on its parameter only; its
// flags are checked like train's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "analysis/model_gradcheck.h"
#include "cli/commands.h"
#include "tests/test_util.h"

using namespace mg;

namespace {
CommandLine parse(std::vector<std::string> words) {
  words.insert(words.begin(), {"mosgrad", "gradcheck"});
  return parse_command(words);
}
}  // namespace

TEST(GradcheckCommand, EveryHeadPassesOnTheFusedAndTheReferencePaths) {
  for (const char* head : {"softmax", "mos", "sigsoftmax", "mosig", "moc"})
    for (const char* fused : {"true", "false"}) {
      // Two layers and every dropout on: the replayed masks are checked with the rest.
      CommandLine c = parse({"--head", head, "--fused-lstm", fused, "--fused-head", fused,
                             "--nlayers", "2", "--dropout", "0.3", "--dropouth", "0.2", "--wdrop",
                             "0.3", "--dropoute", "0.1", "--dropoutl", "0.2"});
      const ModelGradcheckReport r = gradcheck_model(c.train, c.gradcheck);
      EXPECT_TRUE(r.ok) << head << " fused=" << fused << "\n"
                        << gradcheck_table(r, c.gradcheck.tolerance);
      EXPECT_EQ(r.rows.size(),
                head == std::string("softmax") || head == std::string("sigsoftmax") ? 10u : 13u);
    }
}

TEST(GradcheckCommand, ACorruptedGradientFailsOnItsParameterOnly) {
  CommandLine c = parse({"--head", "mos", "--entries", "0"});
  // A backward 2% off on one entry of one parameter, as a slightly wrong derivative would be.
  c.gradcheck.after_backward = [](Module& model) {
    Tensor g = model.parameter("latent.bias").grad();
    float* v = g.data();
    int64_t big = 0;
    for (int64_t i = 0; i < g.numel(); ++i)
      if (std::fabs(v[i]) > std::fabs(v[big])) big = i;
    v[big] *= 1.02f;
  };
  const ModelGradcheckReport r = gradcheck_model(c.train, c.gradcheck);
  EXPECT_FALSE(r.ok);
  for (const ParamGradcheck& p : r.rows) EXPECT_EQ(p.ok, p.name != "latent.bias") << p.name;
  const std::string table = gradcheck_table(r, c.gradcheck.tolerance);
  EXPECT_HAS(table, "latent.bias");
  EXPECT_HAS(table, "FAIL: 1 of 9 parameters above tolerance 0.01");
}

TEST(GradcheckCommand, ToleranceZeroFailsAndTheTableSaysWhatWasChecked) {
  CommandLine c =
      parse({"--tolerance", "0", "--params", "rnns.0.weight_hh,decoder.bias", "--entries", "6"});
  const ModelGradcheckReport r = gradcheck_model(c.train, c.gradcheck);
  EXPECT_FALSE(r.ok);  // float rounding alone is never exactly zero
  ASSERT_EQ(r.rows.size(), 2u);
  const std::string table = gradcheck_table(r, c.gradcheck.tolerance);
  EXPECT_HAS(table, "softmax E=16 LSTM [16] V=50 tied, T=5 B=2");
  EXPECT_HAS(table, "rnns.0.weight_hh       [64,16]    6 of 1,024");
  EXPECT_HAS(table, "decoder.bias           [50]       6 of 50");
}

TEST(GradcheckCommand, FlagsAreCheckedNamingTheFlag) {
  auto invalid = [](std::vector<std::string> words) {
    return mgtest::error_of<std::invalid_argument>([&] { parse(words); });
  };
  EXPECT_HAS(invalid({"--tolerance", "-1"}), "--tolerance");
  EXPECT_HAS(invalid({"--entries", "x"}), "--entries");
  EXPECT_HAS(invalid({"--params", "a,,b"}), "--params expects all or NAME,NAME,...");
  EXPECT_HAS(invalid({"--vocab", "1"}), "--vocab");
  EXPECT_HAS(invalid({"--bogus", "1"}), "unknown flag --bogus for gradcheck");
  CommandLine c = parse({"--params", "nope"});
  EXPECT_HAS(
      mgtest::error_of<std::invalid_argument>([&] { gradcheck_model(c.train, c.gradcheck); }),
      "--params: no parameter 'nope'; the model has encoder.weight, rnns.0.weight_ih");
  // bf16 products against double-precision differences would fail for the rounding, not a bug.
  c = parse({"--precision", "bf16"});
  EXPECT_HAS(
      mgtest::error_of<std::invalid_argument>([&] { gradcheck_model(c.train, c.gradcheck); }),
      "gradcheck checks the FP32 gradients: --precision bf16");
  // A preset keeps its sizes; the batch stays small.
  c = parse({"--preset", "small-mos"});
  EXPECT_EQ(c.train.model.emsize, 200);
  EXPECT_EQ(c.train.batch_size, 2);
  EXPECT_EQ(c.train.model.ntoken, 50);
}

TEST(GradcheckCommand, TheCliPageNamesItsFlags) {
  std::ifstream in(std::string(MOSGRAD_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream text;
  text << in.rdbuf();
  CommandLine c;
  for (const Flag& f : command_flags("gradcheck", c))
    EXPECT_NE(text.str().find("`--" + f.name + "`"), std::string::npos)
        << "docs/cli.md does not list --" << f.name << " (gradcheck)";
}
