// Batching (lm/batching.h): batchify into B columns, get_batch's shifted targets, the papers'
// evaluation target count, and the variable BPTT length. Split from tests/lm/test_corpus.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "lm/batching.h"
#include "lm/corpus.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

TEST(Batching, BatchifyColumnsAreContiguousText) {
  std::vector<int64_t> ids(11);
  std::iota(ids.begin(), ids.end(), 0);
  const mg::Batched b = mg::batchify(ids, 2);
  EXPECT_EQ(b.rows, 5);
  EXPECT_EQ(b.batch, 2);
  EXPECT_EQ(b.data, (std::vector<int64_t>{0, 5, 1, 6, 2, 7, 3, 8, 4, 9}));  // token 10 trimmed
  EXPECT_EQ(b.at(4, 1), 9);
  EXPECT_THROW(b.at(5, 0), std::out_of_range);
  EXPECT_THROW(mg::batchify(ids, 0), std::invalid_argument);
  EXPECT_THROW(mg::batchify(ids, 12), std::invalid_argument);
  EXPECT_EQ(mg::batchify(ids, 1).rows, 11);
}

TEST(Batching, GetBatchShiftsTargetsAndClipsAtTheEnd) {
  std::vector<int64_t> ids(11);
  std::iota(ids.begin(), ids.end(), 0);
  const mg::Batched data = mg::batchify(ids, 2);
  const mg::Batch b0 = mg::get_batch(data, 0, 3);
  EXPECT_EQ(b0.seq_len, 3);
  EXPECT_EQ(b0.batch, 2);
  EXPECT_EQ(b0.input, (std::vector<int64_t>{0, 5, 1, 6, 2, 7}));
  EXPECT_EQ(b0.target, (std::vector<int64_t>{1, 6, 2, 7, 3, 8}));
  const mg::Batch b1 = mg::get_batch(data, 3, 3);  // only row 4 is left as a target
  EXPECT_EQ(b1.seq_len, 1);
  EXPECT_EQ(b1.input, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(b1.target, (std::vector<int64_t>{4, 9}));
  EXPECT_THROW(mg::get_batch(data, 4, 3), std::out_of_range);  // the last row has no next token
  EXPECT_THROW(mg::get_batch(data, -1, 3), std::out_of_range);
  EXPECT_THROW(mg::get_batch(data, 0, 0), std::invalid_argument);
}

// Walks an evaluation pass with segments of `bptt` rows, marking every scored (row, column).
int64_t walk_targets(const mg::Batched& data, int64_t bptt, std::vector<int>* seen) {
  int64_t n = 0;
  for (int64_t i = 0; i < data.rows - 1;) {
    const mg::Batch b = mg::get_batch(data, i, bptt);
    for (int64_t k = 0; k < b.seq_len * b.batch; ++k)
      ++(*seen)[static_cast<size_t>((i + 1) * data.batch + k)];
    n += static_cast<int64_t>(b.target.size());
    i += b.seq_len;
  }
  return n;
}

TEST(Batching, EvalTargetCountSmallCases) {
  // Hand-computed: rows = n / B, targets = (rows - 1) * B.
  EXPECT_EQ(mg::eval_target_count(11, 2), 8);  // rows 5
  EXPECT_EQ(mg::eval_target_count(21, 4), 16);
  EXPECT_EQ(mg::eval_target_count(10, 10), 0);  // one row: nothing to predict
  EXPECT_EQ(mg::eval_target_count(5, 10), 0);
  EXPECT_EQ(mg::eval_target_count(7, 1), 6);
  EXPECT_THROW(mg::eval_target_count(7, 0), std::invalid_argument);
  // And by walking segments of any length: each position after the first of its column exactly
  // once.
  for (int64_t n : {11, 21, 40, 97}) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    for (int64_t B : {1, 2, 3, 4}) {
      const mg::Batched data = mg::batchify(ids, B);
      for (int64_t bptt : {1, 2, 5, 35, 1000}) {
        std::vector<int> seen(data.data.size(), 0);
        EXPECT_EQ(walk_targets(data, bptt, &seen), mg::eval_target_count(n, B))
            << n << " " << B << " " << bptt;
        EXPECT_EQ(mg::eval_target_count(data), mg::eval_target_count(n, B));
        for (size_t k = 0; k < seen.size(); ++k)
          EXPECT_EQ(seen[k], k < static_cast<size_t>(B) ? 0 : 1);
      }
    }
  }
}

