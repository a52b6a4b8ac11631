// Negative log-likelihood of targets under log-probabilities: the language-model loss.
#include <memory>

#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace mg {

Tensor nll_loss(const Tensor& logp_in, const std::vector<int64_t>& target) {
  check_rank("nll_loss", logp_in, 2, "log-probs");
  const int64_t N = logp_in.size(0), V = logp_in.size(1);
  if (static_cast<int64_t>(target.size()) != N)
    throw ShapeError("nll_loss: " + std::to_string(target.size()) + " targets for log-probs " +
                     shape_str(logp_in.shape()));
  if (N == 0)
    throw ShapeError("nll_loss: no targets (log-probs " + shape_str(logp_in.shape()) + ")");
  for (int64_t i = 0; i < N; ++i)
    if (target[i] < 0 || target[i] >= V)
      throw ShapeError("nll_loss: target " + std::to_string(target[i]) + " at row " +
                       std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(V) +
                       ")");
  const Tensor logp = contiguous_data(logp_in);
  if (logp.is_cuda()) {
    // The target log-probs gathered on the GPU, summed there in a fixed order (cuda/ops_index.cu).
    auto ids = std::make_shared<DeviceIndices>(target);
    Tensor picked = Tensor::empty({N}, Device::CUDA);
    cuda_gather_rows(logp.data_ptr(), N, V, ids->get(), picked.data_ptr());
    Tensor out = Tensor::empty({}, Device::CUDA);
    cuda_sum_all(picked.data_ptr(), N, out.data_ptr());
    out = cuda_map_unary(UnaryOp::MulScalar, out, -1.0f / static_cast<float>(N));
    return record("nll_loss", out, {logp_in}, [N, V, ids](const Tensor& g) {
      Tensor grad = Tensor::zeros({N, V}, Device::CUDA);
      cuda_scatter_rows(nullptr, -g.item() / static_cast<float>(N), N, V, ids->get(),
                        grad.data_ptr());
      return std::vector<Tensor>{grad};
    });
  }
  double total = 0;
  for (int64_t i = 0; i < N; ++i) total -= logp.data()[i * V + target[i]];
  Tensor out = Tensor::scalar(static_cast<float>(total / N));
  return record("nll_loss", out, {logp_in}, [N, V, target](const Tensor& g) {
    // d(-mean_i logp[i, t_i]) / d logp[i, j] = -1/N where j = t_i, else 0
    Tensor grad = Tensor::zeros({N, V});
    const float v = -g.item() / static_cast<float>(N);
    for (int64_t i = 0; i < N; ++i) grad.data()[i * V + target[i]] = v;
    return std::vector<Tensor>{grad};
  });
}

}  // namespace mg
