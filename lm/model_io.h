// Saving and loading a trained model (weights + flags + vocabulary): mosgrad's own checkpoint for
// `eval`, `generate`, `dyneval`, `finetune`, and safetensors for exchange with PyTorch.
#pragma once

#include <memory>
#include <string>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "lm/corpus.h"
#include "nn/rnn_model.h"

namespace mg {

struct LoadedModel {
  std::shared_ptr<RNNModel> model;
  Vocab vocab;  // empty when the file carried none (a safetensors file from elsewhere)
  std::map<std::string, std::string> strings;  // everything else the file recorded
};

// Copies `source` tensors named "<prefix><parameter name>" into the model's parameters; throws
// naming the file and the parameter when one is missing or has another shape.
void load_parameters(RNNModel& model, const NamedTensors& source, const std::string& prefix,
                     const std::string& file);

// The model checkpoint: tensors "model.<name>", strings "model.<flag>" (ModelConfig::to_map),
// "vocab" (the words, one per line) plus `extra`. Atomic (see io/checkpoint.h).
void save_model(const std::string& path, const RNNModel& model, const Vocab& vocab,
                const std::map<std::string, std::string>& extra = {});
LoadedModel load_model(const std::string& path);
// The model in a checkpoint already read: config checked (ranges, dropouts in [0, 1), its parameter
// count equal to the values the file holds), every parameter present, finite, of the right shape,
// nothing unknown, the vocabulary one word per row. load_model = load_checkpoint + this. Of a
// training state in its averaging phase (ASGD), the model is the averaged weights, the ones its
// run validates (eval, export, generate ... of finetune.ckpt score what the finetune scored).
LoadedModel model_from_checkpoint(const Checkpoint& checkpoint);

// safetensors with the PyTorch parameter names ("encoder.weight", "rnns.0.weight_ih", ...) and the
// model's flags (and vocabulary) in __metadata__, so a PyTorch user can rebuild the same model.
void export_safetensors(const std::string& path, const RNNModel& model, const Vocab& vocab);
LoadedModel import_safetensors(const std::string& path);
LoadedModel model_from_safetensors(const SafetensorsFile& file,
                                   const std::string& path);  // the same checks

}  // namespace mg
