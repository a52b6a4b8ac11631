#include "nn/module.h"

namespace mg {

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  for (const auto& [name, child] : children_)
    for (const auto& [sub, t] : child->named_parameters())
      out.emplace_back(name.empty() ? sub : name + "." + sub, t);  // "" = parameters at our level
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

Tensor Module::parameter(const std::string& dotted_name) const {
  std::string known;
  for (const auto& [name, t] : named_parameters()) {
    if (name == dotted_name) return t;
    known += (known.empty() ? "" : ", ") + name;
  }
  throw std::invalid_argument("no parameter named '" + dotted_name + "'; the model has: " + known);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor t : parameters()) t.zero_grad();
}

void Module::name_parameters() {
  for (auto& [name, t] : named_parameters()) t.set_name(name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
  value.requires_grad_();
  value.set_name(name);
  params_.emplace_back(name, value);
  return params_.back().second;
}

void Module::to(Device device) {
  for (auto& [name, p] : named_parameters()) {
    if (p.device() == device) continue;
    const Tensor moved = p.to(device);  // contiguous, a fresh storage on the device
    TensorImpl& impl = p.impl();
    impl.storage = moved.impl().storage;
    impl.offset = 0;
    impl.strides = contiguous_strides(impl.shape);
    impl.grad.reset();
  }
}

Device Module::device() const {
  const auto params = named_parameters();
  return params.empty() ? Device::CPU : params.front().second.device();
}

}  // namespace mg
