#include "lm/model_io.h"

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

Vocab split_vocab(const std::string& text) {
  Vocab vocab;
  std::istringstream in(text);
  std::string word;
  while (std::getline(in, word)) vocab.add(word);
  return vocab;
}

// The model flags stored under "model.<key>".
ModelConfig config_from(const std::map<std::string, std::string>& strings, const std::string& file) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : strings)
    if (k.rfind("model.", 0) == 0) m[k.substr(6)] = v;
  try {
    return ModelConfig::from_map(m);
  } catch (const std::exception& e) {
    throw std::runtime_error(file + ": " + e.what() + " (was it written by mosgrad?)");
  }
}

}  // namespace

void load_parameters(RNNModel& model, const NamedTensors& source, const std::string& prefix, const std::string& file) {
  NoGradGuard no_grad;
  for (auto& [name, param] : model.named_parameters()) {
    const Tensor* found = nullptr;
    for (const auto& [n, t] : source)
      if (n == prefix + name) found = &t;
    if (!found) throw std::runtime_error(file + ": parameter '" + prefix + name + "' is missing");
    if (found->shape() != param.shape())
      throw std::runtime_error(file + ": parameter '" + name + "' is " + shape_str(found->shape()) +
                               " but the model expects " + shape_str(param.shape()));
    copy_into(param, *found);  // onto the parameter's device
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
  const Checkpoint ckpt = load_checkpoint(path);
  LoadedModel out;
  ModelConfig cfg = config_from(ckpt.strings, path);
  out.model = std::make_shared<RNNModel>(cfg, 0);
  load_parameters(*out.model, ckpt.tensors, "model.", path);
  if (ckpt.has_string("vocab")) out.vocab = split_vocab(ckpt.string("vocab"));
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
  const SafetensorsFile file = load_safetensors(path);
  LoadedModel out;
  out.model = std::make_shared<RNNModel>(config_from(file.metadata, path), 0);
  load_parameters(*out.model, file.tensors, "", path);
  auto it = file.metadata.find("vocab");
  if (it != file.metadata.end()) out.vocab = split_vocab(it->second);
  out.strings = file.metadata;
  return out;
}

}  // namespace mg
