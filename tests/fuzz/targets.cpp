#include "tests/fuzz/targets.h"

#include <cmath>
#include <memory>
#include <stdexcept>
#include <utility>

#include "cli/commands.h"
#include "io/crc32.h"
#include "io/json.h"
#include "io/little_endian.h"
#include "lm/corpus.h"
#include "lm/learning_curves.h"
#include "lm/model_io.h"
#include "lm/train_state.h"
#include "tensor/allocator.h"
#include "tests/fuzz/model_seeds.h"

namespace mgfuzz {

namespace {

[[noreturn]] void broken(const std::string& what) {
  throw std::logic_error("fuzz invariant broken: " + what);
}

std::string bytes_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace

// The errors a reader is allowed to throw carry a message for the user.
void expect_clear_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
}

namespace {
// A reader must refuse a file that claims more than it holds before it allocates for the claim.
// The allocator turns a failed allocation into a runtime_error, a clear error that would hide the
// bug here, and a claim within the machine's memory would be granted. So no call may hold more
// than this at once: the inputs are at most 64 KB and the models they can describe are tiny. (What
// is seen is the allocator's peak, so a claim below the process's earlier peak passes unseen; the
// claims of a crafted header are terabytes.)
constexpr int64_t kMemoryBudget = int64_t{256} << 20;

void within_memory_budget(const std::function<void()>& f) {
  const mg::AllocatorStats before = mg::allocator_stats();
  f();
  const mg::AllocatorStats after = mg::allocator_stats();
  const int64_t held = after.peak_live_bytes - before.live_bytes;
  if (after.peak_live_bytes > before.peak_live_bytes && held > kMemoryBudget)
    broken("the reader asked for " + std::to_string(held) + " bytes of tensors at once (budget " +
           std::to_string(kMemoryBudget) + ")");
}

// Each tensor a reader returns holds what its shape says: sizes whose product wraps around (2^32 x
// 2^32 x 16 is 0 in 64 bits) would give a tensor that claims 2^68 values and holds none.
void check_shapes(const mg::NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    long double n = 1;
    for (const int64_t d : t.shape()) n *= static_cast<long double>(d);
    if (!t.defined() || n != static_cast<long double>(t.numel()))
      broken("tensor " + name + " of shape " + mg::shape_str(t.shape()) + " holds " +
             std::to_string(t.defined() ? t.numel() : 0) + " values");
  }
}

// The bytes with the checkpoint header's CRC-32 rewritten to match the payload.
std::string with_valid_crc(std::string bytes) {
  constexpr size_t kHeader = 28, kCrcAt = 24;  // io/checkpoint.h
  if (bytes.size() >= kHeader) {
    std::string crc;
    mg::put_le32(crc, mg::crc32(bytes.data() + kHeader, bytes.size() - kHeader));
    bytes.replace(kCrcAt, 4, crc);
  }
  return bytes;
}
}  // namespace

void checkpoint(const uint8_t* data, size_t size) {
  const std::string bytes = with_valid_crc(bytes_of(data, size));
  within_memory_budget([&] {
    expect_clear_error([&] {
      const mg::Checkpoint ck = mg::parse_checkpoint(bytes, "fuzz.ckpt");
      check_shapes(ck.tensors);
      const mg::LoadedModel lm = mg::model_from_checkpoint(ck);
      if (lm.model->parameter_count() != lm.model->config.parameter_count())
        broken("parameter count");
    });
  });
}

void safetensors(const uint8_t* data, size_t size) {
  within_memory_budget([&] {
    expect_clear_error([&] {
      const mg::SafetensorsFile file =
          mg::parse_safetensors(bytes_of(data, size), "fuzz.safetensors");
      check_shapes(file.tensors);
      const mg::LoadedModel lm = mg::model_from_safetensors(file, "fuzz.safetensors");
      if (!lm.vocab.words().empty() && lm.vocab.size() != lm.model->config.ntoken)
        broken("vocabulary size");
    });
  });
}

void corpus(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  const size_t split = bytes.find('\xff');
  const std::string train = bytes.substr(0, split),
                    valid = split == std::string::npos ? "" : bytes.substr(split + 1);
  expect_clear_error([&] {
    mg::Vocab vocab;
    const std::vector<int64_t> train_ids = mg::tokenize_text(train, "fuzz.train.txt", vocab, true);
    int64_t unknown = -1;
    const std::vector<int64_t> valid_ids =
        mg::tokenize_text(valid, "fuzz.valid.txt", vocab, false, &unknown);
    for (const auto* ids : {&train_ids, &valid_ids})
      for (int64_t id : *ids)
        if (id < 0 || id >= vocab.size())
          broken("id " + std::to_string(id) + " outside the vocabulary");
    if (unknown < 0 || unknown > static_cast<int64_t>(valid_ids.size())) broken("unknown count");
  });
}

