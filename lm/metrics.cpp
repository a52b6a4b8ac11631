#include "lm/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/file_ops.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/regular_file.h"
#include "io/strf.h"

namespace mg {

namespace {

// JSON has no NaN or infinity (a diverged run has both), so those become null, which the plot
// skips.
std::string json_num(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  return strf("%.*g", digits, v);
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  // Append: a resumed run continues the same file, so one plot shows the whole history. (Appending
  // line by line, not io/atomic_file.h: each line is written whole or cut back off, and rewriting
  // the whole file per line would cost O(n^2).) O_NOFOLLOW: a symlink at the name is refused; a
  // FIFO or a device there is refused too, never waited on (io/regular_file.h).
  if (path.empty()) return;  // writes nothing (the processes but rank 0 of an mpirun)
  // A file with other names (a run folder copied with cp -al): appending would write this run's
  // lines into the other folder's history too. This name gets a file of its own first, holding
  // the same lines (the atomic save puts a new file at the name; the other names keep theirs).
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
    write_file_atomically(path, read_file(path, "metrics file"));
  fd_ =
      open_regular_to_write(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0644, "metrics file");
  if (fd_ < 0)
    throw std::runtime_error(
        "cannot open metrics file '" + path + "': " + std::strerror(errno) +
        (errno == ELOOP ? " (it is a symlink; mosgrad never writes through one: remove it)" : ""));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) file_ops::close(fd_);
}

// The line and its newline in one write; if the disk fills part-way, the part that got out is cut
// off again, so the file ends with a whole line whatever happened.
void MetricsWriter::write_line(const std::string& line) {
  if (fd_ < 0) return;  // the writer of no file
  const std::string whole = line + "\n";
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    throw std::runtime_error("cannot write metrics file '" + path_ + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < whole.size()) {
    const ssize_t n = file_ops::write(fd_, whole.data() + done, whole.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Cut back what got out; should even that fail, mosgrad plot skips a torn last line.
      if (done > 0) (void)!file_ops::ftruncate(fd_, st.st_size);
      throw std::runtime_error("cannot write metrics file '" + path_ + "': " + std::strerror(err) +
                               " (the file keeps its whole lines)");
    }
    done += static_cast<size_t>(n);
  }
}

std::string set_aside_old_metrics(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code e;
  if (!fs::exists(fs::symlink_status(path, e)) || fs::is_symlink(fs::symlink_status(path, e)))
    return "";  // nothing there, or a symlink, which the writer refuses with its own message
  if (fs::file_size(path, e) == 0 || e) return "";
  for (int n = 1;; ++n) {
    const std::string aside = path + "." + std::to_string(n);
    if (fs::exists(fs::symlink_status(aside, e))) continue;
    if (file_ops::rename(path, aside) != 0)
      throw std::runtime_error("cannot move the earlier records of '" + path + "' aside to '" +
                               aside + "': " + std::strerror(errno));
    return aside;
  }
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
  write_line(s);
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
  write_line(s);
}

void MetricsWriter::write(const StatsMetrics& m) {
  std::string s = "{\"kind\":\"stats\"";
  s += strf(",\"epoch\":%" PRId64 ",\"step\":%" PRId64 ",\"tokens\":%" PRId64, m.epoch, m.step,
            m.tokens);
  for (const StatsMetrics::Param& p : m.params)
    s += ",\"grad_norm." + p.name + "\":" + json_num(p.grad_norm) + ",\"update_ratio." + p.name +
         "\":" + json_num(p.update_ratio);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const StatsMetrics::Layer& y = m.layers[l];
    const std::string n = "." + std::to_string(l);
    s += ",\"act_mean" + n + "\":" + json_num(y.mean) + ",\"act_std" + n + "\":" + json_num(y.std);
    if (y.gates)
      for (int g = 0; g < 4; ++g)
        s += ",\"sat_" + std::string(1, "ifgo"[g]) + n + "\":" + json_num(y.saturated[g]);
  }
  write_line(s + "}");
}

void drop_records_after(const std::string& path, int64_t step) {
  std::error_code e;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(path, e)))
    throw std::runtime_error("metrics file '" + path +
                             "' is a symlink; mosgrad never writes through one: remove it");
  if (!std::filesystem::exists(path, e)) return;
  // Through read_file, which refuses a FIFO or a device rather than wait on it or read it forever.
  const std::string text = read_file(path, "metrics file");
  // A last line without its newline is what a kill mid-write leaves: dropped when it does not
  // parse, and when it does, the file is rewritten too, so that the next record is not appended
  // onto it. Any other line that does not parse was not written so by mosgrad (every line goes
  // out whole): it is someone's, and is refused, not dropped unseen.
  bool dropped = !text.empty() && text.back() != '\n';
  std::string kept;
  size_t line_no = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    const bool unterminated = end == std::string::npos;
    if (unterminated) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1, ++line_no;
    bool past = false;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {  // a blank line: no record
      kept += line + "\n";
      continue;
    }
    try {
      const JsonValue record = parse_json(line);
      const JsonValue* s = record.find("step");
      past = s && s->kind == JsonValue::Number && s->number > static_cast<double>(step);
    } catch (const std::exception& e) {
      if (!unterminated)
        throw std::runtime_error(
            "metrics file " + path + ":" + std::to_string(line_no) + ": not a metrics record (" +
            e.what() +
            "); mosgrad writes each line whole, so this one was changed after it was written: "
            "correct or remove it, then resume (nothing was changed)");
      past = true;
    }
    if (past)
      dropped = true;
    else
      kept += line + "\n";
  }
  if (dropped) write_file_atomically(path, kept);
}

bool stop_validated(const std::string& path, int64_t step) {
  std::error_code e;
  if (!std::filesystem::exists(path, e)) return false;
  std::istringstream in(read_file(path, "metrics file"));  // a FIFO or a device: refused
  for (std::string line; std::getline(in, line);) {
    try {
      const JsonValue record = parse_json(line);
      const JsonValue *kind = record.find("kind"), *s = record.find("step"),
                      *at_stop = record.find("at_stop");
      if (kind && kind->kind == JsonValue::String && kind->str == "epoch" && s &&
          s->kind == JsonValue::Number && s->number == static_cast<double>(step) && at_stop &&
          at_stop->kind == JsonValue::Bool && at_stop->boolean)
        return true;
    } catch (const std::exception&) {  // a torn line: not that record
    }
  }
  return false;
}

}  // namespace mg
