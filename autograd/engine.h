// The backward pass: walks the graph from a root in reverse topological order.
#pragma once

#include <string>

#include "autograd/node.h"

namespace mg {

// Adds d(root)/d(leaf) * grad_output into .grad of every leaf that requires grad, then frees the
// graph (each node's inputs and backward function are released). Called by Tensor::backward.
void run_backward(const Tensor& root, const Tensor& grad_output);

// The graph below `root`, one node per line, indented by depth (inputs listed under their user).
std::string graph_text(const Tensor& root);
// The same graph in Graphviz DOT: `dot -Tsvg graph.dot > graph.svg`.
std::string graph_dot(const Tensor& root);

}  // namespace mg
