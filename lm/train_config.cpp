#include "lm/train_config.h"

#include <sstream>
#include <stdexcept>

namespace mg {

namespace {
std::string num(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}
}  // namespace

std::map<std::string, std::string> TrainConfig::to_map() const {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : model.to_map()) m["model." + k] = v;
  m["preset"] = preset, m["optimizer"] = optimizer, m["lr"] = num(lr), m["clip"] = num(clip);
  m["alpha"] = num(alpha), m["beta"] = num(beta), m["wdecay"] = num(wdecay), m["epochs"] = num(epochs);
  m["batch_size"] = num(batch_size), m["bptt"] = num(bptt), m["seed"] = std::to_string(seed);
  m["nonmono"] = num(nonmono), m["max_seq_len_delta"] = num(max_seq_len_delta);
  m["variable_bptt"] = variable_bptt ? "1" : "0";
  m["max_train_tokens"] = num(max_train_tokens), m["max_eval_tokens"] = num(max_eval_tokens);
  return m;
}

void TrainConfig::set(const std::string& raw_name, const std::string& value) {
  std::string name = raw_name;
  for (char& c : name) if (c == '-') c = '_';
  auto as_int = [&]() -> int64_t {
    size_t used = 0;
    int64_t v = 0;
    try { v = std::stoll(value, &used); } catch (...) { used = 0; }
    if (used != value.size()) throw std::invalid_argument("--" + raw_name + " expects an integer, got '" + value + "'");
    return v;
  };
  auto as_float = [&]() -> float {
    size_t used = 0;
    float v = 0;
    try { v = std::stof(value, &used); } catch (...) { used = 0; }
    if (used != value.size()) throw std::invalid_argument("--" + raw_name + " expects a number, got '" + value + "'");
    return v;
  };
  auto as_bool = [&]() {
    if (value == "1" || value == "true" || value == "yes") return true;
    if (value == "0" || value == "false" || value == "no") return false;
    throw std::invalid_argument("--" + raw_name + " expects true/false, got '" + value + "'");
  };
  if (name == "data") data = value;
  else if (name == "save") save = value;
  else if (name == "optimizer") optimizer = value;
  else if (name == "emsize") model.emsize = as_int();
  else if (name == "nhid") model.nhid = as_int();
  else if (name == "nhidlast") model.nhidlast = as_int();
  else if (name == "nlayers") model.nlayers = as_int();
  else if (name == "n_experts") model.n_experts = as_int();
  else if (name == "dropout") model.dropout = as_float();
  else if (name == "dropouth") model.dropouth = as_float();
  else if (name == "dropouti") model.dropouti = as_float();
  else if (name == "dropoute") model.dropoute = as_float();
  else if (name == "dropoutl") model.dropoutl = as_float();
  else if (name == "wdrop") model.wdrop = as_float();
  else if (name == "tied") model.tied = as_bool();
  else if (name == "head") model.head = parse_head_kind(value);
  else if (name == "fused_lstm") model.fused_lstm = as_bool();
  else if (name == "lr") lr = as_float();
  else if (name == "clip") clip = as_float();
  else if (name == "alpha") alpha = as_float();
  else if (name == "beta") beta = as_float();
  else if (name == "wdecay") wdecay = as_float();
  else if (name == "epochs") epochs = as_int();
  else if (name == "batch_size") batch_size = as_int();
  else if (name == "eval_batch_size") eval_batch_size = as_int();
  else if (name == "test_batch_size") test_batch_size = as_int();
  else if (name == "bptt") bptt = as_int();
  else if (name == "max_seq_len_delta") max_seq_len_delta = as_int();
  else if (name == "nonmono") nonmono = as_int();
  else if (name == "log_interval") log_interval = as_int();
  else if (name == "seed") seed = static_cast<uint64_t>(as_int());
  else if (name == "threads") threads = static_cast<int>(as_int());
  else if (name == "device") {
    if (value != "cpu" && value != "cuda")
      throw std::invalid_argument("--" + raw_name + " expects cpu or cuda, got '" + value + "'");
    device = parse_device(value);
  }
  else if (name == "tf32") tf32 = as_bool();
  else if (name == "max_minutes") max_minutes = as_float();
  else if (name == "max_steps") max_steps = as_int();
  else if (name == "max_train_tokens") max_train_tokens = as_int();
  else if (name == "max_eval_tokens") max_eval_tokens = as_int();
  else if (name == "variable_bptt") variable_bptt = as_bool();
  else if (name == "test_at_end") test_at_end = as_bool();
  else throw std::invalid_argument("unknown flag --" + raw_name + " (see --help)");
}

std::vector<std::string> preset_names() {
  return {"tiny", "small-softmax", "small-mos", "small-sigsoftmax", "small-mosig", "mos-paper"};
}

TrainConfig preset_config(const std::string& name) {
  TrainConfig c;
  c.preset = name;
  c.save = "runs/" + name;
  ModelConfig& m = c.model;
  // The small presets share AWD-LSTM's regularisation (Merity et al. 2017), scaled to a 2-layer model.
  auto small = [&]() {
    m.emsize = 200, m.nhid = 400, m.nlayers = 2, m.tied = true;
    m.dropout = 0.4f, m.dropouth = 0.25f, m.dropouti = 0.0f, m.dropoute = 0.1f, m.wdrop = 0.5f;
    c.batch_size = 20, c.bptt = 35, c.lr = 20, c.clip = 0.25f, c.alpha = 2, c.beta = 1, c.wdecay = 1.2e-6f;
  };
  if (name == "tiny") {
    m.emsize = 64, m.nhid = 64, m.nhidlast = 64, m.nlayers = 1, m.tied = true, m.head = HeadKind::Softmax;
    m.dropout = m.dropouth = m.dropouti = m.dropoute = m.dropoutl = m.wdrop = 0.0f;
    c.batch_size = 16, c.bptt = 32, c.lr = 20, c.clip = 0.25f, c.alpha = 0, c.beta = 0, c.wdecay = 0;
  } else if (name == "small-softmax" || name == "small-sigsoftmax") {
    small();
    m.nhidlast = 200;  // last layer = E (tied)
    m.head = name == "small-softmax" ? HeadKind::Softmax : HeadKind::Sigsoftmax;
  } else if (name == "small-mos" || name == "small-mosig") {
    small();
    m.nhidlast = 400, m.n_experts = 5, m.dropoutl = 0.4f;
    m.head = name == "small-mos" ? HeadKind::MoS : HeadKind::MoSig;
  } else if (name == "mos-paper") {
    // Yang et al. 2017, PTB: E=280, LSTM [960, 960, 620], K=15, B=12, T=70.
    m.emsize = 280, m.nhid = 960, m.nhidlast = 620, m.nlayers = 3, m.n_experts = 15, m.tied = true;
    m.head = HeadKind::MoS;
    m.dropouti = 0.4f, m.dropouth = 0.225f, m.dropoutl = 0.29f, m.dropout = 0.4f, m.dropoute = 0.1f, m.wdrop = 0.5f;
    c.batch_size = 12, c.bptt = 70, c.lr = 20, c.clip = 0.25f, c.alpha = 2, c.beta = 1, c.wdecay = 1.2e-6f;
    c.epochs = 1000;
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown preset '" + name + "': choose one of " + known);
  }
  return c;
}

}  // namespace mg
