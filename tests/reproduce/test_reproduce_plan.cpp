// The plans of `mosgrad reproduce` (reproduce/reproduce_plan.h) without data: which flags make each head
// of a plan, and which further seeds --runs may add; and the report's figure of made-up curves.
// The plans run end to end in tests/reproduce/test_reproduce.cpp (with PTB).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "io/json.h"
#include "reproduce/provenance.h"
#include "reproduce/reproduce_plan.h"
#include "reproduce/reproduce_results.h"

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
  // After the plan's own --n_experts (3 in the afternoon plan): the later flag is the one used.
  EXPECT_EQ(head_flags("mos-k1"), (Words{"--head", "mos", "--n_experts", "1"}));
  for (const char* plan : {"quick", "afternoon", "day"})
    EXPECT_TRUE(has_run(reproduce_plan(plan), "mos-k1", 1)) << plan;
  // The day plan's table was measured in this order; mos-k1 joined after its first nine runs.
  for (const char* plan : {"quick", "day"})
    EXPECT_EQ(reproduce_plan(plan).runs.back().name(), "mos-k1-s1") << plan;
}

// What the headline table needs: every head, 3 seeds of softmax and MoS, 1 of the
// others, every stage; the same flags for every head; and the sizes that fit 3 hours of 2 cores
// (docs/reproduction.md, "Sizing the afternoon plan").
TEST(ReproducePlan, TheAfternoonPlanHasEveryHeadAndTheSeedsTheTableNeeds) {
  const ReproducePlan p = reproduce_plan("afternoon");
  for (const char* head : {"softmax", "mos"})
    for (uint64_t seed : {1, 2, 3}) EXPECT_TRUE(has_run(p, head, seed)) << head << seed;
  for (const char* head : {"sigsoftmax", "mosig", "moc", "mos-k1"})
    EXPECT_TRUE(has_run(p, head, 1)) << head;
  EXPECT_EQ(p.runs.size(), 10u);
  EXPECT_EQ(p.runs[0].name(), "softmax-s1") << "the pair the table is about comes first";
  EXPECT_EQ(p.runs[1].name(), "mos-s1");
  EXPECT_EQ(p.stages, reproduce_stage_names());
  EXPECT_EQ(p.precision, "fp32");
  const auto value = [&](const ReproducePlan& plan, const std::string& flag) {
    const auto at = std::find(plan.train_flags.begin(), plan.train_flags.end(), flag);
    return at == plan.train_flags.end() || at + 1 == plan.train_flags.end() ? std::string()
                                                                            : *(at + 1);
  };
  EXPECT_EQ(value(p, "--emsize"), "32");
  EXPECT_EQ(value(p, "--nhid"), "128");
  EXPECT_EQ(value(p, "--n_experts"), "3");
  EXPECT_EQ(value(p, "--epochs"), "10");
  EXPECT_EQ(p.finetune_epochs, 5);
  // The day plan is the afternoon plan's recipe at twice the width: only the sizes and the caps
  // differ.
  const ReproducePlan day = reproduce_plan("day");
  EXPECT_EQ(value(day, "--emsize"), "64");
  EXPECT_EQ(value(day, "--n_experts"), "5");
  EXPECT_EQ(value(day, "--epochs"), "12");
  for (const char* flag : {"--preset", "--dropout", "--dropouth", "--dropouti", "--dropoute",
                           "--wdrop", "--dropoutl", "--nonmono"})
    EXPECT_EQ(value(p, flag), value(day, flag)) << flag;
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

// A result names the commit its binary was built from (the Makefile records it at build time), not
// whatever the checkout holds when the binary runs (which may be a later commit).
TEST(ReproducePlan, TheCommitOfAResultIsTheBinarysOwn) {
  const std::string commit = source_commit();
  if (commit == "unknown" && !std::filesystem::exists(std::string(MOSGRAD_SOURCE_DIR) + "/.git"))
    GTEST_SKIP() << "built outside a git checkout";
  ASSERT_GE(commit.size(), 12u) << commit;
  for (size_t i = 0; i < 12; ++i)
    EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(commit[i]))) << commit;
  EXPECT_TRUE(commit.size() == 12 || commit.substr(12) == "+dirty") << commit;
}
