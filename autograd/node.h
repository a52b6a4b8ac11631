// A node of the autograd graph: one op application, remembered so backward can run it in reverse.
//
// Every op that reads a tensor requiring grad returns a tensor whose grad_fn is a Node holding
// (1) the op's name, (2) the input tensors, (3) a function mapping d(loss)/d(output) to
// d(loss)/d(input) for each input. Ops live in autograd/ops_*.cpp, each forward next to its
// backward.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

// An op's backward: grad_output has the op's output shape; returns one gradient per input, in the
// order of `inputs`, each with that input's shape (an undefined Tensor means "no gradient for this
// input").
//
// It holds the op's lambda as std::function would, but the engine calls it through one plain
// function, call<F> (backward_of in autograd/engine.cpp). Through std::function, gdb's `step` from
// the engine into the lambda took some twenty steps across library internals; here it takes two:
// the first stops in call<F>, whose template argument names the op
// (call<mg::mul(const Tensor&, const Tensor&)::<lambda(const mg::Tensor&)> >), the second in the
// op's lambda. (A call operator would add a third: gdb stops in inlined wrappers too.)
class BackwardFn {
 public:
  BackwardFn() = default;
  BackwardFn(std::nullptr_t) {}
  template <typename F, typename Fn = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<Fn, BackwardFn> &&
                                        !std::is_same_v<Fn, std::nullptr_t>>>
  BackwardFn(F&& fn) : fn_(new Fn(std::forward<F>(fn))), call_(&call<Fn>), destroy_(&destroy<Fn>) {}
  BackwardFn(BackwardFn&& other) noexcept { swap(other); }
  BackwardFn& operator=(BackwardFn&& other) noexcept {
    BackwardFn(std::move(other)).swap(*this);
    return *this;
  }
  // The captures are destroyed after this handle is already empty: destroying them may release
  // tensors and nodes, which must not see a half-reset function.
  BackwardFn& operator=(std::nullptr_t) {
    BackwardFn().swap(*this);
    return *this;
  }
  BackwardFn(const BackwardFn&) = delete;
  BackwardFn& operator=(const BackwardFn&) = delete;
  ~BackwardFn() {
    if (destroy_) destroy_(fn_);
  }

  explicit operator bool() const { return call_ != nullptr; }

 private:
  friend std::vector<Tensor> backward_of(Node& node, const Tensor& grad);  // the one caller
  template <typename F>
  static std::vector<Tensor> call(void* fn, const Tensor& grad_output) {
    return (*static_cast<F*>(fn))(grad_output);  // gdb: `step` once more to enter the op's backward
  }
  template <typename F>
  static void destroy(void* fn) {
    delete static_cast<F*>(fn);
  }
  void swap(BackwardFn& other) noexcept {
    std::swap(fn_, other.fn_);
    std::swap(call_, other.call_);
    std::swap(destroy_, other.destroy_);
  }

  void* fn_ = nullptr;  // the op's lambda, of the type call_ and destroy_ were made for
  std::vector<Tensor> (*call_)(void*, const Tensor&) = nullptr;
  void (*destroy_)(void*) = nullptr;
};

struct Node {
  std::string op;              // "matmul", "log_softmax", ... — shown in graph dumps and errors
  std::vector<Tensor> inputs;  // the tensors the op read (edges of the graph)
  BackwardFn backward;         // null once the graph has been freed by a backward pass
  Shape out_shape;             // for graph dumps
  uint64_t id = 0;             // creation order, handy as a gdb breakpoint condition
  std::string context;         // anomaly mode only: where in the model it was made ("rnns.0")

  // Releases the (possibly very deep) chain of upstream nodes iteratively: a 70-step, 3-layer LSTM
  // built from ops is thousands of nodes deep, and recursive shared_ptr destruction would overflow
  // the stack.
  Node();
  ~Node();
};

// Nodes alive right now, in all graphs: lets a test prove the graph is freed after backward.
int64_t live_node_count();

const std::string& node_op(const Node& node);

// Thread-local switch: inside a NoGradGuard scope no graph is recorded (evaluation, optimizer
// steps, and the backward pass itself).
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

// An op's inputs as anomaly mode's errors name them: each one's index, name, shape, the op and node
// number that made it, and whether it already held a NaN or an Inf; "none" without any.
std::string describe_inputs(const std::vector<Tensor>& inputs);

}  // namespace mg
