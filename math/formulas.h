// Every elementwise formula of the ops, written once for both devices. The CPU's loops
// (tensor/kernels.h map_unary_on / map_binary_on, nn/lstm_fused.cpp, nn/dropout.cpp) and the GPU's
// kernels (cuda/ops_elementwise.cu, cuda/lstm_fused.cu, cuda/philox.cu) call these same functions,
// so the two devices cannot drift apart: where they still differ it is by the compilers' rounding
// (contracted multiply-adds), never by a second copy of the math.
// Like everything in math/, the lowest layer, both sides include it; without nvcc it is plain C++.
//
// Unary<F>{s}(x) is the forward of op F (s: the scalar of AddScalar / MulScalar), Binary<F>{}(a, b)
// the binary op F; the *Grad ones are backward formulas with (a, b) = (incoming gradient g, the
// value the forward saved: its output y or its input x).
#pragma once

#include "math/host_device.h"
#include "math/op_kinds.h"
#include "math/scalar_math.h"

namespace mg {

// σ(x) with two branches, so that exp never overflows (the sigmoid op; the LSTM's gates use the
// branch-free vsigmoid, which vectorizes).
MG_HOST_DEVICE inline float sigmoid_two_sided(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

template <UnaryOp F>
struct Unary;
template <>
struct Unary<UnaryOp::Tanh> {  // vtanh (~2 ulp): glibc's tanhf was 2.3% of a small-mos step
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return vtanh(x); }
};
template <>
struct Unary<UnaryOp::Sigmoid> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return sigmoid_two_sided(x); }
};
template <>
struct Unary<UnaryOp::LogSigmoid> {
  // log σ(x) = min(x, 0) - log(1 + exp(-|x|)): no overflow and no log(0) at either extreme.
  float s;
  MG_HOST_DEVICE float operator()(float x) const {
    return (0.0f < x ? 0.0f : x) - std::log1p(std::exp(-std::fabs(x)));
  }
};
template <>
struct Unary<UnaryOp::Exp> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return std::exp(x); }
};
template <>
struct Unary<UnaryOp::Log> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return std::log(x); }
};
template <>
struct Unary<UnaryOp::Relu> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return x > 0 ? x : 0.0f; }
};
template <>
struct Unary<UnaryOp::Square> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return x * x; }
};
template <>
struct Unary<UnaryOp::AddScalar> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return x + s; }
};
template <>
struct Unary<UnaryOp::MulScalar> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return x * s; }
};
template <>
struct Unary<UnaryOp::Neg> {
  float s;
  MG_HOST_DEVICE float operator()(float x) const { return -x; }
};

template <BinaryOp F>
struct Binary;
template <>
struct Binary<BinaryOp::Add> {
  MG_HOST_DEVICE float operator()(float a, float b) const { return a + b; }
};
template <>
struct Binary<BinaryOp::Sub> {
  MG_HOST_DEVICE float operator()(float a, float b) const { return a - b; }
};
template <>
struct Binary<BinaryOp::Mul> {
  MG_HOST_DEVICE float operator()(float a, float b) const { return a * b; }
};
template <>
struct Binary<BinaryOp::Div> {
  MG_HOST_DEVICE float operator()(float a, float b) const { return a / b; }
};
template <>
struct Binary<BinaryOp::TanhGrad> {  // tanh' = 1 - y²
  MG_HOST_DEVICE float operator()(float g, float y) const { return g * (1 - y * y); }
};
template <>
struct Binary<BinaryOp::SigmoidGrad> {  // σ' = y (1 - y)
  MG_HOST_DEVICE float operator()(float g, float y) const { return g * y * (1 - y); }
};
template <>
struct Binary<BinaryOp::LogSigmoidGrad> {  // (log σ)'(x) = 1 - σ(x) = σ(-x)
  MG_HOST_DEVICE float operator()(float g, float x) const { return g * sigmoid_two_sided(-x); }
};
template <>
struct Binary<BinaryOp::ReluGrad> {  // [x > 0]
  MG_HOST_DEVICE float operator()(float g, float x) const { return x > 0 ? g : 0.0f; }
};
template <>
struct Binary<BinaryOp::SquareGrad> {  // (x²)' = 2x
  MG_HOST_DEVICE float operator()(float g, float x) const { return 2 * g * x; }
};

// ---- Softmax's backward, one entry of a line (autograd/ops_softmax.cpp, cuda/ops_reduce.cu) ----
// With the line's total (Σ g y for softmax, Σ g for log_softmax): dx = y (g - total) for y =
// softmax(x), and dx = g - exp(y) total for y = log_softmax(x), where y <= 0 (its largest entry is
// -log Σ exp <= 0), so the exponential never overflows.
MG_HOST_DEVICE inline float softmax_backward_entry(float g, float y, float total, bool log_space) {
  return log_space ? g - vexp_nonpositive(y) * total : y * (g - total);
}

// ---- The LSTM cell (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000) ----
// One unit of one batch row. Forward, from the pre-activations z (input projection + recurrent
// product + both biases):
//   i, f, o = σ(z),  g = tanh(z_g),  c_t = f ⊙ c_{t-1} + i ⊙ g,  h_t = o ⊙ tanh(c_t)
struct LstmCell {
  float i, f, g, o, c, h;
};
MG_HOST_DEVICE inline LstmCell lstm_cell_forward(float zi, float zf, float zg, float zo,
                                                 float c_prev) {
  LstmCell u;
  u.i = vsigmoid(zi), u.f = vsigmoid(zf), u.g = vtanh(zg), u.o = vsigmoid(zo);
  u.c = u.f * c_prev + u.i * u.g;
  u.h = u.o * vtanh(u.c);
  return u;
}

// Backward of lstm_cell_forward, from d h_t (dh_t: from the layer above plus from step t+1) and the
// cell gradient dc arriving from step t+1, given the saved activations i, f, g, o and c_t:
//   dc_t = dc + dh_t ⊙ o ⊙ (1 - tanh²(c_t))
//   di = dc_t ⊙ g ⊙ σ'(i),  df = dc_t ⊙ c_{t-1} ⊙ σ'(f),  dg = dc_t ⊙ i ⊙ (1 - g²),
//   do = dh_t ⊙ tanh(c_t) ⊙ σ'(o),  with σ' = σ(1 - σ);   d c_{t-1} = dc_t ⊙ f
struct LstmCellGrad {
  float di, df, dg, d_o, dc_prev;
};
MG_HOST_DEVICE inline LstmCellGrad lstm_cell_backward(float i, float f, float g, float o, float c,
                                                      float c_prev, float dh_t, float dc) {
  const float tc = vtanh(c);
  const float dc_t = dc + dh_t * o * (1 - tc * tc);
  LstmCellGrad d;
  d.di = dc_t * g * i * (1 - i);
  d.df = dc_t * c_prev * f * (1 - f);
  d.dg = dc_t * i * (1 - g * g);
  d.d_o = dh_t * tc * o * (1 - o);
  d.dc_prev = dc_t * f;
  return d;
}

// ---- Inverted dropout (Srivastava et al. 2014) ----
// The mask entry for a uniform draw u in [0, 1): kept with probability 1 - p and then scaled by
// keep_scale = 1 / (1 - p), so that the expected activation is unchanged; dropped otherwise.
MG_HOST_DEVICE inline float dropout_mask_entry(float u, float p, float keep_scale) {
  return u >= p ? keep_scale : 0.0f;
}
MG_HOST_DEVICE inline float dropout_keep_scale(float p) {
  return 1.0f / (1.0f - p);
}

}  // namespace mg
