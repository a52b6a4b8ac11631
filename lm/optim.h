// Optimizers of the AWD-LSTM / MoS recipe: SGD, ASGD (SGD plus a running average of the weights,
// Polyak & Juditsky 1992, used by NT-ASGD), Adam (Kingma & Ba 2015); and gradient-norm clipping.
// L2 weight decay `wdecay` is added to each gradient (PyTorch's weight_decay semantics).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

enum class OptimizerKind { SGD, ASGD, Adam };
OptimizerKind parse_optimizer_kind(const std::string& name);  // "sgd" | "asgd" | "adam"
std::string optimizer_kind_name(OptimizerKind kind);

class Optimizer {
 public:
  // params: the model's named parameters (the names key the saved state).
  Optimizer(OptimizerKind kind, std::vector<std::pair<std::string, Tensor>> params, float wdecay,
            float adam_beta1 = 0.9f, float adam_beta2 = 0.999f, float adam_eps = 1e-8f);

  // One update with learning rate lr from the parameters' .grad (parameters without a gradient are
  // skipped). ASGD: p -= lr (g + wd p); then ax += (p - ax) / (steps since the switch), i.e. ax is
  // the mean of all iterates since ASGD started (PyTorch's ASGD with t0 = 0, lambd = 0).
  void step(float lr);
  void zero_grad();

  // ASGD evaluates (and saves) the averaged weights: swap them in, evaluate, swap back.
  // No-ops for SGD and Adam.
  void swap_in_average();
  void swap_out_average();

  // Saved state ("<param>.exp_avg", "<param>.ax", ...) and the step count, for exact resume.
  std::vector<std::pair<std::string, Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors, int64_t steps);

  OptimizerKind kind() const { return kind_; }
  int64_t steps() const { return steps_; }

 private:
  struct Slot {
    std::string name;
    Tensor param;
    Tensor buf_a;  // Adam: first moment; ASGD: the average ax
    Tensor buf_b;  // Adam: second moment
  };
  OptimizerKind kind_;
  std::vector<Slot> slots_;
  float wdecay_, beta1_, beta2_, eps_;
  int64_t steps_ = 0;
  bool swapped_ = false;
};

// Scales all gradients so their global L2 norm is at most max_norm (like
// torch.nn.utils.clip_grad_norm_); returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace mg
