#include "autograd/node.h"

#include <atomic>

#include "autograd/anomaly.h"

namespace mg {

namespace {
thread_local bool g_grad_enabled = true;
std::atomic<uint64_t> g_next_node_id{1};
std::atomic<int64_t> g_live_nodes{0};

// Moves out the upstream nodes that only this node keeps alive, so the caller can release them
// one at a time instead of through nested destructors.
void detach_inputs(Node& node, std::vector<std::shared_ptr<Node>>& pending) {
  std::vector<Tensor> inputs = std::move(node.inputs);
  node.inputs.clear();
  node.backward = nullptr;  // its captures may hold the same inputs; drop them first
  for (Tensor& t : inputs) {
    if (!t.defined() || t.impl_ptr().use_count() != 1) continue;
    std::shared_ptr<Node>& up = t.impl().grad_fn;
    if (up && up.use_count() == 1) pending.push_back(std::move(up));
  }
}
}  // namespace

Node::Node() {
  ++g_live_nodes;
}
int64_t live_node_count() {
  return g_live_nodes.load();
}

Node::~Node() {
  --g_live_nodes;
  std::vector<std::shared_ptr<Node>> pending;
  detach_inputs(*this, pending);
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    detach_inputs(*node, pending);
  }  // each node is destroyed here with no inputs left: no recursion
}

const std::string& node_op(const Node& node) {
  return node.op;
}

namespace {
// Lets Tensor::debug_string (tensor/print.cpp, which cannot include this folder) name the op.
[[maybe_unused]] const bool g_namer_installed = (set_grad_fn_namer(&node_op), true);
}  // namespace

bool is_grad_enabled() {
  return g_grad_enabled;
}
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) {
  g_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  g_grad_enabled = previous_;
}

std::string describe_inputs(const std::vector<Tensor>& inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined()) continue;
    float ignored = 0;
    s += (s.empty() ? "" : ", ") + std::string("input ") + std::to_string(i) + " ";
    if (!in.name().empty()) s += in.name() + " ";
    s += shape_str(in.shape());
    if (in.grad_fn())
      s += " (from " + in.grad_fn()->op + " #" + std::to_string(in.grad_fn()->id) + ")";
    if (first_non_finite(in, &ignored) >= 0) s += " (already non-finite)";
  }
  return s.empty() ? "none" : s;
}

Tensor record(const std::string& op, Tensor out, std::vector<Tensor> inputs, BackwardFn backward) {
  bool any = false;
  if (g_grad_enabled)
    for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) {
    if (anomaly_enabled())  // off: one branch
      check_forward(op, 0, anomaly_context(), out, [&] { return describe_inputs(inputs); });
    return out;
  }
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  node->out_shape = out.shape();
  node->id = g_next_node_id++;
  if (anomaly_enabled()) {
    node->context = anomaly_context();
    check_forward(op, node->id, node->context, out, [&] { return describe_inputs(node->inputs); });
  }
  out.impl().requires_grad = true;
  out.impl().grad_fn = std::move(node);
  return out;
}

}  // namespace mg
