// Elementwise nonlinearities. Each formula, forward and derivative, is written once in
// math/formulas.h for both devices; map_unary_on / map_binary_on (tensor/kernels.h) run it on the
// device the input lives on. Backward reuses the saved output where the derivative is cheapest in
// terms of it (tanh' = 1 - y², sigmoid' = y(1 - y), exp' = y).
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace mg {

Tensor tanh(const Tensor& x) {
  Tensor y = map_unary_on<UnaryOp::Tanh>(x);  // vtanh, ~2 ulp
  return record("tanh", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on<BinaryOp::TanhGrad>(g, y)};  // g (1 - y²)
  });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = map_unary_on<UnaryOp::Sigmoid>(x);
  return record("sigmoid", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on<BinaryOp::SigmoidGrad>(g, y)};  // g y (1 - y)
  });
}

Tensor log_sigmoid(const Tensor& x) {
  // log σ(x) = min(x, 0) - log(1 + exp(-|x|)): no overflow and no log(0) at either extreme.
  Tensor y = map_unary_on<UnaryOp::LogSigmoid>(x);
  return record("log_sigmoid", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on<BinaryOp::LogSigmoidGrad>(g, x)};  // g σ(-x)
  });
}

Tensor exp(const Tensor& x) {
  Tensor y = map_unary_on<UnaryOp::Exp>(x);
  return record("exp", y, {x},
                [y = y.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  Tensor y = map_unary_on<UnaryOp::Log>(x);
  return record("log", y, {x},
                [x = x.detach()](const Tensor& g) { return std::vector<Tensor>{div(g, x)}; });
}

Tensor relu(const Tensor& x) {
  Tensor y = map_unary_on<UnaryOp::Relu>(x);
  return record("relu", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on<BinaryOp::ReluGrad>(g, x)};  // g [x > 0]
  });
}

Tensor square(const Tensor& x) {
  Tensor y = map_unary_on<UnaryOp::Square>(x);
  return record("square", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on<BinaryOp::SquareGrad>(g, x)};  // 2 g x
  });
}

}  // namespace mg
