// The learning-curve plot refuses a damaged metrics file naming the file and the line, and a
// number out of its range naming the field too, and replaces only plots mosgrad drew (the plot's
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

namespace {

const char* kGoodRun =
    R"({"kind":"interval","epoch":1,"step":10,"tokens":1000,"loss":6.5,"ppl":665.142}
{"kind":"epoch","epoch":1,"step":20,"tokens":2000,"train_loss":6.2,"train_ppl":492.749,"val_loss":5.9,"val_ppl":365.037}
{"kind":"stats","epoch":1,"step":20,"tokens":2000,"grad_norm.decoder.bias":0.5,"sat_f.0":0.1,"act_std.0":0.2}
)";

}  // namespace

// A hand-edited number once drew a curves.svg with NaN coordinates over the good one: every number
// read is checked, and a bad one is an error naming the line and the field, with nothing written.
TEST(Metrics, PlotRefusesNumbersOutOfRangeAndKeepsTheGoodPlot) {
  MetricsDir d;
  const std::string path = d.file("metrics.jsonl"), svg_path = d.file("curves.svg");
  d.write("metrics.jsonl", kGoodRun);
  ASSERT_EQ(error_of([&] { mg::plot_learning_curves(path, svg_path); }), "");
  const std::string good_svg = mgtest::read_bytes(svg_path);
  const std::string good_health = mgtest::read_bytes(d.file("health_grad_norm.svg"));
  auto error_for = [&](const std::string& line) {
    d.write("metrics.jsonl", std::string(kGoodRun) + line + "\n");
    return error_of([&] { mg::plot_learning_curves(path, svg_path); });
  };
  const std::string at = path + ":4: ";
  for (const char* line : {R"({"kind":"epoch","tokens":3000,"val_loss":5.8,"val_ppl":1.7e308})",
                           R"({"kind":"epoch","tokens":3000,"val_ppl":1.7e308})"})
    EXPECT_HAS(error_for(line),
               at + "\"val_ppl\" is 1.7e+308, expected a perplexity in [1, 1e300]");
  EXPECT_HAS(error_for(R"({"kind":"epoch","tokens":3000,"val_loss":5.8,"val_ppl":999})"),
             at + "\"val_ppl\" is 999 but \"val_loss\" is 5.8, whose exp is 330.3");
  EXPECT_HAS(error_for(R"({"kind":"epoch","tokens":3000,"val_ppl":0})"), at + "\"val_ppl\" is 0");
  EXPECT_HAS(error_for(R"({"kind":"interval","tokens":3000,"ppl":-5})"), at + "\"ppl\" is -5");
  EXPECT_HAS(error_for(R"({"kind":"interval","tokens":3000,"loss":-1})"), at + "\"loss\" is -1");
  EXPECT_HAS(error_for(R"({"kind":"interval","tokens":-1,"ppl":300})"), at + "\"tokens\" is -1");
  EXPECT_HAS(error_for(R"({"kind":"interval","tokens":null,"ppl":300})"),
             at + "\"tokens\" is null");
  EXPECT_HAS(error_for(R"({"kind":"epoch","epoch":"one","tokens":3000,"val_ppl":300})"),
             at + "\"epoch\" is a string, expected a whole number >= 0");
  EXPECT_HAS(error_for(R"({"kind":"interval","step":-3,"tokens":3000,"ppl":300})"),
             at + "\"step\" is -3, expected a whole number >= 0");
  EXPECT_HAS(error_for(R"({"kind":"stats","step":2.5,"tokens":3000,"sat_f.0":0.5})"),
             at + "\"step\" is 2.5");
  EXPECT_HAS(error_for(R"({"kind":"stats","tokens":3000,"sat_f.0":1.5})"),
             at + "\"sat_f.0\" is 1.5");
  EXPECT_HAS(error_for(R"({"kind":"stats","tokens":3000,"grad_norm.decoder.bias":-2})"),
             at + "\"grad_norm.decoder.bias\" is -2");
  EXPECT_EQ(mgtest::read_bytes(svg_path), good_svg) << "the good plot was replaced";
  EXPECT_EQ(mgtest::read_bytes(d.file("health_grad_norm.svg")), good_health);
  // null is what the writer makes of NaN and infinity (a diverged run): not drawn, not refused.
  EXPECT_EQ(error_for(R"({"kind":"interval","tokens":3000,"loss":null,"ppl":null})"), "");
  EXPECT_EQ(mgtest::read_bytes(svg_path).find("nan"), std::string::npos);
}

// `plot` replaces only plots mosgrad drew: a file of someone else's at curves.svg or a health
// plot's name is refused, and then nothing is written at all.
TEST(Metrics, PlotReplacesOnlyItsOwnPlots) {
  MetricsDir d;
  const std::string path = d.file("metrics.jsonl"), svg_path = d.file("curves.svg");
  d.write("metrics.jsonl", kGoodRun);
  d.write("curves.svg", "<svg>my own figure</svg>\n");
  EXPECT_HAS(error_of([&] { mg::plot_learning_curves(path, svg_path); }),
             svg_path + " is there and is not a plot mosgrad drew");
  EXPECT_EQ(mgtest::read_bytes(svg_path), "<svg>my own figure</svg>\n");
  EXPECT_FALSE(fs::exists(d.file("health_grad_norm.svg"))) << "nothing written";
  fs::remove(svg_path);
  d.write("health_layers.svg", "mine");
  EXPECT_HAS(error_of([&] { mg::plot_learning_curves(path, svg_path); }),
             d.file("health_layers.svg") + " is there and is not a plot mosgrad drew");
  EXPECT_FALSE(fs::exists(svg_path)) << "nothing written";
  fs::remove(d.file("health_layers.svg"));
  fs::create_symlink(d.file("metrics.jsonl"), svg_path);
  EXPECT_HAS(error_of([&] { mg::plot_learning_curves(path, svg_path); }), "(it is a symlink)");
  fs::remove(svg_path);
  EXPECT_EQ(error_of([&] { mg::plot_learning_curves(path, svg_path); }), "");
  EXPECT_EQ(error_of([&] { mg::plot_learning_curves(path, svg_path); }), "") << "its own: redrawn";
}
