// The plans of `mosgrad reproduce` (cli/reproduce_plan.h) without data: which flags make each head
// of a plan, and which further seeds --runs may add. The plans run end to end in
// tests/cli/test_reproduce.cpp (with PTB).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/reproduce_plan.h"

using namespace mg;

namespace {

using Words = std::vector<std::string>;

bool has_run(const ReproducePlan& plan, const std::string& head, uint64_t seed) {
  for (const PlanRun& r : plan.runs)
    if (r.head == head && r.seed == seed) return true;
  return false;
}

}  // namespace

TEST(ReproducePlan, EachHeadIsItsOwnFlagAndMosK1IsMosWithOneComponent) {
  for (const char* head : {"softmax", "mos", "sigsoftmax", "mosig", "moc"})
    EXPECT_EQ(head_flags(head), (Words{"--head", head}));
  // After the plan's own --n_experts (5 in the afternoon plan): the later flag is the one used.
  EXPECT_EQ(head_flags("mos-k1"), (Words{"--head", "mos", "--n_experts", "1"}));
  for (const char* plan : {"quick", "afternoon"}) {
    const ReproducePlan p = reproduce_plan(plan);
    EXPECT_TRUE(has_run(p, "mos-k1", 1)) << plan;
    EXPECT_EQ(p.runs.back().name(), "mos-k1-s1") << plan << ": after the runs it joined";
  }
}

TEST(ReproducePlan, FurtherSeedsAreAddedOnlyForTheHeadsOfThePlan) {
  ReproducePlan plan = reproduce_plan("afternoon");
  const size_t runs = plan.runs.size();
  const Words unknown =
      add_further_seeds(plan, {"mos-k1-s2", "mos-s4", "mos-k2-s1", "mos-k1-s0", "mos-s1"});
  EXPECT_EQ(unknown, (Words{"mos-k2-s1", "mos-k1-s0"}));  // no such head; no seed 0
  ASSERT_EQ(plan.runs.size(), runs + 2) << "mos-s1 is the plan's own: not added twice";
  EXPECT_EQ(plan.runs[runs].name(), "mos-k1-s2");
  EXPECT_EQ(plan.runs[runs].head, "mos-k1");
  EXPECT_EQ(plan.runs[runs].seed, 2u);
  EXPECT_EQ(plan.runs[runs + 1].name(), "mos-s4");
}
