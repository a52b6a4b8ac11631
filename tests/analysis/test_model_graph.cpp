// `mosgrad graph` (analysis/model_graph.h): the DOT of one forward pass names the ops and the
// parameters of the model the flags describe, and its flags are checked like train's.
#include <gtest/gtest.h>

#include "analysis/model_graph.h"
#include "cli/commands.h"
#include "tests/test_util.h"

using namespace mg;

namespace {
TrainConfig parse(std::vector<std::string> words, std::string* out) {
  const CommandLine c = parse_command(words);
  *out = c.out;
  return c.train;
}
}  // namespace

TEST(ModelGraph, NamesOpsShapesAndParametersOfTheModelTheFlagsDescribe) {
  std::string out;
  const TrainConfig c =
      parse({"mosgrad", "graph", "--head", "mos", "--n_experts", "2", "--nhidlast", "32", "--bptt",
             "3", "--batch_size", "2", "--out", "m.dot"},
            &out);
  EXPECT_EQ(out, "m.dot");
  const std::string dot = model_graph_dot(c);
  EXPECT_EQ(dot.rfind("digraph autograd {", 0), 0u);
  for (const char* want :
       {"lstm_fused", "fused_mixture_nll", "rnns.0.weight_hh", "prior.weight [2,32]",
        "latent.weight [128,32]", "encoder.weight [10000,64]"})
    EXPECT_HAS(dot, want);
  const std::string softmax =
      model_graph_dot(parse({"mosgrad", "graph", "--bptt", "2", "--batch_size", "2"}, &out));
  EXPECT_EQ(out, "graph.dot");
  EXPECT_EQ(softmax.find("prior.weight"), std::string::npos);
  // The reference paths draw their own graph: the LSTM from ops, the loss as nll_loss(log_prob).
  const std::string reference =
      model_graph_dot(parse({"mosgrad", "graph", "--bptt", "2", "--batch_size", "2", "--fused-lstm",
                             "false", "--fused-head", "false"},
                            &out));
  EXPECT_EQ(reference.find("lstm_fused"), std::string::npos);
  EXPECT_EQ(reference.find("fused_mixture_nll"), std::string::npos);
  EXPECT_HAS(reference, "nll_loss");
}

TEST(ModelGraph, BadFlagsAreRefusedNamingTheCommand) {
  std::string out;
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] {
               parse({"mosgrad", "graph", "--outt", "x"}, &out);
             }),
             "unknown flag --outt for graph (did you mean --out?)");
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] {
               parse({"mosgrad", "graph", "--out", ""}, &out);
             }),
             "--out needs a value");
}

// --values: a backward too, and each box and parameter shows its value and its gradient, as
// micrograd's graphs do; every node on the loss's path gets one (the watch sees each).
TEST(ModelGraph, ValuesShowEachNodesValueAndGradient) {
  const CommandLine c = parse_command({"mosgrad", "graph", "--preset", "tiny", "--emsize", "4",
                                       "--bptt", "2", "--batch_size", "1", "--values"});
  ASSERT_TRUE(c.values);
  const std::string dot = model_graph_dot(c.train, true);
  EXPECT_HAS(dot, "fused_mixture_nll []\\nvalue 9.2");  // ≈ ln V at the start, V = 10,000
  EXPECT_HAS(dot, "\\ngrad 1\"");                       // d loss / d loss
  EXPECT_HAS(dot, "encoder.weight [10000,4]\\nvalue μ ");
  EXPECT_HAS(dot, "rnns.0.weight_hh [16,4]\\nvalue μ ");
  EXPECT_EQ(dot.find("grad none"), std::string::npos) << dot;
  // The same boxes and edges as without values.
  const std::string plain = model_graph_dot(c.train, false);
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(dot, " -> "), count(plain, " -> "));
  EXPECT_EQ(count(dot, "shape=box"), count(plain, "shape=box"));
}
