// The fused LSTM: the whole sequence is one autograd node.
//
// Forward: one GEMM for all input projections [T*B,in]x[in,4H], then per step the product
// h_{t-1} W_hh^T accumulated into the gates, and the gate nonlinearities + cell update in a single
// vectorized pass. The steps run inside one OpenMP team with a barrier per step (parallel_team),
// not a parallel region per step: at B = 10-20 a step is only tens of microseconds of work. Each
// thread owns a slice of hidden units and computes the per-step product for its columns of the
// four gate blocks (four single-threaded GEMM calls).
// Backward (BPTT in one pass, t = T-1 .. 0) turns d h_t, d c_T into the pre-activation gate
// gradients dG_t, in the same kind of team; the weight gradients are then big GEMMs over all
// steps at once.
//
// One node has one output, so the op returns a packed tensor Y [T+1,B,H]: rows 0..T-1 are h_1..h_T
// (the layer output; h_T is also the final hidden state) and row T is c_T. lstm_fused() hands out
// views of it.
#include <cmath>
#include <cstring>

#include "autograd/ops.h"
#include "cuda/backend.h"
#include "math/formulas.h"
#include "nn/gate_stats.h"
#include "nn/lstm.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/vec_math.h"

namespace mg {

namespace {

// Below this many multiply-adds per step (B x 4H x H) one core finishes a step before a second one
// would have synchronised with it: the tiny preset (16 x 256 x 64) runs on one thread.
constexpr double kTeamMinWork = 1 << 20;
// Threads split the hidden units at multiples of the vector width, so each one's gate loops run
// in whole vectors and the split never changes which elements take a vector's or a tail's path.
constexpr int64_t kUnitAlign = 16;

int team_size(int64_t B, int64_t H) {
  return static_cast<double>(B) * 4 * H * H >= kTeamMinWork ? num_threads() : 1;
}

// The gate pass of one batch row over n hidden units (Hochreiter & Schmidhuber 1997, with the
// forget gate of Gers et al. 2000; the cell's formula, lstm_cell_forward, is math/formulas.h's,
// which the GPU's kernels call too). z points at the row's pre-activations [4H], offset to the
// first unit, gate block q at z + q*H; they are overwritten with the activations, which is all
// backward needs. Plain loops over restrict pointers, so that the compiler vectorizes them.
void gates_forward(int64_t n, int64_t H, float* __restrict z, const float* __restrict bias,
                   const float* __restrict c_prev, float* __restrict c, float* __restrict h) {
  float* __restrict zi = z;
  float* __restrict zf = z + H;
  float* __restrict zg = z + 2 * H;
  float* __restrict zo = z + 3 * H;
  const float* __restrict bi = bias;
  const float* __restrict bf = bias + H;
  const float* __restrict bg = bias + 2 * H;
  const float* __restrict bo = bias + 3 * H;
  for (int64_t j = 0; j < n; ++j) {
    const LstmCell u =
        lstm_cell_forward(zi[j] + bi[j], zf[j] + bf[j], zg[j] + bg[j], zo[j] + bo[j], c_prev[j]);
    zi[j] = u.i, zf[j] = u.f, zg[j] = u.g, zo[j] = u.o;
    c[j] = u.c;  // c_t = f ⊙ c_{t-1} + i ⊙ g
    h[j] = u.h;  // h_t = o ⊙ tanh(c_t)
  }
}

struct Saved {
  Tensor x, h0, c0, w_ih, w_hh;  // inputs (detached)
  Tensor acts;                   // [T*B,4H] post-activation i, f, g, o of every step
  Tensor cells;                  // [T*B,H]  c_t of every step
  Tensor y;                      // [T+1,B,H] the packed output (h_t rows, then c_T)
};

// Backward and the node, below the forward.
std::vector<Tensor> lstm_backward(const Saved& s, const Tensor& grad_y_in,
                                  const std::vector<bool>& need);
std::pair<Tensor, LSTMState> record_lstm(Saved& s, const Tensor& x_in, const LSTMState& state,
                                         const LSTMWeights& w);

}  // namespace

std::pair<Tensor, LSTMState> lstm_fused(const Tensor& x_in, const LSTMState& state,
                                        const LSTMWeights& w) {
  check_lstm_args(x_in, state, w);
  // Saved inputs are detached handles: the closure must not own graph nodes (reference cycles).
  Saved s{contiguous_data(x_in).detach(),
          contiguous_data(state.h).detach(),
          contiguous_data(state.c).detach(),
          contiguous_data(w.weight_ih).detach(),
          contiguous_data(w.weight_hh).detach(),
          {},
          {},
          {}};
  const int64_t T = s.x.size(0), B = s.x.size(1), in = s.x.size(2), H = s.h0.size(1), G = 4 * H;
  check_same_device("lstm",
                    {x_in, state.h, state.c, w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh});
  // Both biases in one vector, added in the gate pass below.
  const Tensor bias = add(contiguous_data(w.bias_ih).detach(), contiguous_data(w.bias_hh).detach());
  if (s.x.is_cuda()) {
    s.acts = Tensor::empty({T * B, G}, Device::CUDA);
    s.cells = Tensor::empty({T * B, H}, Device::CUDA);
    s.y = Tensor::empty({T + 1, B, H}, Device::CUDA);
    cuda_lstm_forward(T, B, in, H, s.x.data_ptr(), s.h0.data_ptr(), s.c0.data_ptr(),
                      s.w_ih.data_ptr(), s.w_hh.data_ptr(), bias.data_ptr(), s.acts.data_ptr(),
                      s.cells.data_ptr(), s.y.data_ptr());
    return record_lstm(s, x_in, state, w);
  }
  // Gates of all steps from the inputs: [T*B,in] x [in,4H].
  s.acts = Tensor::empty({T * B, G});
  gemm(false, true, T * B, G, in, 1.0f, s.x.data(), in, s.w_ih.data(), in, 0.0f, s.acts.data(), G);
  s.cells = Tensor::empty({T * B, H});
  s.y = Tensor::empty({T + 1, B, H});
  float* acts = s.acts.data();
  const float* bsum = bias.data();
  // One team for the whole sequence: each thread owns hidden units [u0, u1), i.e. those columns of
  // each gate block. Per step it computes its columns of h_{t-1} W_hh^T, applies the gates to its
  // units and writes its part of h_t, c_t; the barrier then makes all of h_t visible for the next
  // step's product.
  // Each thread packs its columns of W_hh^T once for all T steps (mg::PackedB), instead of gemm()
  // reading them in place (AMD) or packing them again at every step: the same bits, 13% faster in
  // FP32 on Zen 5 (a B micro-panel is then contiguous), and 1.8x under --precision bf16, where
  // every gemm() call would round and pair all of them again (bench/bench_gemm.cpp,
  // 20x400@400x1600 with and without -prepacked).
  // Under --gemm reference the packing is a plain copy that the textbook loop reads (tensor/gemm.h).
  parallel_team(
      H, kUnitAlign, team_size(B, H), [&](int64_t u0, int64_t u1, const TeamBarrier& barrier) {
        PackedB w_gate[4];  // W_hh^T[:, qH+u0 : qH+u1] = rows qH+u0 .. qH+u1 of W_hh, transposed
        if (u1 > u0)
          for (int64_t q = 0; q < 4; ++q)
            w_gate[q] = PackedB(true, H, u1 - u0, s.w_hh.data() + (q * H + u0) * H, H);
        for (int64_t t = 0; t < T; ++t) {
          const float* h_prev = t > 0 ? s.y.data() + (t - 1) * B * H : s.h0.data();
          const float* c_prev = t > 0 ? s.cells.data() + (t - 1) * B * H : s.c0.data();
          float* gates = acts + t * B * G;
          float* c = s.cells.data() + t * B * H;
          float* h = s.y.data() + t * B * H;
          if (u1 > u0)
            for (int64_t q = 0; q < 4; ++q)  // gate block q (i, f, g, o), columns u0..u1
              gemm_packed_b(B, u1 - u0, H, 1.0f, h_prev, H, w_gate[q], 1.0f, gates + q * H + u0, G);
          for (int64_t b = 0; b < B; ++b)
            gates_forward(u1 - u0, H, gates + b * G + u0, bsum + u0, c_prev + b * H + u0,
                          c + b * H + u0, h + b * H + u0);
          barrier();
        }
      });
  std::memcpy(s.y.data() + T * B * H, s.cells.data() + (T - 1) * B * H, sizeof(float) * B * H);
  return record_lstm(s, x_in, state, w);
}

namespace {

// The autograd node over the whole sequence, and the views lstm_fused hands out.
std::pair<Tensor, LSTMState> record_lstm(Saved& s, const Tensor& x_in, const LSTMState& state,
                                         const LSTMWeights& w) {
  const int64_t T = s.x.size(0), B = s.x.size(1), H = s.h0.size(1);
  if (gate_stats_wanted())  // --log-stats on a logged step (nn/gate_stats.h)
    report_gate_saturation(s.acts.cpu().data(), T * B, H);
  const std::vector<bool> need = {x_in.requires_grad(),        state.h.requires_grad(),
                                  state.c.requires_grad(),     w.weight_ih.requires_grad(),
                                  w.weight_hh.requires_grad(), w.bias_ih.requires_grad(),
                                  w.bias_hh.requires_grad()};
  Saved saved = s;
  saved.y = s.y.detach();
  const Tensor y = record("lstm_fused", s.y,
                          {x_in, state.h, state.c, w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh},
                          [saved, need](const Tensor& g) { return lstm_backward(saved, g, need); });
  const Tensor out = narrow(y, 0, 0, T);
  return {out, {reshape(narrow(y, 0, T - 1, 1), {B, H}), reshape(narrow(y, 0, T, 1), {B, H})}};
}

// Backward of gates_forward for one batch row over n units: from d h_t (dy from above plus dh from
// step t+1) and d c_t (dc, overwritten with d c_{t-1}) to the pre-activation gradients dz [4H].
void gates_backward(int64_t n, int64_t H, const float* __restrict act, const float* __restrict c,
                    const float* __restrict c_prev, const float* __restrict dy,
                    const float* __restrict dh, float* __restrict dc, float* __restrict dz) {
  const float* __restrict ai = act;
  const float* __restrict af = act + H;
  const float* __restrict ag = act + 2 * H;
  const float* __restrict ao = act + 3 * H;
  float* __restrict di = dz;
  float* __restrict df = dz + H;
  float* __restrict dg = dz + 2 * H;
  float* __restrict d_o = dz + 3 * H;
  for (int64_t j = 0; j < n; ++j) {
    const LstmCellGrad d =
        lstm_cell_backward(ai[j], af[j], ag[j], ao[j], c[j], c_prev[j], dy[j] + dh[j], dc[j]);
    di[j] = d.di, df[j] = d.df, dg[j] = d.dg, d_o[j] = d.d_o;
    dc[j] = d.dc_prev;  // d c_{t-1}
  }
}

// The input and weight gradients from the gate gradients dG [T*B,4H]: big GEMMs over all steps at
// once, the same on both devices (gemm_fn is the CPU gemm or cuBLAS with the same contract).
std::vector<Tensor> lstm_weight_grads(const Saved& s, const Tensor& d_gates, const Tensor& dh,
                                      const Tensor& dc, const std::vector<bool>& need) {
  const int64_t T = s.x.size(0), B = s.x.size(1), in = s.x.size(2), H = s.h0.size(1), G = 4 * H;
  const Device dev = s.x.device();
  const auto gemm_fn = dev == Device::CUDA ? cuda_gemm : gemm;
  const float* dg = d_gates.data_ptr();
  std::vector<Tensor> grads(7);  // x, h0, c0, w_ih, w_hh, b_ih, b_hh
  if (need[0]) {                 // dx = dG W_ih
    grads[0] = Tensor::empty({T, B, in}, dev);
    gemm_fn(false, false, T * B, in, G, 1.0f, dg, G, s.w_ih.data_ptr(), in, 0.0f,
            grads[0].data_ptr(), in);
  }
  if (need[1]) grads[1] = dh;
  if (need[2]) grads[2] = dc;
  if (need[3]) {  // dW_ih = dG^T X
    grads[3] = Tensor::empty({G, in}, dev);
    gemm_fn(true, false, G, in, T * B, 1.0f, dg, G, s.x.data_ptr(), in, 0.0f, grads[3].data_ptr(),
            in);
  }
  if (need[4]) {  // dW_hh = sum_t dG_t^T h_{t-1}, with h_{t-1} rows = [h0; h_1..h_{T-1}]
    grads[4] = Tensor::empty({G, H}, dev);
    gemm_fn(true, false, G, H, B, 1.0f, dg, G, s.h0.data_ptr(), H, 0.0f, grads[4].data_ptr(), H);
    if (T > 1)
      gemm_fn(true, false, G, H, (T - 1) * B, 1.0f, dg + B * G, G, s.y.data_ptr(), H, 1.0f,
              grads[4].data_ptr(), H);
  }
  if (need[5] || need[6]) {
    const Tensor db = sum(d_gates, 0);
    if (need[5]) grads[5] = db;
    if (need[6]) grads[6] = db;
  }
  return grads;
}

std::vector<Tensor> lstm_backward(const Saved& s, const Tensor& grad_y_in,
                                  const std::vector<bool>& need) {
  const Tensor grad_y = contiguous_data(grad_y_in);
  const int64_t T = s.x.size(0), B = s.x.size(1), H = s.h0.size(1), G = 4 * H;
  // The same BPTT on the GPU (cuda/lstm_fused.cu): one persistent launch, per-unit kernels, or a
  // gate kernel and a cuBLAS GEMM per step, whichever fits B and H.
  if (grad_y.is_cuda()) {
    Tensor d_gates = Tensor::empty({T * B, G}, Device::CUDA);
    Tensor dh = Tensor::empty({B, H}, Device::CUDA), dc = Tensor::empty({B, H}, Device::CUDA);
    cuda_lstm_backward(T, B, H, s.acts.data_ptr(), s.cells.data_ptr(), s.c0.data_ptr(),
                       s.w_hh.data_ptr(), grad_y.data_ptr(), need[1], d_gates.data_ptr(),
                       dh.data_ptr(), dc.data_ptr());
    return lstm_weight_grads(s, d_gates, dh, dc, need);
  }
  Tensor d_gates = Tensor::empty({T * B, G});
  Tensor dh = Tensor::zeros({B, H});  // d loss / d h_t from step t+1
  Tensor dc =
      copy_contiguous(reshape(narrow(grad_y, 0, T, 1), {B, H}));  // d loss / d c_t, from d c_T
  float* dcp = dc.data();
  float* dhp = dh.data();
  const float* w_hh = s.w_hh.data();
  // One team for the whole sequence: each thread owns hidden units [u0, u1), i.e. those columns of
  // dh, dc and of each gate block of dG. Per step it turns its units' dh_t, dc_t into dG_t, waits
  // until every thread has written its part of dG_t, then computes its columns of
  // dh_{t-1} = dG_t W_hh ([B,4H] x [4H,H]). The next step reads only its own columns again, so one
  // barrier per step suffices.
  parallel_team(
      H, kUnitAlign, team_size(B, H), [&](int64_t u0, int64_t u1, const TeamBarrier& barrier) {
        PackedB w_cols;  // W_hh[:, u0:u1], packed once for all steps
        if (u1 > u0) w_cols = PackedB(false, G, u1 - u0, w_hh + u0, H);
        for (int64_t t = T - 1; t >= 0; --t) {
          const float* act = s.acts.data() + t * B * G;
          const float* c = s.cells.data() + t * B * H;
          const float* c_prev = t > 0 ? s.cells.data() + (t - 1) * B * H : s.c0.data();
          const float* dy = grad_y.data() + t * B * H;
          float* dg = d_gates.data() + t * B * G;
          for (int64_t b = 0; b < B; ++b)
            gates_backward(u1 - u0, H, act + b * G + u0, c + b * H + u0, c_prev + b * H + u0,
                           dy + b * H + u0, dhp + b * H + u0, dcp + b * H + u0, dg + b * G + u0);
          barrier();
          // d h_{t-1}[:, u0:u1] = dG_t W_hh[:, u0:u1] (W_hh [4H,H]): from the columns packed once
          // per sequence (w_cols).
          if (u1 > u0 && (t > 0 || need[1]))
            gemm_packed_b(B, u1 - u0, G, 1.0f, dg, G, w_cols, 0.0f, dhp + u0, H);
        }
      });
  return lstm_weight_grads(s, d_gates, dh, dc, need);
}

}  // namespace

}  // namespace mg
