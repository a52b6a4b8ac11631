#include "autograd/anomaly.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace mg {

namespace {
thread_local bool g_anomaly = false;
thread_local std::vector<std::string> g_scopes;

// Row-major flat index -> "[i,j,k]", so the message points at the element.
std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? "," : "") + std::to_string(idx[d]);
  return s + "]";
}

std::string what_value(float v) {
  return std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
}

std::string where(uint64_t node_id, const std::string& context) {
  std::string s =
      node_id ? "node #" + std::to_string(node_id) : "not recorded: no input needs grad";
  return s + ", made in " + (context.empty() ? "(no module scope)" : context);
}
}  // namespace

// A copy to the CPU (to_vector) keeps this one loop for views, strides and CUDA tensors alike.
int64_t first_non_finite(const Tensor& t, float* value) {
  if (!t.defined()) return -1;
  const std::vector<float> v = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) {
      *value = v[i];
      return static_cast<int64_t>(i);
    }
  return -1;
}

bool anomaly_enabled() {
  return g_anomaly;
}
AnomalyGuard::AnomalyGuard() : previous_(g_anomaly) {
  g_anomaly = true;
}
AnomalyGuard::~AnomalyGuard() {
  g_anomaly = previous_;
}

AnomalyPause::AnomalyPause() {
  if (g_anomaly) g_anomaly = false, paused_ = true;
}
AnomalyPause::~AnomalyPause() {
  if (paused_) g_anomaly = true;
}

AnomalyScope::AnomalyScope(const char* name) {
  if (!g_anomaly) return;
  g_scopes.emplace_back(name);
  pushed_ = true;
}
AnomalyScope::~AnomalyScope() {
  if (pushed_) g_scopes.pop_back();
}

std::string anomaly_context() {
  std::string s;
  for (const std::string& scope : g_scopes)
    if (!scope.empty()) s += (s.empty() ? "" : ".") + scope;
  return s;
}

void check_forward(const std::string& op, uint64_t node_id, const std::string& context,
                   const Tensor& out, const DescribeInputs& inputs) {
  float v = 0;
  const int64_t at = first_non_finite(out, &v);
  if (at < 0) return;
  std::ostringstream os;
  os << "anomaly: the forward of '" << op << "' (" << where(node_id, context) << ") produced "
     << what_value(v) << " at " << index_str(at, out.shape()) << " of its output "
     << shape_str(out.shape()) << "; inputs: " << inputs();
  throw std::runtime_error(os.str());
}

void check_backward(const BackwardSite& node, const Tensor& grad_output,
                    const std::vector<Tensor>& input_grads) {
  float v = 0;
  // Built only for the message: it scans every input again.
  const auto head = [&node] {
    return "anomaly: the backward of '" + node.op + "' (" + where(node.node_id, node.context) +
           ", output " + shape_str(node.out_shape) + ", inputs: " + node.inputs() + ")";
  };
  int64_t at = first_non_finite(grad_output, &v);
  if (at >= 0)
    throw std::runtime_error(head() + " received a gradient with " + what_value(v) + " at " +
                             index_str(at, grad_output.shape()) +
                             " (the sum of its users' gradients overflowed, or the seed of "
                             "backward() was not finite)");
  for (size_t i = 0; i < input_grads.size(); ++i) {
    at = first_non_finite(input_grads[i], &v);
    if (at >= 0)
      throw std::runtime_error(head() + " produced " + what_value(v) + " at " +
                               index_str(at, input_grads[i].shape()) +
                               " of the gradient of input " + std::to_string(i) + " " +
                               shape_str(input_grads[i].shape()));
  }
}

}  // namespace mg