void flags(const uint8_t* data, size_t size) {
  // In this order, so the committed inputs keep their commands (data[0] picks one).
  static const std::vector<std::string> commands = {
      "train", "finetune",        "eval",    "dyneval",  "generate", "export", "import",
      "rank",  "bottleneck-demo", "pointer", "gradcheck"};
  if (size == 0) return;
  const std::string command = commands[data[0] % commands.size()];
  std::vector<std::string> words = {"mosgrad", command};
  std::string word;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0)
      words.push_back(word), word.clear();
    else
      word += static_cast<char>(data[i]);
  }
  if (!word.empty()) words.push_back(word);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  const int argc = static_cast<int>(argv.size());
  expect_clear_error([&] {
    const mg::CommandLine c = mg::parse_command(argc, argv.data());
    if (command == "train" || command == "finetune") {
      const mg::TrainConfig& cfg = c.train;
      // Every size accepted must keep the model's size computable without overflow (UBSan checks).
      mg::ModelConfig m = cfg.model;
      m.ntoken = int64_t{1} << 24;  // the largest vocabulary the loaders accept
      if (m.parameter_count() <= 0) broken("parameter count of " + m.summary());
      if (cfg.batch_size < 1 || cfg.bptt < 1 || cfg.log_interval < 1)
        broken("a size below 1 was accepted");
      // A rate is checked against [0, 1) as the float it is stored in: 0.99999999999 passes as a
      // double but is 1 as a float, which drops every unit (1/(1 - p) = inf) and which the model
      // loader refuses in the checkpoints the run writes.
      const std::pair<const char*, float> rates[] = {
          {"dropout", m.dropout},   {"dropouth", m.dropouth}, {"dropouti", m.dropouti},
          {"dropoute", m.dropoute}, {"dropoutl", m.dropoutl}, {"wdrop", m.wdrop}};
      for (const auto& [name, p] : rates)
        if (!(p >= 0.0f && p < 1.0f))
          broken(std::string("--") + name + " accepted as the float " + mg::flag_number_text(p) +
                 ", outside [0, 1)");
    } else if (command == "gradcheck") {
      if (c.train.batch_size < 1 || c.train.bptt < 1 || c.train.model.ntoken < 2 ||
          c.gradcheck.tolerance < 0 || c.gradcheck.entries < 0)
        broken("gradcheck accepted a size below its minimum");
    } else {
      if (c.model.bptt < 1) broken("--bptt below 1 was accepted");
    }
  });
}

namespace {

// What parse_metrics makes of a text: the curves, or that it refused it with a clear error.
struct MetricsOutcome {
  bool refused = false;
  mg::LearningCurves curves;
};

MetricsOutcome metrics_outcome(const std::string& text) {
  MetricsOutcome o;
  o.refused = true;
  expect_clear_error([&] {
    o.curves = mg::parse_metrics(text, "fuzz.jsonl");
    o.refused = false;
  });
  return o;
}

bool same_points(const std::vector<mg::PlotPoint>& a, const std::vector<mg::PlotPoint>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].x != b[i].x || a[i].y != b[i].y) return false;
  return true;
}

bool same_curves(const mg::LearningCurves& a, const mg::LearningCurves& b) {
  if (!same_points(a.train, b.train) || !same_points(a.val, b.val) ||
      a.stats.size() != b.stats.size())
    return false;
  for (const auto& [key, points] : a.stats) {
    const auto it = b.stats.find(key);
    if (it == b.stats.end() || !same_points(points, it->second)) return false;
  }
  return true;
}

}  // namespace

void metrics(const uint8_t* data, size_t size) {
  const std::string text = bytes_of(data, size);
  const MetricsOutcome whole = metrics_outcome(text);
  for (const auto* curve : {&whole.curves.train, &whole.curves.val})
    for (size_t i = 0; i < curve->size(); ++i) {
      const mg::PlotPoint& p = (*curve)[i];
      if (!std::isfinite(p.x) || !std::isfinite(p.y) || !(p.y > 0)) broken("a point to plot");
      if (i > 0 && !((*curve)[i - 1].x < p.x)) broken("tokens not increasing");
    }
  // A last line without its newline that is not JSON is what a crash mid-write leaves (a torn
  // line): the file must read as if that line were not there (docs/reliability.md), neither
  // refused for it nor changed by it.
  const size_t cut = text.rfind('\n') + 1;  // npos + 1 = 0: the whole text is one line
  if (cut < text.size()) {
    bool json = true;
    try {
      (void)mg::parse_json(text.substr(cut));
    } catch (const mg::JsonError&) {
      json = false;
    }
    if (!json) {
      const MetricsOutcome before = metrics_outcome(text.substr(0, cut));
      if (whole.refused != before.refused)
        broken(std::string("a torn last line ") +
               (whole.refused ? "made the file unreadable" : "made an unreadable file readable"));
      if (!whole.refused && !same_curves(whole.curves, before.curves))
        broken("a torn last line changed the curves");
    }
  }
}

void train_state(const uint8_t* data, size_t size) {
  static const mg::TrainConfig cfg = fuzz_state_config();
  static const mg::Corpus corpus = fuzz_state_corpus();
  const std::string bytes = with_valid_crc(bytes_of(data, size));
  within_memory_budget([&] {
    expect_clear_error([&] {
      const mg::Checkpoint ck = mg::parse_checkpoint(bytes, "fuzz_state.ckpt");
      mg::RNNModel model(cfg.model, 1);
      mg::Progress progress;
      progress.hidden = model.init_hidden(cfg.batch_size);
      mg::restore_state(ck, cfg, corpus, model, progress);
      const mg::TrainState& st = progress.st;
      const mg::Hidden& hidden = progress.hidden;
      if (st.epoch < 1 || st.step < 0 || st.batch_pos < 0 || st.tokens < 0 ||
          std::isnan(st.best_val))
        broken("a counter out of range");
      for (double v : st.val_history)
        if (!std::isfinite(v)) broken("validation history");
      for (const mg::LSTMState& s : hidden)
        if (s.h.dim() != 2 || s.h.size(0) != cfg.batch_size) broken("hidden state shape");
    });
  });
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {{"checkpoint", checkpoint}, {"safetensors", safetensors},
                                          {"corpus", corpus},         {"flags", flags},
                                          {"metrics", metrics},       {"train_state", train_state}};
  return all;
}

}  // namespace mgfuzz
