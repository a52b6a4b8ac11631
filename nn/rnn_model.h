// The AWD-LSTM / MoS language model (Merity et al. 2017; Yang et al. 2017):
//   ids [T,B] -> embedding (embedding dropout `dropoute`) -> locked dropout `dropouti`
//   -> LSTM stack (weight drop `wdrop` on each W_hh; locked dropout `dropouth` between layers)
//   -> locked dropout `dropout` -> output head -> log p [T*B,V]
// configured by the reference scripts' flags.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/compute_paths.h"
#include "nn/embedding.h"
#include "nn/heads.h"
#include "nn/lstm.h"

namespace mg {

struct ModelConfig {
  int64_t ntoken = 10000;  // V
  int64_t emsize = 200;    // E
  int64_t nhid = 400;      // H of every LSTM layer but the last
  int64_t nhidlast = 200;  // H of the last layer (mixture heads; untied softmax heads)
  int64_t nlayers = 2;
  int64_t n_experts = 1;  // K (mixture heads)
  float dropout = 0.4f, dropouth = 0.25f, dropouti = 0.0f, dropoute = 0.1f, dropoutl = 0.0f,
        wdrop = 0.5f;
  bool tied = true;
  HeadKind head = HeadKind::Softmax;

  // Hidden size of each LSTM layer. The last is E for a tied softmax/sigsoftmax head (the decoder
  // is the [V,E] embedding), else nhidlast.
  std::vector<int64_t> layer_sizes() const;
  // Whether the last layer has nhidlast units: not for a tied softmax/sigsoftmax head (E units).
  bool last_layer_is_nhidlast() const { return is_mixture(head) || !tied; }
  // Whether the model this config builds reads `key` (a key of to_map()): n_experts and dropoutl
  // only with a mixture head, nhidlast unless the head is a tied one without a mixture (its last
  // layer has E units), nhid only with more than one layer; every other key always. A run made
  // with another value of a key its model never reads is the same run.
  bool reads(const std::string& key) const;
  // Flat key=value form, for checkpoint headers and safetensors __metadata__.
  std::map<std::string, std::string> to_map() const;
  static ModelConfig from_map(const std::map<std::string, std::string>& values);
  // How many floats the model's parameters hold (a tied decoder counted once), computed without
  // building it: loaders compare it with the file before allocating a model a crafted file
  // describes.
  int64_t parameter_count() const;
  std::string summary() const;  // one line, e.g. "mos K=5 E=200 LSTM [400,400] V=10000 tied"
};

using Hidden = std::vector<LSTMState>;  // one (h, c) per layer, each [B,H_l]
Hidden detach_hidden(const Hidden& hidden);

struct ModelOutput {
  Tensor log_prob;                      // [T*B,V]; undefined when the loss was computed directly
  Tensor loss;                          // mean NLL of the targets, when targets were given
  Hidden hidden;                        // the final state, to carry into the next segment
  std::vector<Tensor> raw_outputs;      // per layer [T,B,H_l], before dropout (TAR uses the last)
  std::vector<Tensor> dropped_outputs;  // per layer, after dropouth / dropout (AR uses the last)
};

class RNNModel : public Module {
 public:
  RNNModel(const ModelConfig& config, uint64_t seed);

  // ids: T*B token ids, row-major [T,B]. With targets (T*B ids) the loss is computed through the
  // head's fused nll (which may skip materialising log_prob), or as its reference_nll,
  // nll_loss(log_prob), when paths.fused_head is false; without, log_prob is returned.
  ModelOutput forward(const std::vector<int64_t>& ids, int64_t T, int64_t B, const Hidden& hidden,
                      const std::vector<int64_t>* targets = nullptr);
  Hidden init_hidden(int64_t B) const;

  ModelConfig config;
  // Fast or reference LSTM and head loss, as the command's flags chose (ComputePathsScope sets
  // them; paths.gemm and paths.precision are the GEMM's, which the scope sets process-wide). Not
  // saved with the model: each command chooses them from its flags.
  ComputePaths paths;
  std::shared_ptr<Embedding> encoder;
  std::vector<std::shared_ptr<LSTMLayer>> rnns;
  std::shared_ptr<OutputHead> head;
  Generator
      dropout_gen;  // every dropout mask comes from here; saved in checkpoints for exact resume
};

// Applies paths: the GEMM's path and precision (process-wide, tensor/gemm.h) for this object's
// lifetime, restored when it ends, and, given a model, the model's own (RNNModel::paths: its LSTM
// and head), which stay with the model.
class ComputePathsScope {
 public:
  explicit ComputePathsScope(const ComputePaths& paths, RNNModel* model = nullptr);

 private:
  GemmPathScope gemm_;
  GemmPrecisionScope precision_;
};

}  // namespace mg
