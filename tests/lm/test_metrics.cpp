// The metrics file (lm/metrics.h): JSONL lines that read back to what was written, the progress
// display (lm/progress.h) in both its terminal and its log-file form, and the learning-curve SVG
// (lm/learning_curves.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lm/learning_curves.h"
#include "lm/metrics.h"
#include "lm/progress.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

using MetricsDir = mgtest::TempDir;

std::string read_all(const std::string& path) {
  return mgtest::read_bytes(path);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

// The raw text of a field's value in a flat JSON line ("" when absent): enough to check what the
// writer wrote without a JSON library.
std::string raw_field(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = line.find(needle);
  if (at == std::string::npos) return "";
  size_t begin = at + needle.size(), end = begin;
  if (line[begin] == '"')
    end = line.find('"', begin + 1) + 1;
  else
    end = line.find_first_of(",}", begin);
  return line.substr(begin, end - begin);
}

double num_field(const std::string& line, const std::string& key) {
  const std::string raw = raw_field(line, key);
  EXPECT_FALSE(raw.empty()) << "no " << key << " in " << line;
  return std::strtod(raw.c_str(), nullptr);
}

// Everything printed to a tmpfile() so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  int c;
  while ((c = std::fgetc(f)) != EOF) out += static_cast<char>(c);
  return out;
}

using mgtest::error_of;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
    ++n;
  return n;
}

mg::IntervalMetrics interval(int64_t epoch, int64_t batch, int64_t batches, int64_t tokens,
                             double loss, double elapsed) {
  mg::IntervalMetrics m;
  m.epoch = epoch;
  m.step = batch;
  m.batch = batch;
  m.batches = batches;
  m.tokens = tokens;
  m.loss = loss;
  m.lr = 20;
  m.tokens_per_s = 2650.1;
  m.elapsed_s = elapsed;
  m.grad_norm = 0.61;
  return m;
}

mg::EpochMetrics epoch_end(int64_t epoch, int64_t tokens, double train_loss, double val_loss,
                           double elapsed, bool best) {
  mg::EpochMetrics m;
  m.epoch = epoch;
  m.step = 1327 * epoch;
  m.tokens = tokens;
  m.train_loss = train_loss;
  m.val_loss = val_loss;
  m.elapsed_s = elapsed;
  m.epoch_s = 350.2;
  m.optimizer = "sgd";
  m.best = best;
  return m;
}

}  // namespace

// ---------------------------------------------------------------- MetricsWriter

TEST(Metrics, WriterLinesReadBack) {
  MetricsDir d;
  const std::string path = d.file("metrics.jsonl");
  {
    mg::MetricsWriter w(path);
    EXPECT_EQ(w.path(), path);
    w.write(interval(1, 200, 1327, 140000, 5.12, 52.8));
    w.write(epoch_end(1, 929000, 5.3, 4.9, 350.2, true));
  }
  const auto lines = lines_of(read_all(path));
  ASSERT_EQ(lines.size(), 2u);
  const std::string& a = lines[0];
  EXPECT_EQ(
      a.rfind("{\"kind\":\"interval\",\"epoch\":1,\"step\":200,\"batch\":200,\"tokens\":140000,",
              0),
      0u)
      << a;
  EXPECT_EQ(a.back(), '}');
  EXPECT_DOUBLE_EQ(num_field(a, "loss"), 5.12);
  EXPECT_NEAR(num_field(a, "ppl"), std::exp(5.12), std::exp(5.12) * 1e-5);
  EXPECT_DOUBLE_EQ(num_field(a, "lr"), 20);
  EXPECT_DOUBLE_EQ(num_field(a, "tok_per_s"), 2650.1);
  EXPECT_DOUBLE_EQ(num_field(a, "elapsed_s"), 52.8);
  EXPECT_DOUBLE_EQ(num_field(a, "grad_norm"), 0.61);

  const std::string& b = lines[1];
  EXPECT_EQ(raw_field(b, "kind"), "\"epoch\"");
  EXPECT_EQ(num_field(b, "epoch"), 1);
  EXPECT_EQ(num_field(b, "step"), 1327);
  EXPECT_EQ(num_field(b, "tokens"), 929000);
  EXPECT_DOUBLE_EQ(num_field(b, "train_loss"), 5.3);
  EXPECT_NEAR(num_field(b, "train_ppl"), std::exp(5.3), std::exp(5.3) * 1e-5);
  EXPECT_DOUBLE_EQ(num_field(b, "val_loss"), 4.9);
  EXPECT_NEAR(num_field(b, "val_ppl"), std::exp(4.9), std::exp(4.9) * 1e-5);
  EXPECT_DOUBLE_EQ(num_field(b, "elapsed_s"), 350.2);
  EXPECT_DOUBLE_EQ(num_field(b, "epoch_s"), 350.2);
  EXPECT_EQ(raw_field(b, "optimizer"), "\"sgd\"");
  EXPECT_EQ(raw_field(b, "best"), "true");
}

