// The fused LSTM: the whole sequence is one autograd node.
//
// Forward: one GEMM for all input projections [T*B,in]x[in,4H], then per step one small GEMM
// h_{t-1} W_hh^T accumulated into the gates, and the gate nonlinearities + cell update in a single
// pass. Backward (BPTT in one pass, t = T-1 .. 0) turns d h_t, d c_T into the pre-activation gate
// gradients dG_t; the weight gradients are then two big GEMMs over all steps at once.
//
// One node has one output, so the op returns a packed tensor Y [T+1,B,H]: rows 0..T-1 are h_1..h_T
// (the layer output; h_T is also the final hidden state) and row T is c_T. lstm_fused() hands out
// views of it.
#include <cmath>
#include <cstring>

#include "autograd/kernels.h"
#include "autograd/ops.h"
#include "nn/lstm.h"
#include "tensor/gemm.h"

namespace mg {

void check_lstm_args(const Tensor& x, const LSTMState& s, const LSTMWeights& w) {
  check_rank("lstm", x, 3, "x [T,B,in]");
  const int64_t T = x.size(0), B = x.size(1), in = x.size(2), H = w.weight_hh.size(-1);
  if (T == 0) throw ShapeError("lstm: the sequence is empty (T = 0)");
  auto expect = [](const char* what, const Tensor& t, const Shape& shape) {
    if (t.shape() != shape)
      throw ShapeError(std::string("lstm: ") + what + " is " + shape_str(t.shape()) + ", expected " + shape_str(shape));
  };
  expect("weight_hh", w.weight_hh, {4 * H, H});
  expect("weight_ih", w.weight_ih, {4 * H, in});
  expect("bias_ih", w.bias_ih, {4 * H});
  expect("bias_hh", w.bias_hh, {4 * H});
  expect("h", s.h, {B, H});
  expect("c", s.c, {B, H});
}

namespace {

inline float sigmoidf(float v) { return 1.0f / (1.0f + std::exp(-v)); }

struct Saved {
  Tensor x, h0, c0, w_ih, w_hh;  // inputs (detached)
  Tensor acts;                   // [T*B,4H] post-activation i, f, g, o of every step
  Tensor cells;                  // [T*B,H]  c_t of every step
  Tensor y;                      // [T+1,B,H] the packed output (h_t rows, then c_T)
};

std::vector<Tensor> lstm_backward(const Saved& s, const Tensor& grad_y_in, const std::vector<bool>& need) {
  const Tensor grad_y = contiguous_data(grad_y_in);
  const int64_t T = s.x.size(0), B = s.x.size(1), in = s.x.size(2), H = s.h0.size(1), G = 4 * H;
  Tensor d_gates = Tensor::empty({T * B, G});
  Tensor dh = Tensor::zeros({B, H});                      // d loss / d h_t from step t+1
  Tensor dc = copy_contiguous(reshape(narrow(grad_y, 0, T, 1), {B, H}));  // d loss / d c_t, from d c_T
  float* dcp = dc.data();
  float* dhp = dh.data();
  for (int64_t t = T - 1; t >= 0; --t) {
    const float* act = s.acts.data() + t * B * G;
    const float* c = s.cells.data() + t * B * H;
    const float* c_prev = t > 0 ? s.cells.data() + (t - 1) * B * H : s.c0.data();
    const float* dy = grad_y.data() + t * B * H;
    float* dg = d_gates.data() + t * B * G;
    parallel_for(B, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (int64_t j = 0; j < H; ++j) {
          const int64_t r = b * G, k = b * H + j;
          const float i = act[r + j], f = act[r + H + j], g = act[r + 2 * H + j], o = act[r + 3 * H + j];
          const float tc = std::tanh(c[k]);
          const float dh_t = dy[k] + dhp[k];
          const float dc_t = dcp[k] + dh_t * o * (1 - tc * tc);
          dg[r + j] = dc_t * g * i * (1 - i);               // d i_pre
          dg[r + H + j] = dc_t * c_prev[k] * f * (1 - f);   // d f_pre
          dg[r + 2 * H + j] = dc_t * i * (1 - g * g);       // d g_pre
          dg[r + 3 * H + j] = dh_t * tc * o * (1 - o);      // d o_pre
          dcp[k] = dc_t * f;                                // d c_{t-1}
        }
    });
    // d h_{t-1} = dG_t W_hh  ([B,4H] x [4H,H])
    gemm(false, false, B, H, G, 1.0f, dg, G, s.w_hh.data(), H, 0.0f, dhp, H);
  }
  std::vector<Tensor> grads(7);  // x, h0, c0, w_ih, w_hh, b_ih, b_hh
  if (need[0]) {  // dx = dG W_ih
    grads[0] = Tensor::empty({T, B, in});
    gemm(false, false, T * B, in, G, 1.0f, d_gates.data(), G, s.w_ih.data(), in, 0.0f, grads[0].data(), in);
  }
  if (need[1]) grads[1] = dh;
  if (need[2]) grads[2] = dc;
  if (need[3]) {  // dW_ih = dG^T X
    grads[3] = Tensor::empty({G, in});
    gemm(true, false, G, in, T * B, 1.0f, d_gates.data(), G, s.x.data(), in, 0.0f, grads[3].data(), in);
  }
  if (need[4]) {  // dW_hh = sum_t dG_t^T h_{t-1}, with h_{t-1} rows = [h0; h_1..h_{T-1}]
    grads[4] = Tensor::empty({G, H});
    gemm(true, false, G, H, B, 1.0f, d_gates.data(), G, s.h0.data(), H, 0.0f, grads[4].data(), H);
    if (T > 1)
      gemm(true, false, G, H, (T - 1) * B, 1.0f, d_gates.data() + B * G, G, s.y.data(), H, 1.0f,
           grads[4].data(), H);
  }
  if (need[5] || need[6]) {
    const Tensor db = sum(d_gates, 0);
    if (need[5]) grads[5] = db;
    if (need[6]) grads[6] = db;
  }
  return grads;
}

}  // namespace

