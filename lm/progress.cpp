#include "lm/progress.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <stdexcept>

#include "io/strf.h"

namespace mg {

namespace {

// 2650 -> "2,650": throughput is easier to read at a glance with separators.
std::string thousands(double v) {
  if (!std::isfinite(v)) return "?";
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// Blanks the bar line and returns the cursor to its start, so the next text starts clean.
void clear_bar(std::FILE* out, bool& open, size_t& width) {
  if (!open) return;
  std::fprintf(out, "\r%s\r", std::string(width, ' ').c_str());
  open = false;
  width = 0;
}

}  // namespace

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  // Round once, so 59.6s shows as 1m00s rather than 60s.
  const long long s = std::llround(seconds);
  if (s >= 3600) return strf("%lldh%02lldm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return strf("%lldm%02llds", s / 60, s % 60);
  return strf("%llds", s);
}

ProgressDisplay::ProgressDisplay(std::FILE* out, bool is_tty) : out_(out), tty_(is_tty) {
  if (!out_) throw std::runtime_error("ProgressDisplay: no output stream");
}

void ProgressDisplay::interval(const IntervalMetrics& m) {
  // The ETA extrapolates the current epoch's own pace: the pace since its first batch, not since
  // the run started, so warm-up or a slower earlier epoch does not skew it.
  if (m.epoch != eta_epoch_) {
    if (eta_epoch_ < 0 && m.epoch == 1) {
      // A first epoch starts at batch 0 at elapsed 0 (a run resumed inside it continues both).
      eta_batch_ = 0;
      eta_elapsed_s_ = 0;
    } else {
      // A run resumed in a later epoch: no earlier reference, so time from this interval on.
      eta_batch_ = m.batch;
      eta_elapsed_s_ = m.elapsed_s;
    }
    eta_epoch_ = m.epoch;
  }
  double eta = -1;
  if (m.batch > eta_batch_ && m.elapsed_s >= eta_elapsed_s_) {
    const double per_batch =
        (m.elapsed_s - eta_elapsed_s_) / static_cast<double>(m.batch - eta_batch_);
    eta = static_cast<double>(std::max<int64_t>(0, m.batches - m.batch)) * per_batch;
  }
  const double ppl = std::exp(m.loss);

  if (!tty_) {
    // One self-contained line per interval: logs from CI or nohup are read (and grepped) later.
    std::fprintf(out_,
                 "| epoch %" PRId64 " | %" PRId64 "/%" PRId64 " batches | step %" PRId64
                 " | lr %.4g | %s tok/s | loss %.2f | ppl %.1f | grad norm %.2f | ETA %s\n",
                 m.epoch, m.batch, m.batches, m.step, m.lr, thousands(m.tokens_per_s).c_str(),
                 m.loss, ppl, m.grad_norm, format_eta(eta).c_str());
    std::fflush(out_);
    return;
  }

  constexpr int kBarCells = 20;
  double frac = m.batches > 0 ? static_cast<double>(m.batch) / static_cast<double>(m.batches) : 0.0;
  frac = std::min(1.0, std::max(0.0, frac));
  const int filled = static_cast<int>(frac * kBarCells);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarCells) bar += '>';
  bar.resize(kBarCells, ' ');
  std::string line = strf("epoch %" PRId64 " [%s] %3d%%  %" PRId64 "/%" PRId64
                          "  %s tok/s  loss %.2f  ppl %.1f  ETA %s",
                          m.epoch, bar.c_str(), static_cast<int>(frac * 100), m.batch, m.batches,
                          thousands(m.tokens_per_s).c_str(), m.loss, ppl, format_eta(eta).c_str());
  const size_t width = line.size();
  // Spaces over whatever a longer previous bar left behind; \r alone does not erase.
  if (line.size() < bar_width_) line.append(bar_width_ - line.size(), ' ');
  bar_width_ = width;
  std::fprintf(out_, "\r%s", line.c_str());
  std::fflush(out_);
  bar_open_ = true;
}

void ProgressDisplay::epoch(const EpochMetrics& m) {
  // The summary replaces the bar: its figures are the epoch's final ones.
  clear_bar(out_, bar_open_, bar_width_);
  std::string line = strf(
      "| end of epoch %" PRId64 " | time %.1fs | train ppl %.1f | valid loss %.2f | valid ppl %.1f",
      m.epoch, m.epoch_s, std::exp(m.train_loss), m.val_loss, std::exp(m.val_loss));
  if (!m.optimizer.empty()) line += " | " + m.optimizer;
  if (m.best) line += " | saved best";
  // Rules above and below, as in the AWD-LSTM logs, so epoch ends stand out among interval lines.
  const std::string rule(line.size(), '-');
  std::fprintf(out_, "%s\n%s\n%s\n", rule.c_str(), line.c_str(), rule.c_str());
  std::fflush(out_);
  // The next epoch's timing starts where this one ended (its elapsed includes validation).
  eta_epoch_ = m.epoch + 1;
  eta_batch_ = 0;
  eta_elapsed_s_ = m.elapsed_s;
}

void ProgressDisplay::message(const std::string& line) {
  clear_bar(out_, bar_open_, bar_width_);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  // Keeps the last bar on screen (where an interrupted run stopped) and ends its line.
  if (bar_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  bar_open_ = false;
  bar_width_ = 0;
}

}  // namespace mg
