// The learning-curve plot refuses a damaged metrics file naming the file and the line (the plot's
// other tests are in tests/lm/test_metrics.cpp, beside the writer whose output it reads).
#include <gtest/gtest.h>

#include <filesystem>

#include "lm/learning_curves.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using mgtest::error_of;
using MetricsDir = mgtest::TempDir;

TEST(Metrics, PlotErrorsNameFileAndLine) {
  MetricsDir d;
  const std::string path = d.file("bad.jsonl");
  const std::string svg_path = d.file("bad.svg");
  auto error_for = [&](const std::string& text) {
    d.write("bad.jsonl", text);
    return error_of([&] { mg::plot_learning_curves(path, svg_path); });
  };
  const std::string good = R"({"kind":"interval","tokens":1000,"ppl":400})"
                           "\n";
  std::string err = error_for(good + good +
                              R"({"kind":"interval","tokens":3000,"ppl":})"
                              "\n");
  EXPECT_NE(err.find(path + ":3: "), std::string::npos) << err;
  EXPECT_NE(err.find("\"ppl\""), std::string::npos) << err;
  err = error_for(good + "\n" +
                  R"({"kind":"interval","tokens":1000,"ppl":400)"
                  "\n");
  EXPECT_NE(err.find(path + ":3: "), std::string::npos) << err;
  err = error_for(R"({"kind":"interval","ppl":400})"
                  "\n");
  EXPECT_NE(err.find(path + ":1: "), std::string::npos) << err;
  EXPECT_NE(err.find("tokens"), std::string::npos) << err;
  err = error_for(R"({"kind":"interval","tokens":"many","ppl":400})"
                  "\n");
  EXPECT_NE(err.find(path + ":1: "), std::string::npos) << err;
  err = error_for(good + "not json\n");
  EXPECT_NE(err.find(path + ":2: "), std::string::npos) << err;
  err = error_for(R"({"kind":"interval","tokens":1000,"ppl":400} trailing)"
                  "\n");
  EXPECT_NE(err.find(path + ":1: "), std::string::npos) << err;
  // The same line without its newline is what a crash mid-write leaves: skipped, not an error of
  // its own (here nothing is left to plot).
  err = error_for(R"({"kind":"interval","tokens":1000,"ppl":400} trailing)");
  EXPECT_NE(err.find("has no metrics lines"), std::string::npos) << err;
  err = error_for("\n\n");
  EXPECT_NE(err.find(path), std::string::npos) << err;  // empty
  EXPECT_FALSE(fs::exists(svg_path));
  EXPECT_TRUE(mgtest::temporaries_of(svg_path).empty());

  const std::string missing = d.file("missing.jsonl");
  err = error_of([&] { mg::plot_learning_curves(missing, svg_path); });
  EXPECT_NE(err.find(missing), std::string::npos) << err;
}