TEST(Metrics, WriterAppendsOnReopen) {
  MetricsDir d;
  const std::string path = d.file("metrics.jsonl");
  { mg::MetricsWriter(path).write(interval(1, 200, 1327, 140000, 5.12, 52.8)); }
  {
    mg::MetricsWriter w(path);  // a resumed run
    w.write(interval(1, 400, 1327, 280000, 5.0, 105.0));
    // Flushed per line: readable before the writer closes.
    EXPECT_EQ(lines_of(read_all(path)).size(), 2u);
  }
  const auto lines = lines_of(read_all(path));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(num_field(lines[0], "step"), 200);
  EXPECT_EQ(num_field(lines[1], "step"), 400);
}

// A run folder copied with hard links (cp -al) shares its metrics file with the original: the
// resumed copy's lines go into its own file only, the original's history stays as it was.
TEST(Metrics, AResumedCopyMadeWithHardLinksAppendsToItsOwnFile) {
  MetricsDir d;
  const std::string original = d.file("metrics.jsonl"), copy = d.file("copy.jsonl");
  { mg::MetricsWriter(original).write(interval(1, 200, 1327, 140000, 5.12, 52.8)); }
  std::filesystem::create_hard_link(original, copy);
  const std::string before = read_all(original);
  {
    mg::MetricsWriter w(copy);
    w.write(interval(1, 400, 1327, 280000, 5.0, 105.0));
  }
  EXPECT_EQ(read_all(original), before);
  EXPECT_EQ(std::filesystem::hard_link_count(original), 1u);
  const auto lines = lines_of(read_all(copy));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(num_field(lines[0], "step"), 200);
  EXPECT_EQ(num_field(lines[1], "step"), 400);
}

TEST(Metrics, WriterNonFiniteIsNullAndErrorsNameTheFile) {
  MetricsDir d;
  const std::string path = d.file("metrics.jsonl");
  {
    mg::MetricsWriter w(path);
    w.write(interval(1, 200, 1327, 140000, NAN, 52.8));  // a diverged run
    w.write(interval(1, 400, 1327, 280000, 800, 60));    // exp overflows
  }
  const auto lines = lines_of(read_all(path));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(raw_field(lines[0], "loss"), "null");
  EXPECT_EQ(raw_field(lines[0], "ppl"), "null");
  EXPECT_EQ(raw_field(lines[1], "loss"), "800");
  EXPECT_EQ(raw_field(lines[1], "ppl"), "null");

  const std::string bad = d.file("no/such/dir/metrics.jsonl");
  const std::string err = error_of([&] { mg::MetricsWriter w(bad); });
  EXPECT_NE(err.find(bad), std::string::npos) << err;
}

// ---------------------------------------------------------------- ProgressDisplay

TEST(Metrics, EtaFormatting) {
  EXPECT_EQ(mg::format_eta(0), "0s");
  EXPECT_EQ(mg::format_eta(35), "35s");
  EXPECT_EQ(mg::format_eta(59.6), "1m00s");  // rounded once, never "60s"
  EXPECT_EQ(mg::format_eta(252), "4m12s");
  EXPECT_EQ(mg::format_eta(3599.7), "1h00m");
  EXPECT_EQ(mg::format_eta(3720), "1h02m");
  EXPECT_EQ(mg::format_eta(26 * 3600 + 5 * 60), "26h05m");
  EXPECT_EQ(mg::format_eta(-1), "--");
  EXPECT_EQ(mg::format_eta(NAN), "--");
  EXPECT_EQ(mg::format_eta(INFINITY), "--");
}

