#include "lm/metrics.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/strf.h"

namespace mg {

namespace {

// JSON has no NaN or infinity (a diverged run has both), so those become null, which the plot
// skips.
std::string json_num(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  return strf("%.*g", digits, v);
}

// One line, flushed at once so a crash or Ctrl-C loses at most the line being written.
void write_line(std::FILE* f, const std::string& path, const std::string& line) {
  errno = 0;
  if (std::fputs(line.c_str(), f) < 0 || std::fputc('\n', f) == EOF || std::fflush(f) != 0)
    throw std::runtime_error("cannot write metrics file '" + path +
                             "': " + (errno ? std::strerror(errno) : "write error"));
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  // Append: a resumed run continues the same file, so one plot shows the whole history. (Appending
  // line by line, not io/atomic_file.h: each flushed line is already whole or absent after a crash,
  // and rewriting the whole file per line would cost O(n^2).)
  file_ = std::fopen(path.c_str(), "a");
  if (!file_)
    throw std::runtime_error("cannot open metrics file '" + path + "': " + std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const IntervalMetrics& m) {
  std::string s = "{\"kind\":\"interval\"";
  s += strf(",\"epoch\":%" PRId64 ",\"step\":%" PRId64 ",\"batch\":%" PRId64 ",\"tokens\":%" PRId64,
            m.epoch, m.step, m.batch, m.tokens);
  s += ",\"loss\":" + json_num(m.loss) + ",\"ppl\":" + json_num(std::exp(m.loss));
  s += ",\"lr\":" + json_num(m.lr) + ",\"tok_per_s\":" + json_num(m.tokens_per_s);
  // Elapsed keeps more digits: after a day of training %.6g would round to whole seconds.
  s += ",\"elapsed_s\":" + json_num(m.elapsed_s, 9) + ",\"grad_norm\":" + json_num(m.grad_norm) +
       "}";
  write_line(file_, path_, s);
}

void MetricsWriter::write(const EpochMetrics& m) {
  std::string s = "{\"kind\":\"epoch\"";
  s += strf(",\"epoch\":%" PRId64 ",\"step\":%" PRId64 ",\"tokens\":%" PRId64, m.epoch, m.step,
            m.tokens);
  s += ",\"train_loss\":" + json_num(m.train_loss) +
       ",\"train_ppl\":" + json_num(std::exp(m.train_loss));
  s += ",\"val_loss\":" + json_num(m.val_loss) + ",\"val_ppl\":" + json_num(std::exp(m.val_loss));
  s += ",\"elapsed_s\":" + json_num(m.elapsed_s, 9) + ",\"epoch_s\":" + json_num(m.epoch_s, 9);
  s += ",\"optimizer\":" + json_string(m.optimizer) + ",\"best\":" + (m.best ? "true" : "false");
  s += std::string(m.at_stop ? ",\"at_stop\":true" : "") + "}";
  write_line(file_, path_, s);
}

void drop_records_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    bool past = false;
    try {
      const JsonValue record = parse_json(line);
      const JsonValue* s = record.find("step");
      past = s && s->kind == JsonValue::Number && s->number > static_cast<double>(step);
    } catch (const std::exception&) {  // a torn last line from a kill: not a record, drop it too
      past = true;
    }
    if (past)
      dropped = true;
    else
      kept += line + "\n";
  }
  in.close();
  if (dropped) write_file_atomically(path, kept);
}

}  // namespace mg