TEST(Batching, PennTreebankEvalTargets) {
  const std::string dir = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(dir);
  const mg::Corpus c = mg::load_corpus(dir);
  EXPECT_EQ(mg::eval_target_count(static_cast<int64_t>(c.valid.size()), 10), 73750);
  EXPECT_EQ(mg::eval_target_count(static_cast<int64_t>(c.test.size()), 1),
            82429);  // AWD-LSTM's test batch 1
  const mg::Batched valid = mg::batchify(c.valid, 10);
  EXPECT_EQ(valid.rows, 7376);
  std::vector<int> seen(valid.data.size(), 0);
  EXPECT_EQ(walk_targets(valid, 70, &seen), 73750);
  const mg::Batched train = mg::batchify(c.train, 20);  // AWD-LSTM's PTB batch size
  EXPECT_EQ(train.rows, 46479);
  EXPECT_EQ(train.at(0, 1), c.train[46479]);  // column 1 starts where column 0 ends
}

TEST(Batching, BpttLengthIsDeterministicAndResumable) {
  mg::Generator a(1234), b(1234);
  std::vector<int64_t> first;
  for (int k = 0; k < 100; ++k) first.push_back(mg::bptt_length(70, a));
  for (int k = 0; k < 100; ++k) EXPECT_EQ(mg::bptt_length(70, b), first[static_cast<size_t>(k)]);
  EXPECT_EQ(a.offset, 300u);  // 3 positions per draw

  // Resume from a saved (seed, offset): the same continuation.
  mg::Generator c(1234);
  for (int k = 0; k < 40; ++k) mg::bptt_length(70, c);
  mg::Generator restored(c.seed);
  restored.offset = c.offset;
  for (int k = 40; k < 100; ++k)
    EXPECT_EQ(mg::bptt_length(70, restored), first[static_cast<size_t>(k)]);

  mg::Generator other(99);
  std::vector<int64_t> different;
  for (int k = 0; k < 100; ++k) different.push_back(mg::bptt_length(70, other));
  EXPECT_NE(different, first);
}

TEST(Batching, BpttLengthDistribution) {
  mg::Generator gen(7);
  const int n = 40000;
  int halves = 0;
  double sum = 0, sum_main = 0, sq_main = 0;
  int n_main = 0;
  for (int k = 0; k < n; ++k) {
    const int64_t len = mg::bptt_length(70, gen);
    ASSERT_GE(len, 5);
    ASSERT_LE(len, 110);
    sum += static_cast<double>(len);
    if (len < 52)
      ++halves;  // N(35, 5) vs N(70, 5): 52 is 3.4 sigma from both
    else {
      ++n_main;
      sum_main += static_cast<double>(len);
      sq_main += static_cast<double>(len * len);
    }
  }
  EXPECT_NEAR(static_cast<double>(halves) / n, 0.05, 0.005);
  EXPECT_NEAR(sum / n, 0.95 * 70 + 0.05 * 35, 0.15);
  const double mean_main = sum_main / n_main;
  EXPECT_NEAR(mean_main, 70.0, 0.1);
  EXPECT_NEAR(std::sqrt(sq_main / n_main - mean_main * mean_main), 5.0,
              0.15);  // rounding adds ~1/12 variance
}

TEST(Batching, BpttLengthClamps) {
  mg::Generator gen(3);
  std::set<int64_t> small;
  for (int k = 0; k < 2000; ++k) small.insert(mg::bptt_length(2, gen));  // N(2, 5) mostly below 5
  EXPECT_EQ(*small.begin(), 5);
  EXPECT_LE(*small.rbegin(), 42);
  for (int k = 0; k < 2000; ++k) EXPECT_LE(mg::bptt_length(70, gen, 0), 70);
  for (int k = 0; k < 100; ++k)
    EXPECT_EQ(mg::bptt_length(2, gen, 1), 3);  // cap below 5: the cap wins
  EXPECT_THROW(mg::bptt_length(0, gen), std::invalid_argument);
  EXPECT_THROW(mg::bptt_length(10, gen, -10), std::invalid_argument);
}