TEST(Metrics, PlainDisplayOneLinePerInterval) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  mg::ProgressDisplay p(f, /*is_tty=*/false);
  // 100 of 1100 batches in 25.2 s: 1000 more at 0.252 s each.
  p.interval(interval(1, 100, 1100, 70000, 5.12, 25.2));
  p.interval(interval(1, 200, 1100, 140000, 5.0, 50.4));
  p.epoch(epoch_end(1, 770000, 5.3, 4.9, 300, true));
  // Epoch 2 is timed from the end of epoch 1: 100 batches in 10 s, 1000 left.
  p.interval(interval(2, 100, 1100, 840000, 4.8, 310));
  p.message("saved checkpoint");
  p.finish();
  const std::string out = contents(f);
  std::fclose(f);

  EXPECT_EQ(out.find('\r'), std::string::npos);
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 7u) << out;  // 2 intervals, rule + summary + rule, 1 interval, 1 message
  EXPECT_NE(lines[0].find("| epoch 1 | 100/1100 batches"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("2,650 tok/s"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("loss 5.12"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("ppl 167.3"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("ETA 4m12s"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("ETA 3m47s"), std::string::npos) << lines[1];  // 900 * 0.252
  EXPECT_EQ(lines[2], std::string(lines[3].size(), '-'));
  EXPECT_EQ(lines[3],
            "| end of epoch 1 | time 350.2s | train ppl 200.3 | valid loss 4.90 | valid ppl 134.3 "
            "| sgd | saved best");
  EXPECT_EQ(lines[4], lines[2]);
  EXPECT_NE(lines[5].find("| epoch 2 |"), std::string::npos) << lines[5];
  EXPECT_NE(lines[5].find("ETA 1m40s"), std::string::npos) << lines[5];
  EXPECT_EQ(lines[6], "saved checkpoint");
}

TEST(Metrics, TtyDisplayRedrawsInPlace) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  mg::ProgressDisplay p(f, /*is_tty=*/true);
  p.interval(interval(1, 663, 1327, 464100, 5.12, 0));
  p.interval(interval(1, 1327, 1327, 928900, 5.0, 0));
  const std::string bars = contents(f);
  std::fseek(f, 0, SEEK_END);
  EXPECT_EQ(count(bars, "\r"), 2u) << bars;
  EXPECT_EQ(bars.find('\n'), std::string::npos) << "a bar line must stay open";
  EXPECT_NE(
      bars.find("epoch 1 [=========>          ]  49%  663/1327  2,650 tok/s  loss 5.12  ppl 167.3"),
      std::string::npos)
      << bars;
  EXPECT_NE(bars.find("[====================] 100%"), std::string::npos) << bars;
  EXPECT_LT(bars.size() / 2, 100u);  // each bar fits a 100-column terminal

  p.epoch(epoch_end(1, 928900, 5.3, 4.9, 350.2, false));
  p.interval(interval(2, 10, 1327, 935900, 4.9, 355));
  p.message("note");
  p.interval(interval(2, 20, 1327, 942900, 4.9, 360));
  p.finish();
  p.finish();  // nothing open: no extra blank line
  const std::string out = contents(f);
  std::fclose(f);
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 5u) << out;
  // The summary starts on a cleared line: only spaces between the last \r and the rule.
  const std::string rule_line = lines[0].substr(lines[0].rfind('\r') + 1);
  EXPECT_EQ(rule_line, std::string(rule_line.size(), '-'));
  EXPECT_EQ(
      lines[1],
      "| end of epoch 1 | time 350.2s | train ppl 200.3 | valid loss 4.90 | valid ppl 134.3 | sgd");
  EXPECT_EQ(lines[3].substr(lines[3].rfind('\r') + 1), "note");
  EXPECT_NE(lines[4].find("epoch 2 ["), std::string::npos) << lines[4];
  // finish ended the last bar's line, once
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out[out.size() - 2], '\n');
  EXPECT_NE(lines[4].find("ETA 10m40s"), std::string::npos) << lines[4];  // 1307 * 0.49 s
}

// ---------------------------------------------------------------- plot

namespace {

const char* kSmallRun =
    R"({"kind":"interval","epoch":1,"step":200,"batch":200,"tokens":140000,"loss":6.5,"ppl":665.1,"lr":20,"tok_per_s":2650.1,"elapsed_s":52.8,"grad_norm":0.61}
{"kind":"interval","epoch":1,"step":400,"batch":400,"tokens":280000,"loss":5.8,"ppl":330.3,"lr":20,"tok_per_s":2650.1,"elapsed_s":105.6,"grad_norm":0.5}
{"kind":"epoch","epoch":1,"step":600,"tokens":420000,"train_loss":5.9,"train_ppl":365.0,"val_loss":5.4,"val_ppl":221.4,"elapsed_s":170,"epoch_s":170,"optimizer":"sgd","best":true}

  {"kind": "interval", "epoch": 2, "step": 800, "batch": 200, "tokens": 560000, "loss": 5.3, "ppl": 200.3}
{"kind":"interval","epoch":2,"step":1000,"batch":400,"tokens":700000,"loss":5.1,"ppl":164.0}
{"kind":"epoch","epoch":2,"step":1200,"tokens":840000,"val_loss":4.9,"val_ppl":134.3,"optimizer":"sgd","best":true}
)";

}  // namespace

