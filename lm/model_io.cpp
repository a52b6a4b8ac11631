#include "lm/model_io.h"

#include <cmath>
#include <sstream>

#include "autograd/node.h"
#include "io/safetensors.h"

namespace mg {

namespace {

std::string join_vocab(const Vocab& vocab) {
  std::string s;
  for (const std::string& w : vocab.words()) s += w + "\n";
  return s;
}

// One word per line, each once: a word listed twice would shift every id after it.
Vocab split_vocab(const std::string& text, const std::string& file) {
  Vocab vocab;
  std::istringstream in(text);
  std::string word;
  while (std::getline(in, word)) {
    const int64_t line = vocab.size() + 1;
    if (!corpus_can_hold(word))
      throw std::runtime_error(file + ": the stored vocabulary's word " + std::to_string(line) +
                               ", " + shown_word(word) +
                               ", is no word a corpus can hold (it is empty, or has whitespace, a "
                               "control character or bytes that are not UTF-8 in it): no corpus "
                               "could ever be scored with this model");
    if (const int64_t before = vocab.find(word); before >= 0)
      throw std::runtime_error(file + ": the stored vocabulary lists the word " + shown_word(word) +
                               " twice (words " + std::to_string(before + 1) + " and " +
                               std::to_string(line) +
                               "); a model's vocabulary names each embedding row once");
    vocab.add(word);
  }
  return vocab;
}

// The model flags stored under "model.<key>".
ModelConfig config_from(const std::map<std::string, std::string>& strings,
                        const std::string& file) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : strings)
    if (k.rfind("model.", 0) == 0) m[k.substr(6)] = v;
  ModelConfig c;
  try {
    c = ModelConfig::from_map(m);
  } catch (const std::exception& e) {
    throw std::runtime_error(file + ": " + e.what() + " (was it written by mosgrad?)");
  }
  // Checked before a model is built from them: a crafted file must not allocate 2^63 floats.
  auto size = [&](const char* key, int64_t v, int64_t high) {
    if (v < 1 || v > high)
      throw std::runtime_error(file + ": model." + key + " = " + std::to_string(v) +
                               " is outside [1, " + std::to_string(high) + "]");
  };
  size("ntoken", c.ntoken, int64_t{1} << 24), size("emsize", c.emsize, int64_t{1} << 20);
  size("nhid", c.nhid, int64_t{1} << 20), size("nhidlast", c.nhidlast, int64_t{1} << 20);
  size("nlayers", c.nlayers, 64), size("n_experts", c.n_experts, 4096);
  for (const auto& [key, p] : std::vector<std::pair<const char*, float>>{{"dropout", c.dropout},
                                                                         {"dropouth", c.dropouth},
                                                                         {"dropouti", c.dropouti},
                                                                         {"dropoute", c.dropoute},
                                                                         {"dropoutl", c.dropoutl},
                                                                         {"wdrop", c.wdrop}})
    if (!(p >= 0.0f && p < 1.0f))
      throw std::runtime_error(file + ": model." + key + " = " + std::to_string(p) +
                               " is outside [0, 1)");
  return c;
}

// A file's config must not describe more parameters than the file holds values: checked before the
// model is built, so a crafted config (V = 2^24, E = 2^20) is an error, not a 64 TB allocation.
// (More values than that is an unknown tensor, which load_parameters names.)
void check_config_fits_tensors(const ModelConfig& cfg, const NamedTensors& tensors,
                               const std::string& prefix, const std::string& file) {
  int64_t stored = 0;
  for (const auto& [name, t] : tensors)
    if (name.rfind(prefix, 0) == 0) stored += t.numel();
  if (cfg.parameter_count() > stored)
    throw std::runtime_error(
        file + ": its config describes a model of " + std::to_string(cfg.parameter_count()) +
        " parameters (" + cfg.summary() + ") but it holds only " + std::to_string(stored) +
        " parameter values (a parameter is missing, or the config does not match the weights)");
}

// The vocabulary stored with a model must have one word per row of its embedding.
void check_vocab_fits(const Vocab& vocab, const ModelConfig& cfg, const std::string& file) {
  if (vocab.size() != cfg.ntoken)
    throw std::runtime_error(file + ": the stored vocabulary has " + std::to_string(vocab.size()) +
                             " words but the model has ntoken = " + std::to_string(cfg.ntoken));
}

}  // namespace

