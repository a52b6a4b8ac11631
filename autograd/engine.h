// The backward pass: walks the graph from a root in reverse topological order.
#pragma once

#include <functional>
#include <string>

#include "autograd/node.h"

namespace mg {

// Adds d(root)/d(leaf) * grad_output into .grad of every leaf that requires grad, then frees the
// graph (each node's inputs and backward function are released). Called by Tensor::backward.
void run_backward(const Tensor& root, const Tensor& grad_output);

// Runs one node's backward for run_backward; a function of its own so that gdb can stop at every
// op's backward by name: `break mg::backward_of` (node.op is the op, grad the gradient flowing in,
// `condition N node.id == 3` picks one node), and two `step`s enter the op's lambda.
std::vector<Tensor> backward_of(Node& node, const Tensor& grad);

// While a GradientWatch is alive on this thread, run_backward calls it with each node and the
// gradient flowing into it (d root / d the node's output, summed over its users) just before the
// node's backward runs: `mosgrad graph --values` shows them. Off: one branch per node.
class GradientWatch {
 public:
  explicit GradientWatch(std::function<void(const Node& node, const Tensor& grad)> watch);
  ~GradientWatch();
  GradientWatch(const GradientWatch&) = delete;
  GradientWatch& operator=(const GradientWatch&) = delete;

 private:
  std::function<void(const Node&, const Tensor&)> watch_;
  const std::function<void(const Node&, const Tensor&)>* previous_;
};

// The graph below `root`, one node per line, indented by depth (inputs listed under their user).
std::string graph_text(const Tensor& root);
// The same graph in Graphviz DOT: `dot -Tsvg graph.dot > graph.svg`.
std::string graph_dot(const Tensor& root);
// The first line of every such graph (also of analysis/model_graph.h's): how `graph --out` tells
// its own earlier file from a user's before it spends a forward pass on a new one.
inline constexpr const char* kGraphDotFirstLine = "digraph autograd {";

}  // namespace mg

// For gdb: `call mg_print_graph(&t)` prints graph_text(t) to stderr, one node per line (`p
// mg::graph_text(t)` shows the same text as one escaped string).
extern "C" void mg_print_graph(const mg::Tensor* root);
