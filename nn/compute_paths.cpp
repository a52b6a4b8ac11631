// ComputePathsScope (nn/compute_paths.h).
#include "nn/compute_paths.h"

#include "nn/rnn_model.h"

namespace mg {

ComputePathsScope::ComputePathsScope(const ComputePaths& paths, RNNModel* model)
    : gemm_(paths.gemm), precision_(paths.precision) {
  if (model) model->paths = paths;
}

}  // namespace mg
