// The engine end to end: a 2-layer MLP learns a nonlinear 3-class problem with plain SGD, and one
// step of the LSTM built from ops learns the sign of a product; both losses must fall by a stated
// factor.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "nn/lstm.h"
#include "tests/test_util.h"

using namespace mg;

namespace {
void sgd_step(std::vector<Tensor>& params, float lr) {
  NoGradGuard no_grad;
  for (Tensor& p : params) {
    const std::vector<float> g = p.grad().to_vector();
    float* v = p.data();
    for (size_t i = 0; i < g.size(); ++i) v[i] -= lr * g[i];
    p.zero_grad();
  }
}
}  // namespace

TEST(ToyTraining, MlpLossFallsTenfold) {
  // Points in [-1,1]^2 labelled by which of three bands x0*x1 + x0^2 falls in: not linearly
  // separable.
  const int N = 128, H = 16, C = 3;
  Generator gen(11);
  const Tensor x = Tensor::uniform({N, 2}, -1, 1, gen);
  std::vector<int64_t> y(N);
  for (int i = 0; i < N; ++i) {
    const float a = x.at({i, 0}), b = x.at({i, 1}), s = a * b + a * a;
    y[i] = s < 0.0f ? 0 : (s < 0.5f ? 1 : 2);
  }
  std::vector<Tensor> params = {Tensor::uniform({H, 2}, -1, 1, gen).requires_grad_(),
                                Tensor::zeros({H}).requires_grad_(),
                                Tensor::uniform({C, H}, -0.5, 0.5, gen).requires_grad_(),
                                Tensor::zeros({C}).requires_grad_()};
  auto loss_fn = [&]() {
    const Tensor h = tanh(add(matmul(x, params[0], false, true), params[1]));  // [N,H]
    const Tensor logits = add(matmul(h, params[2], false, true), params[3]);   // [N,C]
    return nll_loss(log_softmax(logits, 1), y);
  };
  const float initial = loss_fn().item();
  for (int step = 0; step < 2000; ++step) {
    loss_fn().backward();
    sgd_step(params, 0.5f);
  }
  const float final_loss = loss_fn().item();
  EXPECT_LT(final_loss, initial / 10) << "initial " << initial << " final " << final_loss;
}

TEST(ToyTraining, LstmCellFromOpsLearns) {
  // One step of the LSTM built from ops (nn/lstm.h, gates i,f,g,o as in PyTorch) from a zero
  // state maps an input to a 2-class prediction.
  const int N = 64, In = 3, H = 8;
  Generator gen(12);
  const Tensor x = Tensor::uniform({N, In}, -1, 1, gen);
  std::vector<int64_t> y(N);
  for (int i = 0; i < N; ++i) y[i] = x.at({i, 0}) * x.at({i, 1}) > 0 ? 1 : 0;
  std::vector<Tensor> params = {Tensor::uniform({4 * H, In}, -0.5, 0.5, gen).requires_grad_(),
                                Tensor::zeros({4 * H}).requires_grad_(),
                                Tensor::uniform({2, H}, -0.5, 0.5, gen).requires_grad_()};
  const LSTMState zero{Tensor::zeros({N, H}), Tensor::zeros({N, H})};
  const Tensor no_recurrence = Tensor::zeros({4 * H, H}), no_bias = Tensor::zeros({4 * H});
  auto loss_fn = [&]() {
    const LSTMWeights w{params[0], no_recurrence, params[1], no_bias};
    const Tensor h = reshape(lstm_steps(reshape(x, {1, N, In}), zero, w).first, {N, H});
    return nll_loss(log_softmax(matmul(h, params[2], false, true), 1), y);
  };
  const float initial = loss_fn().item();
  for (int step = 0; step < 1500; ++step) {
    loss_fn().backward();
    sgd_step(params, 1.0f);
  }
  const float final_loss = loss_fn().item();
  EXPECT_LT(final_loss, initial / 4) << "initial " << initial << " final " << final_loss;
}
