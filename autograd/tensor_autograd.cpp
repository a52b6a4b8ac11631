// The members of Tensor that walk or name the graph. They are declared in tensor/tensor.h with the
// rest of Tensor but defined here, because tensor/ sits below autograd/ and must not include it
// (the layers: cuda -> tensor -> autograd -> nn -> lm -> tools; tools/check_layers.sh).
#include "autograd/engine.h"
#include "tensor/tensor.h"

namespace mg {

Tensor& Tensor::requires_grad_(bool on) {
  if (on && !is_leaf())
    throw std::logic_error(
        "requires_grad_: only leaves (parameters, inputs) can be marked; "
        "this tensor was computed by '" +
        node_op(*impl().grad_fn) + "'");
  impl().requires_grad = on;
  return *this;
}

void Tensor::backward() const {
  if (numel() != 1)
    throw ShapeError("backward: needs a scalar loss (or an explicit gradient), got shape " +
                     shape_str(shape()));
  run_backward(*this, Tensor::ones(shape(), device()));
}

void Tensor::backward(const Tensor& grad_output) const {
  check_same_shape("backward", *this, grad_output);
  check_same_device("backward", {*this, grad_output});
  run_backward(*this, grad_output);
}

}  // namespace mg
