// Elementwise nonlinearities. Backward reuses the saved output where the derivative is cheapest in
// terms of it (tanh' = 1 - y^2, sigmoid' = y(1 - y), exp' = y).
#include <cmath>

#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/vec_math.h"

namespace mg {

namespace {
inline float sigmoid_scalar(float x) {
  // Two branches so exp never overflows.
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}
}  // namespace

Tensor tanh(const Tensor& x) {
  // vtanh (tensor/vec_math.h, ~2 ulp) rather than glibc's tanhf, a scalar call (with expm1f
  // inside) that was 2.3% of a small-mos step for the MoS latent layer's tanh alone.
  Tensor y = map_unary_on(CudaUnary::Tanh, x, [](float v) { return vtanh(v); });
  return record("tanh", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on(
        CudaBinary::TanhGrad, g, y, [](float gv, float yv) { return gv * (1 - yv * yv); })};
  });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = map_unary_on(CudaUnary::Sigmoid, x, sigmoid_scalar);
  return record("sigmoid", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on(
        CudaBinary::SigmoidGrad, g, y, [](float gv, float yv) { return gv * yv * (1 - yv); })};
  });
}

Tensor log_sigmoid(const Tensor& x) {
  // log sigmoid(x) = min(x, 0) - log(1 + exp(-|x|)): no overflow and no log(0) at either extreme.
  Tensor y = map_unary_on(CudaUnary::LogSigmoid, x, [](float v) {
    return std::min(v, 0.0f) - std::log1p(std::exp(-std::fabs(v)));
  });
  return record("log_sigmoid", y, {x}, [x = x.detach()](const Tensor& g) {
    // d/dx log sigmoid(x) = 1 - sigmoid(x) = sigmoid(-x)
    return std::vector<Tensor>{
        map_binary_on(CudaBinary::LogSigmoidGrad, g, x,
                      [](float gv, float xv) { return gv * sigmoid_scalar(-xv); })};
  });
}

Tensor exp(const Tensor& x) {
  Tensor y = map_unary_on(CudaUnary::Exp, x, [](float v) { return std::exp(v); });
  return record("exp", y, {x},
                [y = y.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  Tensor y = map_unary_on(CudaUnary::Log, x, [](float v) { return std::log(v); });
  return record("log", y, {x},
                [x = x.detach()](const Tensor& g) { return std::vector<Tensor>{div(g, x)}; });
}

Tensor relu(const Tensor& x) {
  Tensor y = map_unary_on(CudaUnary::Relu, x, [](float v) { return v > 0 ? v : 0.0f; });
  return record("relu", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on(
        CudaBinary::ReluGrad, g, x, [](float gv, float xv) { return xv > 0 ? gv : 0.0f; })};
  });
}

Tensor square(const Tensor& x) {
  Tensor y = map_unary_on(CudaUnary::Square, x, [](float v) { return v * v; });
  return record("square", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_binary_on(CudaBinary::SquareGrad, g, x,
                                             [](float gv, float xv) { return 2 * gv * xv; })};
  });
}

}  // namespace mg
