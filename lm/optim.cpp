#include "lm/optim.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/node.h"
#include "cuda/backend.h"
#include "tensor/parallel.h"

namespace mg {

static_assert(static_cast<int>(OptimizerKind::Adam) == static_cast<int>(CudaOptimizer::Adam) &&
                  static_cast<int>(OptimizerKind::ASGD) == static_cast<int>(CudaOptimizer::ASGD),
              "cuda_optimizer_step takes the optimizer kind as a CudaOptimizer");

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::SGD;
  if (name == "asgd") return OptimizerKind::ASGD;
  if (name == "adam") return OptimizerKind::Adam;
  throw std::invalid_argument("unknown optimizer '" + name + "': choose sgd, asgd or adam");
}

std::string optimizer_kind_name(OptimizerKind kind) {
  return kind == OptimizerKind::SGD ? "sgd" : kind == OptimizerKind::ASGD ? "asgd" : "adam";
}

Optimizer::Optimizer(OptimizerKind kind, std::vector<std::pair<std::string, Tensor>> params,
                     float wdecay, float beta1, float beta2, float eps)
    : kind_(kind), wdecay_(wdecay), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (auto& [name, p] : params) {
    Slot s{name, p, {}, {}};
    if (kind == OptimizerKind::Adam)
      s.buf_a = Tensor::zeros(p.shape(), p.device()),
      s.buf_b = Tensor::zeros(p.shape(), p.device());
    if (kind == OptimizerKind::ASGD) s.buf_a = copy_contiguous(p);
    slots_.push_back(std::move(s));
  }
}

void Optimizer::step(float lr) {
  if (swapped_) throw std::logic_error("optimizer step while the averaged weights are swapped in");
  NoGradGuard no_grad;
  ++steps_;
  const float bc1 = 1.0f - std::pow(beta1_, static_cast<float>(steps_));
  const float bc2 = 1.0f - std::pow(beta2_, static_cast<float>(steps_));
  const float mu = 1.0f / static_cast<float>(steps_);
  for (Slot& s : slots_) {
    const Tensor grad = s.param.grad();
    if (!grad.defined()) continue;
    check_same_device(
        "optimizer step on '" + s.name + "' (move the model before building the optimizer)",
        {s.param, grad, s.buf_a, s.buf_b});
    if (s.param.is_cuda()) {  // the same update as one kernel (cuda/optim.cu)
      cuda_optimizer_step(static_cast<CudaOptimizer>(kind_), s.param.data_ptr(), grad.data_ptr(),
                          s.buf_a.defined() ? s.buf_a.data_ptr() : nullptr,
                          s.buf_b.defined() ? s.buf_b.data_ptr() : nullptr, s.param.numel(), lr,
                          wdecay_, mu, beta1_, beta2_, eps_, bc1, bc2);
      continue;
    }
    float* p = s.param.data();
    const float* g = grad.data();
    const int64_t n = s.param.numel();
    float* a = s.buf_a.defined() ? s.buf_a.data() : nullptr;
    float* b = s.buf_b.defined() ? s.buf_b.data() : nullptr;
    parallel_for(n, 1 << 15, [&](int64_t i0, int64_t i1) {
      // One loop per rule, with every scalar a local (see tensor/kernels.h), so that each
      // vectorizes: this pass touches all 3.5M parameters of a small model at every step.
      const float wd = wdecay_, rate = lr, avg_w = mu, b1 = beta1_, b2 = beta2_, eps = eps_,
                  c1 = bc1, c2 = bc2;
      float* pp = p;
      const float* gg = g;
      float* aa = a;
      float* bb = b;
      switch (kind_) {
        case OptimizerKind::SGD:
          for (int64_t i = i0; i < i1; ++i) pp[i] -= rate * (gg[i] + wd * pp[i]);
          break;
        case OptimizerKind::ASGD:
          for (int64_t i = i0; i < i1; ++i) {
            pp[i] -= rate * (gg[i] + wd * pp[i]);
            aa[i] += avg_w * (pp[i] - aa[i]);  // running mean of the iterates
          }
          break;
        case OptimizerKind::Adam:
          for (int64_t i = i0; i < i1; ++i) {
            const float gi = gg[i] + wd * pp[i];
            aa[i] = b1 * aa[i] + (1 - b1) * gi;
            bb[i] = b2 * bb[i] + (1 - b2) * gi * gi;
            pp[i] -= rate * (aa[i] / c1) / (std::sqrt(bb[i] / c2) + eps);
          }
          break;
      }
    });
  }
}