TEST(Metrics, PlotWritesSvg) {
  MetricsDir d;
  d.write("metrics.jsonl", kSmallRun);
  const std::string svg_path = d.file("curves.svg");
  mg::plot_learning_curves(d.file("metrics.jsonl"), svg_path, "PTB <small> & \"quick\"");
  const std::string svg = read_all(svg_path);
  EXPECT_TRUE(mgtest::temporaries_of(svg_path).empty());
  ASSERT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 80);
  EXPECT_EQ(svg.substr(svg.find_last_not_of(" \n") - 5, 6), "</svg>");
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<polyline class=\"train\""), 1u);
  EXPECT_EQ(count(svg, "<polyline class=\"val\""), 1u);
  EXPECT_NE(svg.find("training (per interval)"), std::string::npos);
  EXPECT_NE(svg.find("validation (per epoch)"), std::string::npos);
  EXPECT_NE(svg.find("PTB &lt;small&gt; &amp; &quot;quick&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<small>"), std::string::npos);
  EXPECT_NE(svg.find(">200k<"), std::string::npos);  // token ticks
  EXPECT_NE(svg.find(">500<"), std::string::npos);   // perplexity ticks, log scale
  EXPECT_NE(svg.find(">200<"), std::string::npos);
  EXPECT_NE(svg.find("training tokens"), std::string::npos);
  EXPECT_NE(svg.find("perplexity (log scale)"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  // The validation curve has a marker per epoch (plus the one in the legend).
  EXPECT_EQ(count(svg, "<circle"), 3u);

  // Replaced in place on a second run.
  mg::plot_learning_curves(d.file("metrics.jsonl"), svg_path);
  EXPECT_NE(read_all(svg_path).find("Learning curves: metrics.jsonl"), std::string::npos);
}

TEST(Metrics, PlotDegenerateInputs) {
  MetricsDir d;
  // Only interval lines: one series, no validation legend entry.
  d.write("a.jsonl", R"({"kind":"interval","tokens":1000,"loss":6.0,"ppl":403.4}
{"kind":"interval","tokens":2000,"loss":5.5,"ppl":244.7}
)");
  mg::plot_learning_curves(d.file("a.jsonl"), d.file("a.svg"));
  std::string svg = read_all(d.file("a.svg"));
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(svg.find("validation (per epoch)"), std::string::npos);
  EXPECT_NE(svg.find(">2k<"), std::string::npos);

  // One point at zero tokens, one null (diverged) line: no division by zero anywhere.
  d.write("b.jsonl", R"({"kind":"interval","tokens":0,"loss":6.0,"ppl":403.4}
{"kind":"interval","tokens":100,"loss":null,"ppl":null}
)");
  mg::plot_learning_curves(d.file("b.jsonl"), d.file("b.svg"));
  svg = read_all(d.file("b.svg"));
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_GE(count(svg, "<circle"), 1u);  // a lone point is drawn as a dot

  // A single epoch line only.
  d.write("c.jsonl", R"({"kind":"epoch","tokens":5000,"train_loss":5.0,"val_loss":4.8})"
                     "\n");
  mg::plot_learning_curves(d.file("c.jsonl"), d.file("c.svg"));
  svg = read_all(d.file("c.svg"));
  EXPECT_EQ(count(svg, "<polyline"), 2u);  // validation, and training from the epoch's train loss
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(Metrics, PlotOfWriterOutput) {
  MetricsDir d;
  const std::string path = d.file("metrics.jsonl");
  {
    mg::MetricsWriter w(path);
    for (int e = 1; e <= 3; ++e) {
      for (int b = 1; b <= 5; ++b)
        w.write(interval(e, b * 100, 500, (e - 1) * 350000 + b * 70000, 6.5 - 0.3 * e - 0.05 * b,
                         10.0 * b));
      w.write(epoch_end(e, e * 350000, 6.4 - 0.3 * e, 5.5 - 0.25 * e, 60.0 * e, true));
    }
  }
  mg::plot_learning_curves(path, d.file("run.svg"), "writer round trip");
  const std::string svg = read_all(d.file("run.svg"));
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<circle"), 4u);  // 3 epochs + legend
  EXPECT_NE(svg.find(">1M<"), std::string::npos);
}
