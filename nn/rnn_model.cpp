#include "nn/rnn_model.h"

#include <optional>
#include <sstream>

#include "autograd/anomaly.h"
#include "autograd/ops.h"
#include "nn/dropout.h"

namespace mg {

std::vector<int64_t> ModelConfig::layer_sizes() const {
  if (nlayers < 1)
    throw std::invalid_argument("model: nlayers must be >= 1, got " + std::to_string(nlayers));
  std::vector<int64_t> sizes(static_cast<size_t>(nlayers), nhid);
  sizes.back() = last_layer_is_nhidlast() ? nhidlast : emsize;
  return sizes;
}

bool ModelConfig::reads(const std::string& key) const {
  if (key == "n_experts" || key == "dropoutl") return is_mixture(head);
  if (key == "nhidlast") return last_layer_is_nhidlast();
  if (key == "nhid") return nlayers > 1;
  return true;
}

int64_t ModelConfig::parameter_count() const {
  // Mirrors the constructor below: encoder, each LSTM layer (4H x in, 4H x H, two 4H biases), head.
  const std::vector<int64_t> sizes = layer_sizes();
  int64_t n = ntoken * emsize;
  for (size_t l = 0; l < sizes.size(); ++l) {
    const int64_t in = l == 0 ? emsize : sizes[l - 1], H = sizes[l];
    n += 4 * H * in + 4 * H * H + 8 * H;
  }
  const int64_t H = sizes.back();
  if (is_mixture(head))
    n += n_experts * H + n_experts * emsize * H + n_experts * emsize + (tied ? 0 : ntoken * emsize);
  else
    n += tied ? 0 : ntoken * H;
  return n + ntoken;  // the decoder bias
}

std::map<std::string, std::string> ModelConfig::to_map() const {
  auto f = [](float v) {
    std::ostringstream os;
    os.precision(9);
    os << v;
    return os.str();
  };
  return {{"ntoken", std::to_string(ntoken)},
          {"emsize", std::to_string(emsize)},
          {"nhid", std::to_string(nhid)},
          {"nhidlast", std::to_string(nhidlast)},
          {"nlayers", std::to_string(nlayers)},
          {"n_experts", std::to_string(n_experts)},
          {"dropout", f(dropout)},
          {"dropouth", f(dropouth)},
          {"dropouti", f(dropouti)},
          {"dropoute", f(dropoute)},
          {"dropoutl", f(dropoutl)},
          {"wdrop", f(wdrop)},
          {"tied", tied ? "1" : "0"},
          {"head", head_kind_name(head)}};
}

ModelConfig ModelConfig::from_map(const std::map<std::string, std::string>& m) {
  ModelConfig c;
  auto get = [&](const char* key) -> const std::string& {
    auto it = m.find(key);
    if (it == m.end())
      throw std::invalid_argument(std::string("model config: missing key '") + key + "'");
    return it->second;
  };
  // Strict: the whole value must be the number ("10xyz" is an error, not 10), named by its key.
  auto parse = [&](const char* key, const char* what, auto convert) {
    const std::string& v = get(key);
    size_t used = 0;
    decltype(convert(v, &used)) x{};
    try {
      x = convert(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.size())
      throw std::invalid_argument(std::string("model config: ") + key + " = '" + v + "' is not " +
                                  what);
    return x;
  };
  const auto to_int = [](const std::string& v, size_t* used) {
    return static_cast<int64_t>(std::stoll(v, used));
  };
  const auto to_float = [](const std::string& v, size_t* used) { return std::stof(v, used); };
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"ntoken", &c.ntoken},
                            {"emsize", &c.emsize},
                            {"nhid", &c.nhid},
                            {"nhidlast", &c.nhidlast},
                            {"nlayers", &c.nlayers},
                            {"n_experts", &c.n_experts}})
    *field = parse(key, "an integer", to_int);
  for (auto [key, field] : {std::pair<const char*, float*>{"dropout", &c.dropout},
                            {"dropouth", &c.dropouth},
                            {"dropouti", &c.dropouti},
                            {"dropoute", &c.dropoute},
                            {"dropoutl", &c.dropoutl},
                            {"wdrop", &c.wdrop}})
    *field = parse(key, "a number", to_float);
  const std::string& tied_text = get("tied");
  if (tied_text != "0" && tied_text != "1")
    throw std::invalid_argument("model config: tied = '" + tied_text + "' is not 0 or 1");
  c.tied = tied_text == "1";
  c.head = parse_head_kind(get("head"));
  return c;
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << head_kind_name(head);
  if (is_mixture(head)) os << " K=" << n_experts;
  os << " E=" << emsize << " LSTM [";
  const auto sizes = layer_sizes();
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? "," : "") << sizes[i];
  os << "] V=" << ntoken << (tied ? " tied" : " untied");
  return os.str();
}

