// Anomaly mode: find the first op whose forward or backward makes a NaN or an Inf.
//
//   {
//     mg::AnomalyGuard anomaly;  // while alive, on this thread
//     model.forward(...).loss.backward();
//   }  // throws std::runtime_error at the first non-finite value:
//   // "anomaly: forward of log (node #12, made in rnns.0) produced NaN at [3,1] ...
//
// With the guard off every op pays one branch (a thread-local flag). With it on, every op's output
// and every gradient a backward receives or returns is copied to the CPU and scanned after the op
// has finished (never inside an OpenMP kernel), so a run is a few times slower: a debugging mode.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

// True while an AnomalyGuard is alive on this thread.
bool anomaly_enabled();

class AnomalyGuard {
 public:
  AnomalyGuard();
  ~AnomalyGuard();
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool previous_;
};

// Suspends the forward checks while a node's backward runs (run_backward): its gradient is judged
// as a whole by check_backward, which names the node, not an unrecorded op inside its backward.
class AnomalyPause {
 public:
  AnomalyPause();
  ~AnomalyPause();
  AnomalyPause(const AnomalyPause&) = delete;
  AnomalyPause& operator=(const AnomalyPause&) = delete;

 private:
  bool paused_ = false;
};

// Names where in the model the ops recorded during its lifetime were made ("rnns.0", "head"):
// modules push their names, nested scopes join with '.'. Only recorded in anomaly mode; otherwise a
// scope costs one branch.
class AnomalyScope {
 public:
  explicit AnomalyScope(const char* name);
  explicit AnomalyScope(const std::string& name) : AnomalyScope(name.c_str()) {}
  ~AnomalyScope();
  AnomalyScope(const AnomalyScope&) = delete;
  AnomalyScope& operator=(const AnomalyScope&) = delete;

 private:
  bool pushed_ = false;
};

// The scopes open right now, joined with '.' ("" outside every scope).
std::string anomaly_context();

// The first non-finite value of t, as its row-major index, with the value in *value; -1 when every
// value is finite.
int64_t first_non_finite(const Tensor& t, float* value);

// An op's inputs as an error names them, from the graph's side (autograd/node.h describe_inputs):
// anomaly mode scans values and knows nothing of the graph, and the text is made only to throw.
using DescribeInputs = std::function<std::string()>;

// Called by record() (autograd/node.cpp) in anomaly mode: throws when out [any] holds a NaN or an
// Inf. node_id is 0 for an op that was not recorded (grad mode off, or no input requires grad).
void check_forward(const std::string& op, uint64_t node_id, const std::string& context,
                   const Tensor& out, const DescribeInputs& inputs);
// What check_backward names of the node whose backward it checks (autograd/node.h Node's fields,
// so that this file needs nothing of the graph).
struct BackwardSite {
  const std::string& op;
  uint64_t node_id;
  const std::string& context;
  const Shape& out_shape;
  DescribeInputs inputs;
};

// Called by run_backward (autograd/engine.cpp) in anomaly mode: grad_output has the node's output
// shape; input_grads one per input (undefined ones skipped).
void check_backward(const BackwardSite& node, const Tensor& grad_output,
                    const std::vector<Tensor>& input_grads);

}  // namespace mg
