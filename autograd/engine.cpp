#include "autograd/engine.h"

#include <iostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/not_implemented.h"

namespace mg {

namespace {

// Post-order of the nodes reachable from `root` (inputs before their users), by an explicit-stack
// depth-first search: a deep unrolled LSTM would overflow a recursive one.
std::vector<std::shared_ptr<Node>> topological_order(const std::shared_ptr<Node>& root) {
  // TASK 2.1: every node after the nodes of its inputs, each once, with a stack of your own
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    Node* node = stack.back().first.get();
    const size_t next = stack.back().second++;
    if (next < node->inputs.size()) {
      const Tensor& in = node->inputs[next];
      if (in.defined() && in.grad_fn() && seen.insert(in.grad_fn().get()).second)
        stack.emplace_back(in.grad_fn(), 0);
    } else {
      order.push_back(std::move(stack.back().first));
      stack.pop_back();
    }
  }
  return order;
  // END TASK 2.1
}

// True when nothing but this handle can see t's numbers: its own storage, whole and contiguous, and
// no other handle to it (a backward may return one tensor for two inputs, as add does).
bool sole_owner(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  return t.impl_ptr().use_count() == 1 && impl.storage.use_count() == 1 && impl.offset == 0 &&
         t.is_contiguous() && static_cast<size_t>(t.numel()) == impl.storage->size &&
         !impl.grad_fn && !impl.requires_grad && !impl.grad;
}

// may_adopt: grad was just returned by a backward function, so the engine's vector holds the only
// handle when sole_owner() says so. Not for the gradient a caller passed to backward(): their
// variable is a single handle too, and it must not become the leaf's gradient.
void accumulate_into_leaf(const Tensor& leaf, const Tensor& grad, bool may_adopt) {
  TensorImpl& impl = leaf.impl();
  check_same_device("backward: the gradient of '" + leaf.name() + "'", {leaf, grad});
  if (!impl.grad) {
    // The leaf must own its gradient: `grad` may be a view of another node's gradient, or shared.
    // A gradient nobody else holds is adopted as is (a weight's gradient is millions of floats).
    impl.grad = may_adopt && sole_owner(grad) ? grad.impl_ptr() : copy_contiguous(grad).impl_ptr();
    return;
  }
  Tensor acc(impl.grad);
  Tensor g = grad.is_contiguous() ? grad : copy_contiguous(grad);
  if (acc.is_cuda()) {
    cuda_accumulate(acc.data_ptr(), g.data_ptr(), acc.numel());
    return;
  }
  float* a = acc.data();
  const float* b = g.data();
  parallel_for(acc.numel(), kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    float* __restrict to = a;
    const float* __restrict from = b;
    for (int64_t i = i0; i < i1; ++i) to[i] += from[i];
  });
}

}  // namespace

namespace {
thread_local const std::function<void(const Node&, const Tensor&)>* t_gradient_watch = nullptr;
}  // namespace

GradientWatch::GradientWatch(std::function<void(const Node&, const Tensor&)> watch)
    : watch_(std::move(watch)), previous_(t_gradient_watch) {
  t_gradient_watch = &watch_;
}

GradientWatch::~GradientWatch() {
  t_gradient_watch = previous_;
}

std::vector<Tensor> backward_of(Node& node, const Tensor& grad) {
  return node.backward.call_(node.backward.fn_, grad);
}

