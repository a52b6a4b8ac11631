// The general differentiable ops. Each is defined in autograd/ops_*.cpp with its backward
// written right next to its forward. (Two more ops, each one node with its own backward, live
// with the layer they serve: the fused LSTM, nn/lstm_fused.cpp, and the fused head loss,
// nn/fused_head_loss.cpp.) Ops never modify their inputs and record a graph node only
// when grad mode is on and an input requires grad.
//
// Shapes use the legend of tensor/shape.h (B batch, T time, E embedding, H hidden, V vocabulary,
// K experts, N = T*B rows).
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/node.h"
#include "tensor/tensor.h"

namespace mg {

// ---- elementwise binary, numpy broadcasting (ops_binary.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);  // a, b: broadcastable
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);  // also "mul-by-mask" for dropout: mul(x, mask)
Tensor div(const Tensor& a, const Tensor& b);
Tensor add_scalar(const Tensor& a, float s);
Tensor mul_scalar(const Tensor& a, float s);
Tensor neg(const Tensor& a);
// Sums `grad` over the dims that broadcasting expanded, giving a tensor of `shape`: the backward of
// every broadcasting op.
Tensor sum_to(const Tensor& grad, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator-(const Tensor& a) {
  return neg(a);
}
inline Tensor operator*(const Tensor& a, float s) {
  return mul_scalar(a, s);
}
inline Tensor operator*(float s, const Tensor& a) {
  return mul_scalar(a, s);
}
inline Tensor operator+(const Tensor& a, float s) {
  return add_scalar(a, s);
}

// ---- elementwise unary (ops_unary.cpp) ----
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor log_sigmoid(const Tensor& x);  // log(sigmoid(x)), stable for |x| large
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor square(const Tensor& x);

// ---- matrix products (ops_matmul.cpp) ----
// 2-D: op(a)[M,K] x op(b)[K,N] -> [M,N], where op transposes when the flag is set
// (a is [K,M] when transpose_a). matmul(x, W, false, true) is a Linear layer's x W^T.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
// Batched: a [G,M,K], b [G,K,N] -> [G,M,N] (with the same transpose flags per batch).
Tensor bmm(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// ---- reductions (ops_reduce.cpp) ----
Tensor sum(const Tensor& x);  // -> scalar []
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);  // -> scalar []
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
Tensor logsumexp(const Tensor& x, int dim, bool keepdim = false);

// ---- softmax family (ops_softmax.cpp) ----
Tensor softmax(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);

// ---- shape and layout (ops_shape.cpp); views share storage where the layout allows ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one size may be -1
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);
Tensor contiguous(const Tensor& x);  // x itself when already row-major
Tensor unsqueeze(const Tensor& x, int dim);
Tensor cat(const std::vector<Tensor>& xs, int dim);
Tensor stack(const std::vector<Tensor>& xs, int dim);

// ---- indexing (ops_index.cpp) ----
// Rows of `table` [R,C] picked by `index` (each in [0,R)): -> [n,C]. Backward scatter-adds into the
// rows (an embedding lookup: table = encoder.weight [V,E], index = token ids).
Tensor index_select(const Tensor& table, const std::vector<int64_t>& index);
// index_select(mul(table, row_scale), index) without the [R,C] product: row i of the output is row
// index[i] of table times row_scale[index[i]] (row_scale [R,1], no gradient; an embedding dropout
// mask). Only the looked-up rows are scaled, forward and backward, with the same bits as the two
// ops: the scatter-add, then each touched row of the gradient times its scale.
Tensor index_select_scaled(const Tensor& table, const std::vector<int64_t>& index,
                           const Tensor& row_scale);
// Elements x[i, index[i]] of x [N,C] -> [N] (reads the log-prob of each target).
Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& index);

// ---- losses (ops_loss.cpp) ----
// Mean negative log-likelihood: -mean_i logp[i, target[i]], logp [N,V] -> scalar [].
Tensor nll_loss(const Tensor& logp, const std::vector<int64_t>& target);

}  // namespace mg
