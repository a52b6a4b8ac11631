// --grad-groups G (lm/column_groups.h): a batch's columns in G groups, each group's forward and
// backward on its own, the gradients summed in group order. The groups must compute the whole
// batch's step — the same dropout masks column for column, the same loss, the same gradient up to
// the order of float additions — and the same bits every time. (That `mpirun -np N` gives the
// bits of one process is checked by tools/mpi_check.sh, which needs Open MPI.)
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "lm/column_groups.h"
#include "lm/evaluate.h"
#include "lm/train.h"
#include "nn/dropout.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

struct SmallModel {
  Corpus corpus;
  TrainConfig cfg;
  RNNModel model;
  Batch batch;    // [T,4] of the training split
  Hidden hidden;  // a state carried in from a segment before, not zeros
};

SmallModel small_model(const std::string& name) {
  Corpus corpus = load_corpus(mgtest::write_synthetic_corpus(name));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir(name));  // every dropout on
  ModelConfig mc = cfg.model;
  mc.ntoken = corpus.vocab.size();
  RNNModel model(mc, cfg.seed);
  model.train();
  const Batched data = batchify(corpus.train, cfg.batch_size);
  const Batch before = get_batch(data, 0, cfg.bptt);
  Hidden hidden = model.init_hidden(cfg.batch_size);
  {
    NoGradGuard no_grad;
    hidden = detach_hidden(
        model.forward(before.input, before.seq_len, before.batch, hidden, &before.target).hidden);
  }
  Batch batch = get_batch(data, cfg.bptt, cfg.bptt);
  return {std::move(corpus), cfg, std::move(model), std::move(batch), std::move(hidden)};
}

struct StepGradient {
  GroupedStep step;
  std::vector<std::vector<float>> grads;  // per parameter
  uint64_t dropout_offset = 0;            // where the dropout stream stands after the step
};

StepGradient step_in_groups(SmallModel& m, int64_t G) {
  const Generator start = m.model.dropout_gen;
  for (const Tensor& p : m.model.parameters()) const_cast<Tensor&>(p).zero_grad();
  StepGradient r;
  r.step = grouped_forward_backward(m.model, m.batch, m.hidden, G, m.cfg.alpha, m.cfg.beta, false);
  for (const Tensor& p : m.model.parameters()) r.grads.push_back(p.grad().to_vector());
  r.dropout_offset = m.model.dropout_gen.offset;
  m.model.dropout_gen = start;  // the next call draws the same masks
  return r;
}

}  // namespace

TEST(ColumnGroups, LockedDropoutOfAGroupIsItsColumnsOfTheWholeBatchMask) {
  const int64_t T = 3, B = 6, H = 5, first = 2, width = 3;
  Generator whole_gen(7), group_gen(7);
  const std::vector<float> whole =
      locked_dropout(Tensor::ones({T, B, H}), 0.5f, whole_gen, true).to_vector();
  std::vector<float> part;
  {
    const ColumnGroupScope columns({first, B});
    part = locked_dropout(Tensor::ones({T, width, H}), 0.5f, group_gen, true).to_vector();
  }
  int64_t dropped = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < width; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const float expected = whole[static_cast<size_t>((t * B + first + b) * H + h)];
        ASSERT_EQ(part[static_cast<size_t>((t * width + b) * H + h)], expected)
            << "t " << t << " column " << first + b << " h " << h;
        dropped += expected == 0.0f;
      }
  EXPECT_GT(dropped, 0) << "no element dropped: the comparison would not see a wrong mask";
  EXPECT_EQ(group_gen.offset, whole_gen.offset) << "a group must reserve the whole batch's draw";
  // Columns outside the batch are refused.
  const ColumnGroupScope columns({5, B});
  EXPECT_NE(mgtest::error_of<std::invalid_argument>([&] {
              locked_dropout(Tensor::ones({T, width, H}), 0.5f, group_gen, true);
            }).find("not in a batch of 6 columns"),
            std::string::npos);
}

