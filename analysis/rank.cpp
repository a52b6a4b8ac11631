#include "analysis/rank.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "analysis/head_double.h"
#include "analysis/svd.h"
#include "autograd/node.h"
#include "io/strf.h"
#include "io/svg_plot.h"
#include "lm/batching.h"

namespace mg {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The last layer's outputs for the first N targets of the split, in evaluation order (segment by
// segment, row t·B + b of each): h [N,H] floats. Eval mode, so the dropouts are the identity and h
// is exactly what the head sees when the model scores these targets.
std::vector<float> collect_contexts(RNNModel& model, const Batched& data, int64_t bptt, int64_t N,
                                    int64_t* H) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  Hidden hidden = model.init_hidden(data.batch);
  std::vector<float> h;
  int64_t have = 0;
  for (int64_t i = 0; i < data.rows - 1 && have < N;) {
    const Batch batch = get_batch(data, i, bptt);
    ModelOutput out = model.forward(batch.input, batch.seq_len, batch.batch, hidden, &batch.target);
    const Tensor last = out.dropped_outputs.back();  // [T,B,H]
    *H = last.size(2);
    const std::vector<float> rows = last.cpu().to_vector();
    const int64_t take = std::min(N - have, batch.seq_len * batch.batch);
    h.insert(h.end(), rows.begin(), rows.begin() + take * *H);
    have += take;
    hidden = out.hidden;
    i += batch.seq_len;
  }
  model.train(was_training);
  return h;
}

// A model whose outputs overflow (finite weights: load_model refuses others) gives NaN or Inf
// log-probabilities, on which the SVD cannot converge: an error naming the first such context.
void require_finite_log_probs(const std::vector<double>& a, int64_t V, int64_t first_context) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(a[i]))
      throw std::runtime_error(strf(
          "rank: the model's log-probability of word %lld in context %lld is %g, not finite: its "
          "weights are finite but its outputs overflow (a model whose training diverged?)",
          static_cast<long long>(static_cast<int64_t>(i) % V),
          static_cast<long long>(first_context + static_cast<int64_t>(i) / V), a[i]));
}

}  // namespace

RankReport model_rank(RNNModel& model, const std::vector<int64_t>& ids, const RankOptions& o) {
  require_eval_targets(static_cast<int64_t>(ids.size()), o.batch_size, "rank: the split");
  const Batched data = batchify(ids, o.batch_size);
  const int64_t available = eval_target_count(data);
  if (o.contexts > available)
    throw std::invalid_argument("--contexts " + std::to_string(o.contexts) +
                                ": the split has only " + std::to_string(available) +
                                " targets at --batch_size " + std::to_string(o.batch_size));
  RankReport r;
  r.N = o.contexts > 0 ? o.contexts : available;
  const DoubleHead head(*model.head);
  r.V = head.V;
  r.d = head.E;

  auto t0 = std::chrono::steady_clock::now();
  int64_t H = 0;
  const std::vector<float> h = collect_contexts(model, data, o.bptt, r.N, &H);
  r.seconds_contexts = seconds_since(t0);

  // σ from A itself (analysis/svd.h). N ≤ V: A row-major [N,V] is Aᵀ column-major, a tall V x N
  // matrix, held whole. N > V: A is folded into its V x V triangular factor a block of contexts at
  // a time (TallQR), so it is never held whole (PTB valid: 5.9 GB).
  double t_logp = 0, t_svd = 0;
  std::vector<double> sigma;
  if (r.N <= r.V) {
    t0 = std::chrono::steady_clock::now();
    std::vector<double> a = head.log_probs(h.data(), r.N);
    require_finite_log_probs(a, r.V, 0);
    t_logp += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    sigma = singular_values_tall(std::move(a), r.V, r.N);
    t_svd += seconds_since(t0);
  } else {
    // Blocks of 2V contexts folded into R (TallQR): count·V² multiply-adds each, N·V² in all,
    // about what one QR of A whole would cost, with a block's log-probabilities (1.6 GB at V =
    // 10,000) the only part of A ever held.
    const int64_t block = 2 * r.V;
    TallQR qr(r.V);
    for (int64_t first = 0; first < r.N; first += block) {
      const int64_t rows = std::min(block, r.N - first);
      t0 = std::chrono::steady_clock::now();
      const std::vector<double> a = head.log_probs(h.data() + first * H, rows);
      require_finite_log_probs(a, r.V, first);
      t_logp += seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      qr.add_rows(a.data(), rows);
      t_svd += seconds_since(t0);
    }
    t0 = std::chrono::steady_clock::now();
    qr.release_block();
    sigma = qr.singular_values();
    t_svd += seconds_since(t0);
  }
  r.model = spectrum_from_singular_values(std::move(sigma), r.N, r.V);
  r.seconds_log_probs = t_logp;
  r.seconds_spectrum = t_svd;
  r.decoder = singular_values(head.W, r.V, r.d);
  // The components' disagreement on (at most) the first 1000 contexts: K·V per context is cheap,
  // but it is a summary, not worth a pass over all of them.
  r.component_kl = head.mean_component_kl(h.data(), std::min<int64_t>(r.N, 1000));
  return r;
}

std::string rank_csv(const RankReport& r) {
  std::string out = "i,sigma,sigma_rel,decoder_sigma,decoder_sigma_rel\n";
  const size_t n = std::max(r.model.sigma.size(), r.decoder.sigma.size());
  auto cell = [](const Spectrum& s, size_t i) {
    if (i >= s.sigma.size()) return std::string(",");
    return strf("%.17g,%.17g", s.sigma[i], s.sigma[0] > 0 ? s.sigma[i] / s.sigma[0] : 0.0);
  };
  for (size_t i = 0; i < n; ++i)
    out += strf("%zu,", i + 1) + cell(r.model, i) + "," + cell(r.decoder, i) + "\n";
  return out;
}

std::string rank_plot_svg(const RankReport& r, const std::string& title) {
  LogPlot plot;
  plot.title = title;
  plot.x_label = "index i";
  plot.y_label = "σ_i / σ_max";
  auto series = [](const Spectrum& s, const std::string& name, const std::string& label,
                   const std::string& color) {
    PlotSeries p{name, label, color, false, {}};
    for (size_t i = 0; i < s.sigma.size(); ++i)
      if (s.sigma[0] > 0 && s.sigma[i] > 0)
        p.points.push_back({static_cast<double>(i + 1), s.sigma[i] / s.sigma[0]});
    return p;
  };
  plot.series.push_back(
      series(r.model, "log-probs",
             strf("log-prob matrix A [%lld,%lld]: rank %lld", static_cast<long long>(r.N),
                  static_cast<long long>(r.V), static_cast<long long>(r.model.rank)),
             "#d62728"));
  plot.series.push_back(
      series(r.decoder, "decoder",
             strf("decoder weight [%lld,%lld]: rank %lld", static_cast<long long>(r.V),
                  static_cast<long long>(r.d), static_cast<long long>(r.decoder.rank)),
             "#1f77b4"));
  if (!r.model.sigma.empty() && r.model.sigma[0] > 0) {
    const double t = r.model.threshold / r.model.sigma[0];
    plot.series.push_back({"threshold",
                           "rank threshold σ_max·max(N,V)·ε",
                           "#7f7f7f",
                           false,
                           {{0.0, t}, {static_cast<double>(r.model.sigma.size()), t}}});
  }
  return render_log_plot_svg(plot);
}

}  // namespace mg
