#include "analysis/model_graph.h"

#include "autograd/engine.h"
#include "nn/rnn_model.h"

namespace mg {

std::string model_graph_dot(const TrainConfig& c) {
  RNNModel model(c.model, c.seed);
  // --fused-lstm / --fused-head choose which graph is drawn (the model is built on the CPU).
  const ComputePathsScope compute(compute_paths(c.paths, Device::CPU), &model);
  model.train();
  const int64_t T = c.bptt, B = c.batch_size, V = c.model.ntoken;
  std::vector<int64_t> ids(T * B), targets(T * B);
  for (int64_t i = 0; i < T * B; ++i) ids[i] = i % V, targets[i] = (i + B) % V;
  const ModelOutput out = model.forward(ids, T, B, model.init_hidden(B), &targets);
  return graph_dot(out.loss);
}

}  // namespace mg
