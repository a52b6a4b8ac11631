// LSTM layer (Hochreiter & Schmidhuber 1997) with PyTorch's gate order and two bias vectors:
//   [i f g o] = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh
//   i, f, o = sigmoid(.), g = tanh(.),  c_t = f*c_{t-1} + i*g,  h_t = o*tanh(c_t)
// Two implementations that are tested against each other:
//   lstm_steps  — the readable reference, one time step at a time from autograd ops (~15
//   nodes/step); lstm_fused  — one autograd node for the whole sequence, with a hand-written BPTT
//   backward.
#pragma once

#include <utility>

#include "nn/module.h"
#include "tensor/philox.h"

namespace mg {

struct LSTMState {
  Tensor h;                                                      // [B,H]
  Tensor c;                                                      // [B,H]
  LSTMState detach() const { return {h.detach(), c.detach()}; }  // truncated BPTT
};

struct LSTMWeights {
  Tensor weight_ih;  // [4H,in]
  Tensor weight_hh;  // [4H,H] (possibly a weight-dropped copy)
  Tensor bias_ih;    // [4H]
  Tensor bias_hh;    // [4H]
};

// Throws ShapeError naming the argument when x, the state or a weight has the wrong shape.
void check_lstm_args(const Tensor& x, const LSTMState& state, const LSTMWeights& w);

// x [T,B,in], state h,c [B,H] -> (out [T,B,H], final state)
std::pair<Tensor, LSTMState> lstm_steps(const Tensor& x, const LSTMState& state,
                                        const LSTMWeights& w);
std::pair<Tensor, LSTMState> lstm_fused(const Tensor& x, const LSTMState& state,
                                        const LSTMWeights& w);

class LSTMLayer : public Module {
 public:
  // PyTorch's init: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)).
  LSTMLayer(int64_t input_size, int64_t hidden_size, Generator& gen);
  // x [T,B,in] -> (out [T,B,H], state). weight_hh_used replaces weight_hh when defined (weight
  // drop).
  std::pair<Tensor, LSTMState> forward(const Tensor& x, const LSTMState& state, bool fused = true,
                                       const Tensor& weight_hh_used = Tensor()) const;
  LSTMState zero_state(int64_t B) const;

  int64_t input_size, hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
};

}  // namespace mg
