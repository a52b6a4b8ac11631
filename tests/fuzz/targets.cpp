#include "tests/fuzz/targets.h"

#include <cmath>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "io/crc32.h"
#include "io/little_endian.h"
#include "lm/corpus.h"
#include "lm/learning_curves.h"
#include "lm/model_io.h"
#include "lm/train_state.h"
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
  expect_clear_error([&] {
    const mg::Checkpoint ck = mg::parse_checkpoint(bytes, "fuzz.ckpt");
    const mg::LoadedModel lm = mg::model_from_checkpoint(ck);
    if (lm.model->parameter_count() != lm.model->config.parameter_count())
      broken("parameter count");
  });
}

void safetensors(const uint8_t* data, size_t size) {
  expect_clear_error([&] {
    const mg::SafetensorsFile file =
        mg::parse_safetensors(bytes_of(data, size), "fuzz.safetensors");
    for (const auto& [name, t] : file.tensors)
      if (!t.defined() || t.numel() < 0) broken("tensor " + name);
    const mg::LoadedModel lm = mg::model_from_safetensors(file, "fuzz.safetensors");
    if (!lm.vocab.words().empty() && lm.vocab.size() != lm.model->config.ntoken)
      broken("vocabulary size");
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
    } else if (command == "gradcheck") {
      if (c.train.batch_size < 1 || c.train.bptt < 1 || c.train.model.ntoken < 2 ||
          c.gradcheck.tolerance < 0 || c.gradcheck.entries < 0)
        broken("gradcheck accepted a size below its minimum");
    } else {
      if (c.model.bptt < 1) broken("--bptt below 1 was accepted");
    }
  });
}

void metrics(const uint8_t* data, size_t size) {
  expect_clear_error([&] {
    const mg::LearningCurves c = mg::parse_metrics(bytes_of(data, size), "fuzz.jsonl");
    for (const auto* curve : {&c.train, &c.val})
      for (size_t i = 0; i < curve->size(); ++i) {
        const mg::PlotPoint& p = (*curve)[i];
        if (!std::isfinite(p.x) || !std::isfinite(p.y) || !(p.y > 0)) broken("a point to plot");
        if (i > 0 && !((*curve)[i - 1].x < p.x)) broken("tokens not increasing");
      }
  });
}

void train_state(const uint8_t* data, size_t size) {
  static const mg::TrainConfig cfg = fuzz_state_config();
  static const mg::Corpus corpus = fuzz_state_corpus();
  const std::string bytes = with_valid_crc(bytes_of(data, size));
  expect_clear_error([&] {
    const mg::Checkpoint ck = mg::parse_checkpoint(bytes, "fuzz_state.ckpt");
    mg::RNNModel model(cfg.model, 1);
    std::unique_ptr<mg::Optimizer> opt;
    mg::TrainState st;
    mg::Hidden hidden = model.init_hidden(cfg.batch_size);
    mg::Generator bptt_gen(1);
    mg::restore_state(ck, cfg, corpus, model, opt, st, hidden, bptt_gen);
    if (st.epoch < 1 || st.step < 0 || st.batch_pos < 0 || st.tokens < 0 || std::isnan(st.best_val))
      broken("a counter out of range");
    for (double v : st.val_history)
      if (!std::isfinite(v)) broken("validation history");
    for (const mg::LSTMState& s : hidden)
      if (s.h.dim() != 2 || s.h.size(0) != cfg.batch_size) broken("hidden state shape");
  });
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {{"checkpoint", checkpoint}, {"safetensors", safetensors},
                                          {"corpus", corpus},         {"flags", flags},
                                          {"metrics", metrics},       {"train_state", train_state}};
  return all;
}

}  // namespace mgfuzz
