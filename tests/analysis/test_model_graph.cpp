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