void run_backward(const Tensor& root, const Tensor& grad_output) {
  if (!root.requires_grad())
    throw std::logic_error(
        "backward: this tensor does not require grad — nothing that requires grad was used to "
        "compute it, or it was computed inside a NoGradGuard");
  if (root.is_leaf()) {
    accumulate_into_leaf(root, grad_output, /*may_adopt=*/false);
    return;
  }
  const std::vector<std::shared_ptr<Node>> order = topological_order(root.grad_fn());
  NoGradGuard no_grad;  // backward functions use the same ops, without recording
  std::unordered_map<const Node*, Tensor> pending;  // d(root)/d(output of node), summed over users
  pending[root.grad_fn().get()] = grad_output;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    auto found = pending.find(&node);
    if (found == pending.end()) continue;
    const Tensor grad = std::move(found->second);
    pending.erase(found);
    if (!node.backward)
      throw std::logic_error("backward: the graph through '" + node.op +
                             "' was already freed by an earlier backward(); run the forward again");
    const bool anomaly = anomaly_enabled();
    if (t_gradient_watch) (*t_gradient_watch)(node, grad);
    std::vector<Tensor> input_grads;
    {
      const AnomalyPause pause;  // check_backward below names this node, not an op inside it
      input_grads = backward_of(node, grad);
    }
    if (input_grads.size() != node.inputs.size())
      throw std::logic_error(node.op + " backward returned " + std::to_string(input_grads.size()) +
                             " gradients for " + std::to_string(node.inputs.size()) + " inputs");
    if (anomaly)  // off: one branch
      check_backward({node.op, node.id, node.context, node.out_shape,
                      [&node] { return describe_inputs(node.inputs); }},
                     grad, input_grads);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Tensor& in = node.inputs[i];
      const Tensor& g = input_grads[i];
      if (!in.defined() || !in.requires_grad() || !g.defined()) continue;
      if (g.shape() != in.shape())
        throw std::logic_error(node.op + " backward: gradient " + shape_str(g.shape()) +
                               " does not match input " + std::to_string(i) + " of shape " +
                               shape_str(in.shape()));
      if (in.is_leaf()) {
        accumulate_into_leaf(in, g, /*may_adopt=*/true);
      } else {
        Tensor& slot = pending[in.grad_fn().get()];
        slot = slot.defined() ? add(slot, g) : g;
      }
    }
    // Free this part of the graph now: activations die as soon as they are no longer needed.
    node.backward = nullptr;
    node.inputs.clear();
  }
}

namespace {

std::string describe(const Tensor& t) {
  std::string s = shape_str(t.shape());
  if (!t.name().empty()) s = t.name() + " " + s;
  return s;
}

}  // namespace

std::string graph_text(const Tensor& root) {
  std::ostringstream os;
  os << describe(root) << (root.grad_fn() ? " <- " + root.grad_fn()->op : " (leaf)") << '\n';
  if (!root.grad_fn()) return os.str();
  // Explicit stack of (node, depth); a node reached twice is printed once, then referred to by id.
  std::unordered_set<const Node*> printed;
  std::vector<std::pair<const Node*, int>> stack{{root.grad_fn().get(), 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (!printed.insert(node).second) continue;
    for (size_t i = node->inputs.size(); i-- > 0;) {
      const Tensor& in = node->inputs[i];
      if (in.defined() && in.grad_fn()) stack.emplace_back(in.grad_fn().get(), depth + 1);
    }
    os << std::string(2 * depth, ' ') << '#' << node->id << ' ' << node->op << " -> "
       << shape_str(node->out_shape) << "  inputs:";
    for (const Tensor& in : node->inputs) {
      if (!in.defined()) continue;
      os << ' ' << describe(in);
      if (in.grad_fn())
        os << "(#" << in.grad_fn()->id << ')';
      else if (in.requires_grad())
        os << "(leaf)";
    }
    os << '\n';
  }
  return os.str();
}

std::string graph_dot(const Tensor& root) {
  std::ostringstream os;
  os << kGraphDotFirstLine << "\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n";
  if (!root.grad_fn()) return os.str() + "}\n";
  std::unordered_set<const Node*> seen{root.grad_fn().get()};
  std::unordered_set<const TensorImpl*> leaves;
  std::vector<const Node*> stack{root.grad_fn().get()};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    os << "  n" << node->id << " [shape=box,label=\"" << node->op << "\\n"
       << shape_str(node->out_shape) << "\"];\n";
    for (const Tensor& in : node->inputs) {
      if (!in.defined() || !in.requires_grad()) continue;
      if (in.grad_fn()) {
        os << "  n" << in.grad_fn()->id << " -> n" << node->id << ";\n";
        if (seen.insert(in.grad_fn().get()).second) stack.push_back(in.grad_fn().get());
      } else {
        const TensorImpl* leaf = in.impl_ptr().get();
        os << "  l" << leaf << " -> n" << node->id << ";\n";
        if (leaves.insert(leaf).second)
          os << "  l" << leaf << " [shape=ellipse,style=filled,fillcolor=lightblue,label=\""
             << describe(in) << "\"];\n";
      }
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace mg

extern "C" void mg_print_graph(const mg::Tensor* root) {
  std::cerr << mg::graph_text(*root) << std::flush;
}
