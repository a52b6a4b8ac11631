// The elementwise ops by name, for both devices: math/formulas.h holds each one's formula
// (Unary<F>, Binary<F>), the CPU's loops (tensor/kernels.h map_unary_on / map_binary_on) and the
// GPU's kernels (cuda_unary / cuda_binary in cuda/backend.h) are keyed by them.
#pragma once

namespace mg {

enum class UnaryOp {
  Tanh,
  Sigmoid,
  LogSigmoid,
  Exp,
  Log,
  Relu,
  Square,  // ops_unary.cpp
  AddScalar,
  MulScalar,
  Neg,  // ops_binary.cpp: y = x + s, x * s, -x
};
enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,  // ops_binary.cpp
  // Backward of ops_unary.cpp, (a, b) = (g, saved): g(1-y²), g y(1-y), g σ(-x), g·[x>0], 2 g x.
  TanhGrad,
  SigmoidGrad,
  LogSigmoidGrad,
  ReluGrad,
  SquareGrad,
};

}  // namespace mg
