#include "analysis/bottleneck_demo.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analysis/head_double.h"
#include "analysis/spectrum.h"
#include "analysis/svd.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "io/strf.h"
#include "io/svg_plot.h"
#include "lm/optim.h"

namespace mg {

namespace {

void check(const DemoConfig& c) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("bottleneck-demo: " + what);
  };
  need(c.contexts >= 2 && c.vocab >= 2, "needs at least 2 contexts and 2 words");
  need(c.support >= 1 && c.support <= c.vocab, "support must be in [1, V]");
  need(c.smoothing > 0 && c.smoothing < 1, "smoothing must be in (0, 1)");
  need(c.d >= 1 && c.d < c.vocab, "d must be in [1, V)");
  need(c.experts >= 2, "the mixtures need K >= 2");
  need(c.steps >= 1 && c.eval_every >= 1, "steps and eval_every must be >= 1");
}

// log P* [N,V] in double. Each context n has a few likely next words, like a language: `support`
// distinct words drawn at random with weights in [0.5, 1), mixed with a little of the uniform
// distribution (`smoothing`), p*_n = (1−α) Σ_s w_s δ(word_s) + α/V. A mixture of K ≥ support
// peaked softmaxes can express any such row; a single softmax of rank d+2 cannot, once the
// supports are many different subsets. Its log-probability matrix has (nearly) full rank min(N,V).
std::vector<double> true_log_probs(const DemoConfig& c) {
  const int64_t N = c.contexts, V = c.vocab;
  std::vector<double> p(N * V, c.smoothing / static_cast<double>(V));
  uint64_t position = 0;
  auto uniform = [&] {
    return static_cast<double>(philox_uniform(c.seed * 1000003 + 17, position++));
  };
  for (int64_t n = 0; n < N; ++n) {
    std::vector<int64_t> words;
    std::vector<double> w;
    while (static_cast<int64_t>(words.size()) < c.support) {
      const int64_t word =
          std::min(V - 1, static_cast<int64_t>(uniform() * static_cast<double>(V)));
      if (std::find(words.begin(), words.end(), word) == words.end())
        words.push_back(word), w.push_back(0.5 + 0.5 * uniform());
    }
    double total = 0;
    for (double x : w) total += x;
    for (size_t s = 0; s < words.size(); ++s)
      p[n * V + words[s]] += (1 - c.smoothing) * w[s] / total;
  }
  for (double& x : p) x = std::log(x);
  return p;
}

// Mean over rows of KL(P* || Q) = Σ_v p*_v (log p*_v − log q_v).
double mean_kl(const std::vector<double>& log_p, const std::vector<double>& log_q, int64_t N,
               int64_t V) {
  double total = 0;
  for (int64_t i = 0; i < N * V; ++i) total += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
  return total / static_cast<double>(N);
}

}  // namespace

DemoResult run_bottleneck_demo(const DemoConfig& c,
                               const std::function<void(const std::string&)>& progress) {
  check(c);
  const int64_t N = c.contexts, V = c.vocab;
  const std::vector<double> log_p = true_log_probs(c);
  DemoResult result;
  result.true_rank = singular_values(log_p, N, V).rank;
  for (int64_t i = 0; i < N * V; ++i)
    result.true_entropy -= std::exp(log_p[i]) * log_p[i] / static_cast<double>(N);
  std::vector<float> p_float(N * V);
  for (int64_t i = 0; i < N * V; ++i) p_float[i] = static_cast<float>(std::exp(log_p[i]));
  const Tensor target = Tensor::from_vector(p_float, {N, V});  // P* [N,V], the soft targets

  for (HeadKind kind : {HeadKind::Softmax, HeadKind::MoC, HeadKind::Sigsoftmax, HeadKind::MoS}) {
    // The same seed for every head: the context vectors start from the same point.
    Generator gen(c.seed);
    // Free context vectors [N,H]: H = d for the single softmaxes (their decoder is [V,d]); the
    // mixtures map h to K contexts of size d, like the MoS paper's latent layer, from H = hidden.
    const int64_t H = is_mixture(kind) ? c.hidden : c.d;
    Tensor h = Tensor::normal({N, H}, 0.0f, 1.0f, gen).requires_grad_();
    h.set_name("contexts");
    std::shared_ptr<OutputHead> head = make_head(kind, V, H, c.d, c.experts, 0.0f, Tensor(), gen);
    head->eval();
    auto params = head->named_parameters();
    params.emplace_back("contexts", h);
    Optimizer adam(OptimizerKind::Adam, params, 0.0f);
    DemoCurve curve{kind, {}};
    for (int64_t step = 0; step <= c.steps; ++step) {
      if (step % c.eval_every == 0 || step == c.steps) {
        const std::vector<float> hv = h.to_vector();
        const std::vector<double> log_q = DoubleHead(*head).log_probs(hv.data(), N);
        const DemoPoint point{step, mean_kl(log_p, log_q, N, V), singular_values(log_q, N, V).rank};
        curve.points.push_back(point);
        if (progress)
          progress(strf("%-10s step %5lld  KL %.4f  rank %lld", head_kind_name(kind).c_str(),
                        static_cast<long long>(step), point.kl,
                        static_cast<long long>(point.rank)));
      }
      if (step == c.steps) break;
      // Cross entropy against the whole distribution: −(1/N) Σ_n Σ_v p*_nv log q_nv = KL + H(P*).
      adam.zero_grad();
      const Tensor loss = neg(sum(mul(target, head->log_prob(h, N, gen))));
      mul(loss, Tensor::scalar(1.0f / static_cast<float>(N))).backward();
      adam.step(c.lr);
    }
    result.curves.push_back(curve);
  }
  return result;
}

std::string demo_plot_svg(const DemoResult& r, const DemoConfig& c) {
  static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};
  LogPlot plot;
  plot.title =
      strf("softmax bottleneck: KL(P* || model), N=%lld V=%lld rank of log P* %lld, d=%lld K=%lld",
           static_cast<long long>(c.contexts), static_cast<long long>(c.vocab),
           static_cast<long long>(r.true_rank), static_cast<long long>(c.d),
           static_cast<long long>(c.experts));
  plot.x_label = "Adam step";
  plot.y_label = "KL to the truth (nats)";
  for (size_t i = 0; i < r.curves.size(); ++i) {
    const DemoCurve& curve = r.curves[i];
    const DemoPoint& last = curve.points.back();
    PlotSeries s{head_kind_name(curve.head),
                 strf("%s (final rank %lld)", head_kind_name(curve.head).c_str(),
                      static_cast<long long>(last.rank)),
                 colors[i % 4],
                 true,
                 {}};
    for (const DemoPoint& p : curve.points)
      if (p.kl > 0) s.points.push_back({static_cast<double>(p.step), p.kl});
    plot.series.push_back(s);
  }
  return render_log_plot_svg(plot);
}

std::string demo_csv(const DemoResult& r) {
  std::string out = "head,step,kl,rank\n";
  for (const DemoCurve& curve : r.curves)
    for (const DemoPoint& p : curve.points)
      out += strf("%s,%lld,%.9g,%lld\n", head_kind_name(curve.head).c_str(),
                  static_cast<long long>(p.step), p.kl, static_cast<long long>(p.rank));
  return out;
}

}  // namespace mg