void Optimizer::zero_grad() {
  for (Slot& s : slots_) s.param.zero_grad();
}

static void swap_values(Tensor& a, Tensor& b) {
  check_same_device("ASGD weight swap", {a, b});
  if (a.is_cuda()) return cuda_swap(a.data_ptr(), b.data_ptr(), a.numel());
  float* x = a.data();
  float* y = b.data();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) std::swap(x[i], y[i]);
}

void Optimizer::swap_in_average() {
  if (kind_ != OptimizerKind::ASGD || swapped_) return;
  for (Slot& s : slots_) swap_values(s.param, s.buf_a);
  swapped_ = true;
}

void Optimizer::swap_out_average() {
  if (kind_ != OptimizerKind::ASGD || !swapped_) return;
  for (Slot& s : slots_) swap_values(s.param, s.buf_a);
  swapped_ = false;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Slot& s : slots_) {
    if (kind_ == OptimizerKind::ASGD) out.emplace_back(s.name + ".ax", s.buf_a);
    if (kind_ == OptimizerKind::Adam) {
      out.emplace_back(s.name + ".exp_avg", s.buf_a);
      out.emplace_back(s.name + ".exp_avg_sq", s.buf_b);
    }
  }
  return out;
}

void Optimizer::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                           int64_t steps) {
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, t] : tensors)
      if (n == name) return t;
    throw std::runtime_error("optimizer state: missing '" + name +
                             "' (checkpoint from another optimizer?)");
  };
  auto fill = [&](Tensor& dst, const std::string& name) {
    const Tensor& src = find(name);
    if (src.shape() != dst.shape())
      throw std::runtime_error("optimizer state: '" + name + "' is " + shape_str(src.shape()) +
                               ", expected " + shape_str(dst.shape()));
    copy_into(dst, src);
  };
  for (Slot& s : slots_) {
    if (kind_ == OptimizerKind::ASGD) fill(s.buf_a, s.name + ".ax");
    if (kind_ == OptimizerKind::Adam)
      fill(s.buf_a, s.name + ".exp_avg"), fill(s.buf_b, s.name + ".exp_avg_sq");
  }
  steps_ = steps;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  // Sum of squares in fixed 8192-element blocks, each in eight double lanes (so the loop
  // vectorizes), the blocks added in order: parallel, and the same bits for any thread count.
  constexpr int64_t kBlock = 8192;
  double total = 0;
  {  // GPU gradients: reduced per tensor on the device, fetched together, added in parameter order
    std::vector<const float*> xs;
    std::vector<int64_t> ns;
    for (const Tensor& p : params)
      if (p.grad().defined() && p.grad().is_cuda())
        xs.push_back(p.grad().data_ptr()), ns.push_back(p.grad().numel());
    std::vector<double> totals(xs.size());
    if (!xs.empty())
      cuda_sum_squares(static_cast<int>(xs.size()), xs.data(), ns.data(), totals.data());
    for (double v : totals) total += v;
  }
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined() || g.is_cuda()) continue;
    const float* d = g.data();
    const int64_t n = g.numel(), blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(static_cast<size_t>(blocks));
    parallel_for(blocks, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        double lane[8] = {0};
        const int64_t i0 = blk * kBlock, i1 = std::min(n, i0 + kBlock);
        int64_t i = i0;
        for (; i + 8 <= i1; i += 8)
          for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(d[i + l]) * d[i + l];
        for (; i < i1; ++i) lane[0] += static_cast<double>(d[i]) * d[i];
        partial[static_cast<size_t>(blk)] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                                            ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      }
    });
    for (double v : partial) total += v;
  }
  const double norm = std::sqrt(total);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (g.is_cuda()) {
        cuda_unary(UnaryOp::MulScalar, g.data_ptr(), g.data_ptr(), g.numel(), scale);
        continue;
      }
      float* d = g.data();
      parallel_for(g.numel(), 1 << 15, [&](int64_t i0, int64_t i1) {
        const float k = scale;  // a local: see tensor/kernels.h
        for (int64_t i = i0; i < i1; ++i) d[i] *= k;
      });
    }
  }
  return norm;
}

}  // namespace mg
