// Module: a named tree of parameters with train/eval modes (like torch.nn.Module / flashlight).
// Parameters are registered under short names ("weight_hh"); a parent registers children under
// their names ("rnns.0"), so named_parameters() gives the full dotted path ("rnns.0.weight_hh") —
// the exchange format with PyTorch checkpoints and safetensors files.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

class Module {
 public:
  virtual ~Module() = default;

  // Every parameter below this module, depth-first in registration order, with dotted names.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t parameter_count() const;  // number of scalars
  // The named parameter; throws listing the names that exist when it is missing.
  Tensor parameter(const std::string& dotted_name) const;

  void train(bool on = true);  // recursively; dropouts are active only in training mode
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();

  // Moves every parameter to `device` in place: each parameter keeps its identity (TensorImpl), so
  // tied weights stay tied and optimizers built later see the moved tensors. Gradients are dropped.
  void to(Device device);
  // Where the parameters are (CPU for a module without any).
  Device device() const;

  // Sets each parameter tensor's name to its dotted path, so graph dumps and errors show it.
  void name_parameters();

 protected:
  Tensor& register_parameter(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace mg
