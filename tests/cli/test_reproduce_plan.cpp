// The plans of `mosgrad reproduce` (cli/reproduce_plan.h) without data: which flags make each head
// of a plan, and which further seeds --runs may add; and the report's figure of made-up curves.
// The plans run end to end in tests/cli/test_reproduce.cpp (with PTB).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/reproduce_plan.h"
#include "cli/reproduce_results.h"
#include "io/json.h"

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

TEST(ReproduceFigure, AnEpochThatBlewUpIsDrawnAtTenTimesTheLowestValue) {
  auto train = [](const std::string& run, const std::string& head, std::vector<double> valid) {
    return parse_json(JsonLine()
                          .add("plan", "quick")
                          .add("run", run)
                          .add("head", head)
                          .add("seed", int64_t{1})
                          .add("stage", "train")
                          .add("epoch_valid_ppl", valid)
                          .str());
  };
  const ReproducePlan plan = reproduce_plan("quick");
  std::vector<StageRecord> records = {{train("mos-s1", "mos", {130, 100})},
                                      {train("softmax-s1", "softmax", {900, 140})}};
  EXPECT_EQ(results_figure_svg(records, plan).find("drawn at"), std::string::npos)
      << "900 is within ten times 100: nothing clipped";
  records.push_back({train("mos-k1-s1", "mos-k1", {89027, 150})});
  const std::string svg = results_figure_svg(records, plan);
  EXPECT_NE(svg.find("values above 1000 drawn at 1000"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("89027"), std::string::npos);
  EXPECT_EQ(svg.find(">10000<"), std::string::npos) << "no tick far above the curves";
  EXPECT_NE(svg.find("class=\"clipped\""), std::string::npos) << "the point is marked";
}