Hidden detach_hidden(const Hidden& hidden) {
  Hidden out;
  for (const LSTMState& s : hidden) out.push_back(s.detach());
  return out;
}

RNNModel::RNNModel(const ModelConfig& cfg, uint64_t seed)
    : config(cfg), dropout_gen(seed ^ 0x9e3779b97f4a7c15ull) {
  Generator init(seed);
  encoder = register_module("encoder", std::make_shared<Embedding>(cfg.ntoken, cfg.emsize, init));
  const std::vector<int64_t> sizes = cfg.layer_sizes();
  for (int64_t l = 0; l < cfg.nlayers; ++l) {
    const int64_t in = l == 0 ? cfg.emsize : sizes[l - 1];
    rnns.push_back(register_module("rnns." + std::to_string(l),
                                   std::make_shared<LSTMLayer>(in, sizes[l], init)));
  }
  const Tensor tied = cfg.tied ? encoder->weight : Tensor();
  head = register_module("", make_head(cfg.head, cfg.ntoken, sizes.back(), cfg.emsize,
                                       cfg.n_experts, cfg.dropoutl, tied, init));
  name_parameters();
}

Hidden RNNModel::init_hidden(int64_t B) const {
  Hidden hidden;
  for (const auto& rnn : rnns) hidden.push_back(rnn->zero_state(B));
  return hidden;
}

ModelOutput RNNModel::forward(const std::vector<int64_t>& ids, int64_t T, int64_t B,
                              const Hidden& hidden, const std::vector<int64_t>* targets) {
  if (hidden.size() != rnns.size())
    throw ShapeError("model: hidden state has " + std::to_string(hidden.size()) +
                     " layers, the model " + std::to_string(rnns.size()) + " (use init_hidden(B))");
  const bool training = is_training();
  ModelOutput out;
  // The scopes name where each op was made, for anomaly mode's messages (free when it is off).
  std::optional<AnomalyScope> scope(std::in_place, "encoder");
  // Embedding dropout on the looked-up rows only (the same numbers as embedding_lookup of
  // embedding_dropout's [V,E] table), then locked dropout on the inputs.
  Tensor x = locked_dropout(
      embedding_dropout_lookup(encoder->weight, config.dropoute, dropout_gen, training, ids, T, B),
      config.dropouti, dropout_gen, training);  // [T,B,E]
  for (size_t l = 0; l < rnns.size(); ++l) {
    scope.reset();
    scope.emplace(anomaly_enabled() ? "rnns." + std::to_string(l) : std::string());
    const Tensor w_hh = weight_drop(rnns[l]->weight_hh, config.wdrop, dropout_gen,
                                    training);  // one mask per forward
    auto [y, state] = rnns[l]->forward(x, hidden[l], paths.fused_lstm, w_hh);  // y [T,B,H_l]
    out.hidden.push_back(state);
    out.raw_outputs.push_back(y);
    const bool last = l + 1 == rnns.size();
    x = locked_dropout(y, last ? config.dropout : config.dropouth, dropout_gen, training);
    out.dropped_outputs.push_back(x);
  }
  scope.reset();
  scope.emplace("head");
  const Tensor h = reshape(x, {T * B, x.size(2)});  // [N,H_last]
  if (targets && paths.fused_head)
    out.loss = head->nll(h, B, *targets, dropout_gen);
  else if (targets)
    out.loss = head->reference_nll(h, B, *targets, dropout_gen);
  else
    out.log_prob = head->log_prob(h, B, dropout_gen);
  return out;
}

ComputePathsScope::ComputePathsScope(const ComputePaths& paths, RNNModel* model)
    : gemm_(paths.gemm), precision_(paths.precision) {
  if (model) model->paths = paths;
}

}  // namespace mg
