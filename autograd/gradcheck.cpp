#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/ops.h"
#include "tensor/compare.h"

namespace mg {

namespace {
double projected(const Tensor& out, const Tensor& weights) {
  const std::vector<float> o = out.to_vector(), w = weights.to_vector();
  double acc = 0;
  for (size_t i = 0; i < o.size(); ++i) acc += static_cast<double>(o[i]) * w[i];
  return acc;
}
}  // namespace

GradcheckResult gradcheck(const std::string& name,
                          const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  for (const Tensor& x : inputs)
    if (!x.is_leaf() || !x.is_contiguous())
      throw std::invalid_argument("gradcheck " + name + ": inputs must be contiguous leaf tensors");
  // Analytic gradients.
  for (Tensor x : inputs) x.zero_grad();
  Tensor out = fn(inputs);
  Generator gen(options.seed);
  const Tensor weights = Tensor::uniform(out.shape(), -1.0f, 1.0f, gen);
  // d(sum(out * weights))/d(out) = weights, handed to backward as is: through sum and mul it
  // would be the same numbers, but a wrong mul backward would then fail every op's check, not
  // only mul's (the course grades each op's backward on its own, docs/course/).
  out.backward(weights);

  GradcheckResult result;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.requires_grad()) continue;
    Tensor numeric = Tensor::zeros(x.shape());
    {
      NoGradGuard no_grad;
      float* v = x.data();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float saved = v[i];
        v[i] = saved + static_cast<float>(options.eps);
        const double plus = projected(fn(inputs), weights);
        v[i] = saved - static_cast<float>(options.eps);
        const double minus = projected(fn(inputs), weights);
        v[i] = saved;
        numeric.data()[i] = static_cast<float>((plus - minus) / (2 * options.eps));
      }
    }
    const Tensor analytic = x.grad().defined() ? x.grad() : Tensor::zeros(x.shape());
    const std::vector<float> a = analytic.to_vector(), n = numeric.to_vector();
    for (size_t i = 0; i < a.size(); ++i)
      result.max_abs_diff =
          std::max(result.max_abs_diff, std::fabs(static_cast<double>(a[i]) - n[i]));
    const std::string report = compare_tensors(
        "gradcheck " + name + " input " + std::to_string(k) + " (analytic vs numeric)", analytic,
        numeric, options.rtol, options.atol);
    if (!report.empty() && result.ok) {
      result.ok = false;
      result.message = report;
    }
  }
  return result;
}

}  // namespace mg