TEST(ColumnGroups, GroupsComputeTheWholeBatchStep) {
  SmallModel m = small_model("column_groups_step");
  const StepGradient whole = step_in_groups(m, 1);
  for (int64_t G : {2, 4}) {
    SCOPED_TRACE("G " + std::to_string(G));
    const StepGradient groups = step_in_groups(m, G);
    EXPECT_NEAR(groups.step.nll, whole.step.nll, 1e-6 * whole.step.nll);
    EXPECT_EQ(groups.dropout_offset, whole.dropout_offset);
    // The same gradient up to the order of additions: a wrong mask, a missing 1/G or a lost
    // group is off by far more.
    for (size_t i = 0; i < whole.grads.size(); ++i) {
      double diff = 0, norm = 0;
      for (size_t j = 0; j < whole.grads[i].size(); ++j) {
        diff = std::max(diff, std::abs(double{groups.grads[i][j]} - whole.grads[i][j]));
        norm = std::max(norm, std::abs(double{whole.grads[i][j]}));
      }
      EXPECT_LE(diff, 2e-5 * norm + 1e-9) << m.model.named_parameters()[i].first;
    }
    // Every column's final state, in column order.
    for (size_t l = 0; l < whole.step.hidden.size(); ++l)
      for (Tensor LSTMState::*f : {&LSTMState::h, &LSTMState::c}) {
        const std::vector<float> a = (whole.step.hidden[l].*f).to_vector(),
                                 b = (groups.step.hidden[l].*f).to_vector();
        ASSERT_EQ(a.size(), b.size());
        for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-5) << "layer " << l;
      }
    // The same bits every time.
    const StepGradient again = step_in_groups(m, G);
    EXPECT_EQ(again.grads, groups.grads);
    EXPECT_EQ(again.step.nll, groups.step.nll);
  }
}

TEST(ColumnGroups, EvaluationInGroupsScoresTheSameTargets) {
  SmallModel m = small_model("column_groups_eval");
  const Batched valid = batchify(m.corpus.valid, 4);
  const EvalResult whole = evaluate(m.model, valid, m.cfg.bptt);
  const EvalResult groups = evaluate(m.model, valid, m.cfg.bptt, 2);
  EXPECT_EQ(groups.targets, whole.targets);
  EXPECT_NEAR(groups.loss, whole.loss, 1e-6 * whole.loss);
  EXPECT_EQ(evaluate(m.model, valid, m.cfg.bptt, 2).loss, groups.loss);
  EXPECT_NE(mgtest::error_of<std::invalid_argument>([&] {
              evaluate(m.model, valid, m.cfg.bptt, 3);
            }).find("4 columns are not divisible into 3 groups"),
            std::string::npos);
}

TEST(ColumnGroups, TrainingInGroupsRepeatsBitForBitAndFollowsTheWholeBatch) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("column_groups_train"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("column_groups_train_1"));
  cfg.max_steps = 8;
  const std::vector<double> whole = mgtest::run_collecting(cfg, corpus);
  cfg.grad_groups = 2;
  cfg.save = mgtest::temp_dir("column_groups_train_2");
  const std::vector<double> groups = mgtest::run_collecting(cfg, corpus);
  cfg.save = mgtest::temp_dir("column_groups_train_2b");
  EXPECT_EQ(mgtest::run_collecting(cfg, corpus), groups);
  ASSERT_EQ(groups.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(groups[i], whole[i], 1e-3) << "step " << i;
}

TEST(ColumnGroups, GroupsMustDivideTheTrainingBatchNotTheValidationOne) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("column_groups_flags"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("column_groups_flags"));
  cfg.grad_groups = 3;  // B = 4
  EXPECT_NE(mgtest::error_of<std::invalid_argument>([&] {
              train_lm(cfg, corpus);
            }).find("--batch_size 4 is not divisible into --grad-groups 3"),
            std::string::npos);
  // Validation's 4 columns are not divisible into 3 groups either: validation then runs whole (on
  // every process under mpirun), which depends on G and its batch alone, never on N.
  EXPECT_EQ(validation_groups(3, 4), 1);
  EXPECT_EQ(validation_groups(2, 4), 2);
  cfg.batch_size = 6, cfg.max_steps = 2;
  EXPECT_TRUE(train_lm(cfg, corpus).stopped);
  EXPECT_FALSE(
      mgtest::error_of<std::invalid_argument>([&] { cfg.set("grad-groups", "0"); }).empty());
}
