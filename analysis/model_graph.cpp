#include "analysis/model_graph.h"

#include <cmath>
#include <map>
#include <sstream>
#include <unordered_set>

#include "autograd/engine.h"
#include "io/strf.h"
#include "nn/rnn_model.h"

namespace mg {

namespace {

// "4.605" for one number, "μ 0.0123 σ 0.456" for several (on the host, in double).
std::string summary(const Tensor& t) {
  if (!t.defined()) return "none";
  const std::vector<float> v = t.is_cuda() ? t.cpu().to_vector() : t.to_vector();
  if (v.size() == 1) return strf("%.4g", v[0]);
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += static_cast<double>(x) * x;
  const double n = static_cast<double>(v.empty() ? 1 : v.size()), mean = sum / n;
  return strf("μ %.3g σ %.3g", mean, std::sqrt(std::max(0.0, sq / n - mean * mean)));
}

// The DOT of the loss's graph with each node's value and gradient. The backward frees the graph,
// so the walk (graph_dot's, with values) comes first and the gradients, caught by a GradientWatch
// as the backward passes each node, are filled in after.
std::string dot_with_values(const Tensor& loss) {
  struct Box {
    std::string op, shape, value, grad = "none";
  };
  std::map<uint64_t, Box> boxes;
  std::vector<std::pair<std::string, Tensor>> leaves;  // "l<i>" and the parameter
  std::vector<std::string> edges;
  std::unordered_set<const Node*> seen{loss.grad_fn().get()};
  std::map<const TensorImpl*, size_t> leaf_index;
  std::vector<const Node*> stack{loss.grad_fn().get()};
  boxes[loss.grad_fn()->id].value = summary(loss);
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    Box& box = boxes[node->id];
    box.op = node->op, box.shape = shape_str(node->out_shape);
    for (const Tensor& in : node->inputs) {
      if (!in.defined() || !in.requires_grad()) continue;
      if (in.grad_fn()) {  // in is that node's output: its value
        edges.push_back(strf("n%llu -> n%llu", static_cast<unsigned long long>(in.grad_fn()->id),
                             static_cast<unsigned long long>(node->id)));
        boxes[in.grad_fn()->id].value = summary(in);
        if (seen.insert(in.grad_fn().get()).second) stack.push_back(in.grad_fn().get());
      } else {
        auto [at, added] = leaf_index.emplace(in.impl_ptr().get(), leaves.size());
        if (added) leaves.emplace_back(strf("l%zu", at->second), in);
        edges.push_back(leaves[at->second].first +
                        strf(" -> n%llu", static_cast<unsigned long long>(node->id)));
      }
    }
  }
  std::vector<std::string> leaf_values;
  for (const auto& [id, t] : leaves) leaf_values.push_back(summary(t));
  {
    const GradientWatch watch(
        [&](const Node& n, const Tensor& g) { boxes[n.id].grad = summary(g); });
    loss.backward();
  }
  std::ostringstream os;
  os << kGraphDotFirstLine << "\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n";
  for (const auto& [id, b] : boxes)
    os << "  n" << id << " [shape=box,label=\"" << b.op << " " << b.shape << "\\nvalue " << b.value
       << "\\ngrad " << b.grad << "\"];\n";
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& p = leaves[i].second;
    os << "  " << leaves[i].first << " [shape=ellipse,style=filled,fillcolor=lightblue,label=\""
       << (p.name().empty() ? "" : p.name() + " ") << shape_str(p.shape()) << "\\nvalue "
       << leaf_values[i] << "\\ngrad " << summary(p.grad()) << "\"];\n";
  }
  for (const std::string& e : edges) os << "  " << e << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace

std::string model_graph_dot(const TrainConfig& c, bool values) {
  RNNModel model(c.model, c.seed);
  // --fused-lstm / --fused-head choose which graph is drawn (the model is built on the CPU).
  const ComputePathsScope compute(compute_paths(c.paths, Device::CPU), &model);
  model.train();
  const int64_t T = c.bptt, B = c.batch_size, V = c.model.ntoken;
  std::vector<int64_t> ids(T * B), targets(T * B);
  for (int64_t i = 0; i < T * B; ++i) ids[i] = i % V, targets[i] = (i + B) % V;
  const ModelOutput out = model.forward(ids, T, B, model.init_hidden(B), &targets);
  return values ? dot_with_values(out.loss) : graph_dot(out.loss);
}

}  // namespace mg