std::pair<Tensor, LSTMState> lstm_fused(const Tensor& x_in, const LSTMState& state, const LSTMWeights& w) {
  check_lstm_args(x_in, state, w);
  // Saved inputs are detached handles: the closure must not own graph nodes (reference cycles).
  Saved s{contiguous_data(x_in).detach(), contiguous_data(state.h).detach(), contiguous_data(state.c).detach(),
          contiguous_data(w.weight_ih).detach(), contiguous_data(w.weight_hh).detach(), {}, {}, {}};
  const int64_t T = s.x.size(0), B = s.x.size(1), in = s.x.size(2), H = s.h0.size(1), G = 4 * H;
  const Tensor b_ih = contiguous_data(w.bias_ih), b_hh = contiguous_data(w.bias_hh);

  // Gates of all steps from the inputs: [T*B,in] x [in,4H], plus both biases.
  s.acts = Tensor::empty({T * B, G});
  gemm(false, true, T * B, G, in, 1.0f, s.x.data(), in, s.w_ih.data(), in, 0.0f, s.acts.data(), G);
  float* acts = s.acts.data();
  parallel_for(T * B, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < G; ++j) acts[r * G + j] += b_ih.data()[j] + b_hh.data()[j];
  });
  s.cells = Tensor::empty({T * B, H});
  s.y = Tensor::empty({T + 1, B, H});
  const float* h_prev = s.h0.data();
  const float* c_prev = s.c0.data();
  for (int64_t t = 0; t < T; ++t) {
    float* gates = acts + t * B * G;
    gemm(false, true, B, G, H, 1.0f, h_prev, H, s.w_hh.data(), H, 1.0f, gates, G);
    float* c = s.cells.data() + t * B * H;
    float* h = s.y.data() + t * B * H;
    parallel_for(B, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        float* gr = gates + b * G;
        for (int64_t j = 0; j < H; ++j) {
          // Overwrite the pre-activations with the activations: backward needs only those.
          const float i = sigmoidf(gr[j]), f = sigmoidf(gr[H + j]);
          const float g = std::tanh(gr[2 * H + j]), o = sigmoidf(gr[3 * H + j]);
          gr[j] = i, gr[H + j] = f, gr[2 * H + j] = g, gr[3 * H + j] = o;
          const float cv = f * c_prev[b * H + j] + i * g;
          c[b * H + j] = cv;
          h[b * H + j] = o * std::tanh(cv);
        }
      }
    });
    h_prev = h;
    c_prev = c;
  }
  std::memcpy(s.y.data() + T * B * H, c_prev, sizeof(float) * B * H);

  const std::vector<bool> need = {x_in.requires_grad(), state.h.requires_grad(), state.c.requires_grad(),
                                  w.weight_ih.requires_grad(), w.weight_hh.requires_grad(),
                                  w.bias_ih.requires_grad(), w.bias_hh.requires_grad()};
  Saved saved = s;
  saved.y = s.y.detach();
  const Tensor y = record("lstm_fused", s.y, {x_in, state.h, state.c, w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh},
                          [saved, need](const Tensor& g) { return lstm_backward(saved, g, need); });
  const Tensor out = narrow(y, 0, 0, T);
  return {out, {reshape(narrow(y, 0, T - 1, 1), {B, H}), reshape(narrow(y, 0, T, 1), {B, H})}};
}

}  // namespace mg
