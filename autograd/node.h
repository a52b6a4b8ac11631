// A node of the autograd graph: one op application, remembered so backward can run it in reverse.
//
// Every op that reads a tensor requiring grad returns a tensor whose grad_fn is a Node holding
// (1) the op's name, (2) the input tensors, (3) a function mapping d(loss)/d(output) to
// d(loss)/d(input) for each input. Ops live in autograd/ops_*.cpp, each forward next to its backward.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

// grad_output has the op's output shape; returns one gradient per input, in the order of `inputs`,
// each with that input's shape (an undefined Tensor means "no gradient for this input").
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  std::string op;             // "matmul", "log_softmax", ... — shown in graph dumps and errors
  std::vector<Tensor> inputs; // the tensors the op read (edges of the graph)
  BackwardFn backward;        // null once the graph has been freed by a backward pass
  Shape out_shape;            // for graph dumps
  uint64_t id = 0;            // creation order, handy as a gdb breakpoint condition

  // Releases the (possibly very deep) chain of upstream nodes iteratively: a 70-step, 3-layer LSTM
  // built from ops is thousands of nodes deep, and recursive shared_ptr destruction would overflow
  // the stack.
  Node();
  ~Node();
};

// Nodes alive right now, in all graphs: lets a test prove the graph is freed after backward.
int64_t live_node_count();

const std::string& node_op(const Node& node);

// Thread-local switch: inside a NoGradGuard scope no graph is recorded (evaluation, optimizer steps,
// and the backward pass itself).
bool is_grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Attaches a Node to `out` when grad mode is on and any input requires grad; returns `out`.
// This is the single place where the graph grows. `backward` must not capture `out` itself
// (that would be a reference cycle); capture out.detach() instead.
Tensor record(const std::string& op, Tensor out, std::vector<Tensor> inputs, BackwardFn backward);

}  // namespace mg