void load_parameters(RNNModel& model, const NamedTensors& source, const std::string& prefix,
                     const std::string& file) {
  NoGradGuard no_grad;
  const auto params = model.named_parameters();
  for (const auto& [n, t] : source) {  // nothing under the prefix that the model does not have
    if (n.rfind(prefix, 0) != 0) continue;
    bool known = false;
    for (const auto& [name, param] : params) known = known || prefix + name == n;
    if (!known)
      throw std::runtime_error(file + ": tensor '" + n + "' is not a parameter of this model (" +
                               model.config.summary() + ")");
  }
  for (auto& [name, param] : model.named_parameters()) {
    const Tensor* found = nullptr;
    for (const auto& [n, t] : source)
      if (n == prefix + name) found = &t;
    if (!found) throw std::runtime_error(file + ": parameter '" + prefix + name + "' is missing");
    if (found->shape() != param.shape())
      throw std::runtime_error(file + ": parameter '" + name + "' is " + shape_str(found->shape()) +
                               " but the model expects " + shape_str(param.shape()));
    const std::vector<float> values = found->to_vector();
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        throw std::runtime_error(file + ": parameter '" + name + "' holds " +
                                 std::to_string(values[i]) + " at element " + std::to_string(i) +
                                 " (a diverged run?)");
    copy_into(param, values);  // onto the parameter's device
  }
}

void save_model(const std::string& path, const RNNModel& model, const Vocab& vocab,
                const std::map<std::string, std::string>& extra) {
  NamedTensors tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.emplace_back("model." + name, t);
  std::map<std::string, std::string> strings = extra;
  for (const auto& [k, v] : model.config.to_map()) strings["model." + k] = v;
  strings["vocab"] = join_vocab(vocab);
  strings["kind"] = "model";
  save_checkpoint(path, tensors, strings);
}

LoadedModel load_model(const std::string& path) {
  return model_from_checkpoint(load_checkpoint(path));
}

LoadedModel model_from_checkpoint(const Checkpoint& ckpt) {
  const std::string& path = ckpt.path;
  LoadedModel out;
  ModelConfig cfg = config_from(ckpt.strings, path);
  check_config_fits_tensors(cfg, ckpt.tensors, "model.", path);
  out.model = std::make_shared<RNNModel>(cfg, 0);
  // A training state in its averaging phase (ASGD: a finetune's, or a run's after NT-ASGD's
  // switch) holds the weights and their running average "optim.<name>.ax"; the run validates, and
  // keeps as its best model, the average, so that is the model the state stands for.
  const auto is = [&](const char* key, const char* value) {
    return ckpt.has_string(key) && ckpt.string(key) == value;
  };
  if (is("kind", "train-state") && is("optimizer_kind", "asgd")) {
    NamedTensors averages;
    for (const auto& [name, t] : ckpt.tensors)
      if (name.rfind("optim.", 0) == 0 && name.size() > 9 &&
          name.compare(name.size() - 3, 3, ".ax") == 0)
        averages.emplace_back("model." + name.substr(6, name.size() - 9), t);
    load_parameters(*out.model, averages, "model.", path);
  } else {
    load_parameters(*out.model, ckpt.tensors, "model.", path);
  }
  if (ckpt.has_string("vocab"))
    out.vocab = split_vocab(ckpt.string("vocab"), path), check_vocab_fits(out.vocab, cfg, path);
  out.strings = ckpt.strings;
  return out;
}

void export_safetensors(const std::string& path, const RNNModel& model, const Vocab& vocab) {
  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : model.config.to_map()) meta["model." + k] = v;
  meta["format"] = "mosgrad";
  meta["vocab"] = join_vocab(vocab);
  save_safetensors(path, model.named_parameters(), meta);
}

LoadedModel import_safetensors(const std::string& path) {
  return model_from_safetensors(load_safetensors(path), path);
}

LoadedModel model_from_safetensors(const SafetensorsFile& file, const std::string& path) {
  LoadedModel out;
  const ModelConfig cfg = config_from(file.metadata, path);
  check_config_fits_tensors(cfg, file.tensors, "", path);
  out.model = std::make_shared<RNNModel>(cfg, 0);
  load_parameters(*out.model, file.tensors, "", path);
  auto it = file.metadata.find("vocab");
  if (it != file.metadata.end())
    out.vocab = split_vocab(it->second, path), check_vocab_fits(out.vocab, out.model->config, path);
  out.strings = file.metadata;
  return out;
}

}  // namespace mg
