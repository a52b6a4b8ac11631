#include "nn/lstm.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/linear.h"
#include "tensor/not_implemented.h"

namespace mg {

// The shapes both LSTMs (this one and nn/lstm_fused.cpp) check before any work.
void check_lstm_args(const Tensor& x, const LSTMState& s, const LSTMWeights& w) {
  check_rank("lstm", x, 3, "x [T,B,in]");
  const int64_t T = x.size(0), B = x.size(1), in = x.size(2), H = w.weight_hh.size(-1);
  if (T == 0) throw ShapeError("lstm: the sequence is empty (T = 0)");
  auto expect = [](const char* what, const Tensor& t, const Shape& shape) {
    if (t.shape() != shape)
      throw ShapeError(std::string("lstm: ") + what + " is " + shape_str(t.shape()) +
                       ", expected " + shape_str(shape));
  };
  expect("weight_hh", w.weight_hh, {4 * H, H});
  expect("weight_ih", w.weight_ih, {4 * H, in});
  expect("bias_ih", w.bias_ih, {4 * H});
  expect("bias_hh", w.bias_hh, {4 * H});
  expect("h", s.h, {B, H});
  expect("c", s.c, {B, H});
}

std::pair<Tensor, LSTMState> lstm_steps(const Tensor& x, const LSTMState& state,
                                        const LSTMWeights& w) {
  check_lstm_args(x, state, w);
  const int64_t T = x.size(0), B = x.size(1), H = w.weight_hh.size(1);
  // All input projections in one product: [T*B,in] x [in,4H].
  const Tensor x_proj = linear(reshape(x, {T * B, x.size(2)}), w.weight_ih, w.bias_ih);  // [T*B,4H]
  Tensor h = state.h, c = state.c;
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < T; ++t) {
    // TASK 4.1: gates = x W_ih^T + b_ih + h W_hh^T + b_hh; i, f, g, o (PyTorch's order); c, h
    const Tensor gates =
        add(narrow(x_proj, 0, t * B, B), linear(h, w.weight_hh, w.bias_hh));  // [B,4H]
    const Tensor i = sigmoid(narrow(gates, 1, 0, H));
    const Tensor f = sigmoid(narrow(gates, 1, H, H));
    const Tensor g = tanh(narrow(gates, 1, 2 * H, H));
    const Tensor o = sigmoid(narrow(gates, 1, 3 * H, H));
    c = add(mul(f, c), mul(i, g));
    h = mul(o, tanh(c));
    // END TASK 4.1
    outputs.push_back(h);
  }
  return {stack(outputs, 0), {h, c}};
}

LSTMLayer::LSTMLayer(int64_t in, int64_t hidden, Generator& gen)
    : input_size(in), hidden_size(hidden) {
  const float k = 1.0f / std::sqrt(static_cast<float>(hidden));
  weight_ih = register_parameter("weight_ih", Tensor::uniform({4 * hidden, in}, -k, k, gen));
  weight_hh = register_parameter("weight_hh", Tensor::uniform({4 * hidden, hidden}, -k, k, gen));
  bias_ih = register_parameter("bias_ih", Tensor::uniform({4 * hidden}, -k, k, gen));
  bias_hh = register_parameter("bias_hh", Tensor::uniform({4 * hidden}, -k, k, gen));
}

std::pair<Tensor, LSTMState> LSTMLayer::forward(const Tensor& x, const LSTMState& state, bool fused,
                                                const Tensor& weight_hh_used) const {
  const LSTMWeights w{weight_ih, weight_hh_used.defined() ? weight_hh_used : weight_hh, bias_ih,
                      bias_hh};
  return fused ? lstm_fused(x, state, w) : lstm_steps(x, state, w);
}

LSTMState LSTMLayer::zero_state(int64_t B) const {
  return {Tensor::zeros({B, hidden_size}, weight_hh.device()),
          Tensor::zeros({B, hidden_size}, weight_hh.device())};
}

}  // namespace mg
